"""Loading a demo plan: COPY into empty tables (demo.bulk), or the ingest's upserts batch by batch."""

from __future__ import annotations

import asyncio
import time
from array import array
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from typing import TypeVar, cast

import asyncpg

import demo.bulk as copy_load
from db.pool import binary_times
from db.queries import bulk_load
from db.queries.figures import refresh_institution_figures, refresh_researcher_figures
from db.queries.writes.analyses import upsert_analyses
from db.queries.writes.citations import update_citations
from db.queries.writes.institutions import upsert_institutions
from db.queries.writes.matches import apply_authorship_matches
from db.queries.writes.papers import upsert_papers
from db.queries.writes.researchers import replace_researcher_works, upsert_researchers
from demo.bulk import Progress
from demo.papers import generate_papers, generate_works
from demo.people import (
    DEFAULT_PAPERS,
    DEFAULT_SEED,
    DemoPlan,
    make_institutions,
    new_people,
    researcher_index,
    researcher_records,
)

_T = TypeVar("_T")


@dataclass(slots=True)
class DemoReport:
    papers: int
    researchers: int
    institutions: int
    works: int
    seconds: float


def _batches(items: Iterator[_T], size: int) -> Iterator[list[_T]]:
    batch: list[_T] = []
    for item in items:
        batch.append(item)
        if len(batch) >= size:
            yield batch
            batch = []
    if batch:
        yield batch


async def prefetched(batches: Iterator[_T]) -> AsyncIterator[_T]:
    """The batches, the next one generated in a thread while the database writes this one.

    The generator holds the GIL only while it computes; PostgreSQL works meanwhile, so on a
    machine with two cores generation and writing overlap instead of taking turns.
    """
    upcoming = asyncio.create_task(asyncio.to_thread(next, batches, None))
    while True:
        batch = await upcoming
        if batch is None:
            return
        upcoming = asyncio.create_task(asyncio.to_thread(next, batches, None))
        yield batch


async def load_demo(
    target: asyncpg.Connection | asyncpg.Pool | str,
    *,
    papers: int = DEFAULT_PAPERS,
    seed: int = DEFAULT_SEED,
    batch_size: int = 5_000,
    progress: Progress | None = None,
    bulk: bool | None = None,
) -> DemoReport:
    """Generate the demo dataset and write it, then refresh figures.

    `target` is a migrated database (DSN, pool or connection). Into empty tables the rows are
    COPYed once each with the indexes built after (`demo.bulk`, one transaction); otherwise they go
    through db/queries/writes.py's upserts, batch by batch. Both leave the same rows, and loading the
    same plan twice writes nothing new: every upsert is idempotent. `bulk` forces one path (True
    fails on a database with rows).
    """
    if isinstance(target, str):
        conn = await asyncpg.connect(target)
        try:
            return await load_demo(conn, papers=papers, seed=seed, batch_size=batch_size, progress=progress, bulk=bulk)
        finally:
            await conn.close()
    if isinstance(target, asyncpg.Pool):
        # A serving pool's connections read times as text; the load COPYs them in binary (db/pool.py).
        async with target.acquire() as pooled, binary_times(cast(asyncpg.Connection, pooled)) as conn:
            return await load_demo(conn, papers=papers, seed=seed, batch_size=batch_size, progress=progress, bulk=bulk)
    return await _load(target, DemoPlan.for_papers(papers, seed), batch_size, progress, bulk)


async def _load(
    conn: asyncpg.Connection, plan: DemoPlan, batch_size: int, progress: Progress | None, bulk: bool | None
) -> DemoReport:
    # Large batches make long statements; the loader is not a web request. A crash loses at most the
    # last batches, which a re-run writes again, so commits need not wait for the disk; the full-text
    # index merges its pending entries less often; the figures' sorts stay in memory. The caller's
    # connection (maybe a pooled one) gets its own settings back afterwards.
    await conn.execute(
        "SET statement_timeout = 0; SET synchronous_commit = off; SET gin_pending_list_limit = '32MB';"
        " SET work_mem = '64MB'"
    )
    try:
        empty = await bulk_load.is_empty(conn, copy_load.TABLES)
        if bulk and not empty:
            raise ValueError("a bulk load needs empty tables")
        if bulk or (bulk is None and empty):
            return await _write_bulk(conn, plan, batch_size, progress)
        return await _write(conn, plan, batch_size, progress)
    finally:
        await conn.execute(
            "RESET statement_timeout; RESET synchronous_commit; RESET gin_pending_list_limit; RESET work_mem;"
            " RESET maintenance_work_mem"
        )


async def _write_bulk(
    conn: asyncpg.Connection, plan: DemoPlan, batch_size: int, progress: Progress | None
) -> DemoReport:
    started = time.monotonic()
    report = progress or (lambda stage, done, total: None)
    # Index builds sort in memory; one transaction, so an interrupted load leaves the tables empty.
    await conn.execute("SET maintenance_work_mem = '512MB'")
    async with conn.transaction():
        works = await copy_load.load(conn, plan, make_institutions(plan), batch_size, report)
    report("statistics", 0, 1)
    await bulk_load.analyze(conn)
    report("statistics", 1, 1)
    return DemoReport(plan.papers, plan.researchers, plan.institutions, works, time.monotonic() - started)


async def _write(conn: asyncpg.Connection, plan: DemoPlan, batch_size: int, progress: Progress | None) -> DemoReport:
    started = time.monotonic()
    report = progress or (lambda stage, done, total: None)

    institutions = make_institutions(plan)
    people = new_people(plan)
    report("researchers", 0, plan.researchers)
    async with conn.transaction():
        inst_ids = await upsert_institutions(conn, institutions)
        rids = array("q", [0]) * plan.researchers
        done = 0
        for chunk in _batches(researcher_records(plan, people), 50_000):
            ids = await upsert_researchers(conn, chunk)
            for k, rec in enumerate(chunk, done):
                # 0: a profile merged into another since (migration 0025): its id is never made again, and what the
                # plan gives it (matches, works) is left to the profile it was merged into.
                rids[k] = ids.get(rec.s2_author_id or "", 0)
            done += len(chunk)
            report("researchers", done, plan.researchers)

    arxiv_ids: list[str] = []
    done = 0
    report("papers", 0, plan.papers)
    async for papers in prefetched(_batches(generate_papers(plan, people, institutions, arxiv_ids), batch_size)):
        keys = {m.researcher_key for _, ms, _, _ in papers for m in ms if m.researcher_key is not None}
        key_ids = {k: rid for k in keys if (rid := rids[researcher_index(k)])}
        async with conn.transaction():
            await upsert_papers(conn, [p for p, _, _, _ in papers])
            await apply_authorship_matches(conn, [m for _, ms, _, _ in papers for m in ms], key_ids, inst_ids)
            await update_citations(conn, [c for _, _, c, _ in papers if c is not None])
            await upsert_analyses(conn, [a for _, _, _, a in papers if a is not None])
        done += len(papers)
        report("papers", done, plan.papers)

    works_total = 0
    report("works", 0, plan.researchers)
    async for careers in prefetched(_batches(generate_works(plan, people, arxiv_ids), 2_000)):
        async with conn.transaction():
            await upsert_researchers(conn, [totals for _, _, totals in careers])
            await replace_researcher_works(conn, {rids[j]: works for j, works, _ in careers if rids[j]})
        works_total += sum(len(works) for _, works, _ in careers)
        report("works", careers[-1][0] + 1, plan.researchers)

    report("figures", 0, 1)
    async with conn.transaction():
        await refresh_researcher_figures(conn, None)
        await refresh_institution_figures(conn, None)
    await conn.execute("ANALYZE")
    report("figures", 1, 1)
    return DemoReport(plan.papers, plan.researchers, plan.institutions, works_total, time.monotonic() - started)
