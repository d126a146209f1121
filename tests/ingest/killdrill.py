"""The "Ingest killed" drill: `wovepaper ingest` SIGKILLed at random points, resumed, and compared row by row with
an uninterrupted run.

The upstreams are the recorded fixtures (arXiv pages, S2 and OpenAlex bodies) served over HTTP on loopback. Each
run is a real process: forked from a server that has already imported the project (multiprocessing's forkserver),
so a run starts in milliseconds rather than the second an interpreter takes to import everything. A kill point
is a phase (the harvest or the enrichment), a number of upstream requests answered in that run, and a delay
after that answer: SIGKILL lands wherever the run is then (parsing, writing, committing, waiting for the next
answer). The run is then resumed until it completes, and every row of every table is compared, by natural key,
with what the uninterrupted run wrote: rows lost, duplicated or changed.

Used by tests/ingest/test_kill_drill.py (a dozen kill points) and bench/ingest_kill.py (a hundred).
"""

from __future__ import annotations

import asyncio
import multiprocessing
import os
import random
import signal
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from email.utils import format_datetime
from multiprocessing import forkserver
from multiprocessing.context import ForkServerContext
from pathlib import Path
from typing import Any

import asyncpg

from tests.ingest.conftest import FakeOAI, list_records_page, three_page_archive
from tests.ingest.loopback import Loopback, serve
from tests.ingest.upstreams import CHEMCROW_JOURNAL_DOI, FakeScholarly, arxiv_raw, enrich_archive_page

PHASES = {"arxiv": ["ingest", "arxiv"], "enrich": ["ingest", "enrich", "--batch-size", "2"]}
# Deleted rather than truncated: for a few dozen rows, a DELETE takes milliseconds where TRUNCATE takes a tenth
# of a second. What references these goes with them (ON DELETE CASCADE).
RESET = [f"DELETE FROM {t}" for t in ("papers", "researchers", "institutions", "ingest_checkpoints", "ingest_progress")]

# Every table the ingest writes, as (natural key, every other column that is not a surrogate id or a clock time).
ROWS: dict[str, str] = {
    "papers": """
        SELECT arxiv_id, row(version, slug, title, abstract, authors_text, categories, primary_category, published,
               updated, doi, journal_ref, comments, license, withdrawn, cited_by_count, cited_by_source, s2_paper_id,
               openalex_id, author_count, matched_count, enriched_at IS NOT NULL)::text
        FROM papers""",
    "paper_versions": """
        SELECT p.arxiv_id || ' v' || v.version, row(v.submitted_at, v.size_kb, v.source_type)::text
        FROM paper_versions v JOIN papers p ON p.id = v.paper_id""",
    "authorships": """
        SELECT p.arxiv_id || ' #' || a.position,
               row(a.name, coalesce(r.s2_author_id, r.openalex_id, r.orcid), a.affiliation, a.is_collaboration)::text
        FROM authorships a JOIN papers p ON p.id = a.paper_id LEFT JOIN researchers r ON r.id = a.researcher_id""",
    "authorship_institutions": """
        SELECT p.arxiv_id || ' #' || ai.position || ' ' || i.ror_id, ''
        FROM authorship_institutions ai JOIN papers p ON p.id = ai.paper_id
        JOIN institutions i ON i.id = ai.institution_id""",
    "researchers": """
        SELECT coalesce(s2_author_id, openalex_id, orcid),
               row(name, name_slug, s2_author_id, openalex_id, orcid, s2_paper_count, s2_citation_count, s2_h_index,
                   s2_updated_at IS NOT NULL, openalex_works_count, openalex_cited_by_count, openalex_h_index,
                   openalex_i10_index, openalex_updated_at IS NOT NULL, paper_count, h_index, i10_index,
                   citation_count, works_count)::text
        FROM researchers""",
    "researcher_works": """
        SELECT coalesce(r.s2_author_id, r.openalex_id, r.orcid) || ' ' || w.source || ' ' || w.external_id,
               row(w.title, w.year, w.citation_count, w.arxiv_id, w.doi)::text
        FROM researcher_works w JOIN researchers r ON r.id = w.researcher_id""",
    "institutions": """
        SELECT ror_id, row(name, name_slug, aliases, country, type, openalex_id, paper_count, researcher_count)::text
        FROM institutions""",
    "researcher_institutions": """
        SELECT coalesce(r.s2_author_id, r.openalex_id, r.orcid) || ' ' || i.ror_id, row(x.first_year, x.last_year)::text
        FROM researcher_institutions x JOIN researchers r ON r.id = x.researcher_id
        JOIN institutions i ON i.id = x.institution_id""",
    "ingest_checkpoints": "SELECT source, state::text FROM ingest_checkpoints",
    "ingest_progress": "SELECT source, row(records, pages, caught_up_to)::text FROM ingest_progress",
    "enrich_failures": """
        SELECT p.arxiv_id, row(f.attempts, f.reason)::text FROM enrich_failures f JOIN papers p ON p.id = f.paper_id""",
}

Snapshot = dict[str, list[tuple[str, str]]]


async def snapshot(dsn: str) -> Snapshot:
    conn = await asyncpg.connect(dsn)
    try:
        return {table: [(r[0], r[1]) for r in await conn.fetch(sql)] for table, sql in ROWS.items()}
    finally:
        await conn.close()


@dataclass
class Diff:
    rows: int = 0  # rows compared (the uninterrupted run's)
    lost: int = 0  # a key the uninterrupted run wrote that is missing
    duplicated: int = 0  # a key written more often than by the uninterrupted run
    changed: int = 0  # a key whose other columns differ
    details: list[str] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.lost or self.duplicated or self.changed)


def compare(reference: Snapshot, other: Snapshot) -> Diff:
    diff = Diff()
    for table, rows in reference.items():
        diff.rows += len(rows)
        want, got = Counter(k for k, _ in rows), Counter(k for k, _ in other[table])
        values = {k: v for k, v in rows}
        for key in want.keys() - got.keys():
            diff.lost += want[key]
            diff.details.append(f"{table}: lost {key} {values[key]}")
        for key in got.keys() - want.keys():
            diff.duplicated += got[key]  # a row the uninterrupted run never wrote is one too many
            diff.details.append(f"{table}: extra {key}")
        for key in want.keys() & got.keys():
            if got[key] > want[key]:
                diff.duplicated += got[key] - want[key]
                diff.details.append(f"{table}: {key} {got[key]} times")
        mine = dict(other[table])
        for key, value in rows:
            if key in mine and mine[key] != value:
                diff.changed += 1
                diff.details.append(f"{table}: {key} was {value}, is {mine[key]}")
    return diff


def drill_upstreams() -> tuple[FakeOAI, FakeScholarly]:
    """Five arXiv pages: the two recorded ListRecords pages, the recorded withdrawn and five-version papers, the
    three papers S2 and OpenAlex know (recorded bodies), then a page that withdraws one paper and revises another
    harvested on the page before. Then S2 and OpenAlex as in upstreams.py."""
    oai = three_page_archive(last_token="t3")
    page4 = enrich_archive_page().replace(b"<resumptionToken/>", b"<resumptionToken>t4</resumptionToken>")
    v2 = datetime(2023, 6, 1, 9, 30, tzinfo=UTC)
    revised = arxiv_raw(
        "2304.05376",
        "ChemCrow: Augmenting large-language models with chemistry tools (revised)",
        "Andres M. Bran, Sam Cox, Oliver Schilter, Carlo Baldassari, Andrew D. White, Philippe Schwaller",
        datetime(2023, 4, 11, 12, 0, tzinfo=UTC),
        doi=CHEMCROW_JOURNAL_DOI,
    ).replace(
        b"</version>",
        f'</version><version version="v2"><date>{format_datetime(v2, usegmt=True)}</date><size>120kb</size>'
        "<source_type>D</source_type></version>".encode(),
        1,
    )
    deleted = (
        b'<record xmlns="http://www.openarchives.org/OAI/2.0/"><header status="deleted">'
        b"<identifier>oai:arXiv.org:0704.0248</identifier><datestamp>2026-11-30</datestamp></header></record>"
    )
    page5 = list_records_page([deleted, revised], token="")
    oai.by_token |= {"t3": page4, "t4": page5}
    return oai, FakeScholarly()


def _run_cli(argv: list[str], env: dict[str, str], log: str) -> None:
    """The child: `wovepaper <argv>` with this environment, its output appended to `log`."""
    fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    for name in [k for k in os.environ if k.startswith("WOVEPAPER_") or k in ("DATABASE_URL", "REDIS_URL")]:
        del os.environ[name]
    os.environ.update(env)
    sys.argv = ["wovepaper", *argv]
    from cli import main

    main()


@dataclass(frozen=True)
class KillPoint:
    phase: str  # "arxiv" or "enrich"
    after_requests: int  # SIGKILL once this many upstream requests of the run were answered...
    delay_s: float  # ...and this long after,
    in_write: bool = False  # or this long after the run was next seen inside a transaction that has written


class WriteWatch:
    """Whether a run is inside a transaction that has written something (it has a transaction id), seen from a
    connection of its own, polled from the drill's thread."""

    def __init__(self, dsn: str) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.conn: asyncpg.Connection = self._call(asyncpg.connect(dsn))

    def _call(self, coro: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(30)

    def writing(self) -> bool:
        return bool(self._call(self.conn.fetchval(WRITING)))

    def close(self) -> None:
        self._call(self.conn.close())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join()
        self.loop.close()


WRITING = """
SELECT EXISTS (SELECT 1 FROM pg_stat_activity WHERE datname = current_database()
               AND application_name LIKE 'wovepaper-ingest %' AND backend_xid IS NOT NULL)
"""


@dataclass
class Outcome:
    point: KillPoint
    killed: bool  # False: the run finished before the kill point
    resumes: int  # runs it took to complete afterwards
    diff: Diff
    seconds: float  # the killed run and its resumption
    resume_s: float = 0.0  # the resumption alone: from the restart to a completed phase


class Drill:
    """Loopback upstreams, one database, and the runs of `wovepaper ingest` against them."""

    def __init__(self, dsn: str, workdir: Path, loop: Loopback, ctx: ForkServerContext, watch: WriteWatch) -> None:
        self.dsn, self.workdir, self.loop, self.ctx, self.watch = dsn, workdir, loop, ctx, watch
        self.env = loop.env(dsn)
        self.log = str(workdir / "ingest.log")
        self.reference: dict[str, Snapshot] = {}  # after each phase of the uninterrupted run
        self.requests: dict[str, int] = {}  # upstream requests each phase of the uninterrupted run makes
        self._target: int | None = None
        self._reached = threading.Event()
        loop.on_request = self._count

    def _count(self, path: str) -> None:
        if self._target is not None and self.loop.requests >= self._target:
            self._reached.set()

    def _reset(self) -> None:
        async def run() -> None:
            conn = await asyncpg.connect(self.dsn)
            try:
                for statement in RESET:
                    await conn.execute(statement)
            finally:
                await conn.close()

        asyncio.run(run())

    def _start(self, phase: str) -> multiprocessing.process.BaseProcess:
        proc = self.ctx.Process(target=_run_cli, args=(PHASES[phase], self.env, self.log), daemon=True)
        proc.start()
        return proc

    def run(
        self,
        phase: str,
        kill_after: int | None = None,
        delay_s: float = 0.0,
        in_write: bool = False,
        timeout: float = 120,
    ) -> bool:
        """One run of a phase; with `kill_after`, SIGKILL it at that point. True when the run was killed."""
        start = self.loop.requests
        self._reached.clear()
        self._target = None if kill_after is None else start + kill_after
        proc = self._start(phase)
        deadline = time.monotonic() + timeout
        killed = False
        if kill_after is not None:
            while not self._reached.wait(0.005):
                if not proc.is_alive() or time.monotonic() > deadline:
                    break
            while in_write and proc.is_alive() and not self.watch.writing() and time.monotonic() < deadline:
                pass
            if self._reached.is_set() and delay_s > 0:
                time.sleep(delay_s)
            if proc.is_alive():
                os.kill(proc.pid or 0, signal.SIGKILL)
                killed = True
        proc.join(max(deadline - time.monotonic(), 1))
        self._target = None
        if proc.is_alive():
            proc.kill()
            proc.join()
            raise RuntimeError(f"`wovepaper {' '.join(PHASES[phase])}` did not finish within {timeout} s")
        code = proc.exitcode
        proc.close()
        if not killed and code not in (0, -signal.SIGKILL):
            raise RuntimeError(f"`wovepaper {' '.join(PHASES[phase])}` exited {code}:\n{self.tail()}")
        return killed

    def tail(self, lines: int = 30) -> str:
        text = Path(self.log).read_text(errors="replace") if Path(self.log).exists() else ""
        return "\n".join(text.splitlines()[-lines:])

    def _harvest_complete(self) -> bool:
        async def run() -> bool:
            conn = await asyncpg.connect(self.dsn)
            try:
                state = await conn.fetchval("SELECT state FROM ingest_checkpoints WHERE source = 'arxiv:all'")
            finally:
                await conn.close()
            return state is not None and '"token": null' in state

        return asyncio.run(run())

    def complete(self, phase: str) -> int:
        """Resume a phase until it completed; returns the runs it took. A harvest is complete once its checkpoint
        says so (a killed run may have committed the last page already: running it again would harvest anew)."""
        runs = 0
        if phase == "arxiv":
            while not self._harvest_complete():
                self.run(phase)
                runs += 1
        else:
            while True:
                runs += 1
                if not self.run(phase):
                    break
        return runs

    def record_reference(self) -> None:
        """The uninterrupted run: each phase once, and what the database holds after it."""
        self._reset()
        for phase in PHASES:
            before = self.loop.requests
            if self.run(phase):
                raise RuntimeError("the uninterrupted run was killed")
            self.requests[phase] = self.loop.requests - before
            self.reference[phase] = asyncio.run(snapshot(self.dsn))

    def kill_and_resume(self, points: list[KillPoint]) -> list[Outcome]:
        """From an empty database, each phase in turn: killed at its kill point (if it has one), resumed until it
        completed, and compared with the uninterrupted run. A phase without a kill point just runs."""
        self._reset()
        outcomes = []
        for phase in PHASES:
            started = time.monotonic()
            point = next((p for p in points if p.phase == phase), None)
            if point is None:
                self.complete(phase)
                continue
            killed = self.run(phase, kill_after=point.after_requests, delay_s=point.delay_s, in_write=point.in_write)
            resumed = time.monotonic()
            resumes = self.complete(phase) if killed else 0
            done = time.monotonic()
            diff = compare(self.reference[phase], asyncio.run(snapshot(self.dsn)))
            outcomes.append(Outcome(point, killed, resumes, diff, done - started, done - resumed))
            if diff:
                break  # the next phase would start from a wrong state
        return outcomes

    def kill_points(self, rng: random.Random) -> Iterator[list[KillPoint]]:
        """Pairs of kill points, one in the harvest and one in the enrichment that follows it: a random request of
        the uninterrupted run, then a random delay (up to 50 ms); every other pair, a shorter one (up to 10 ms)
        once the run is next seen writing: a transaction's writes take a small share of a run's time, and that is
        where a kill must lose nothing."""
        in_write = False
        while True:
            in_write = not in_write
            yield [
                KillPoint(
                    phase,
                    rng.randint(1, self.requests[phase]),
                    round(rng.uniform(0, 0.01 if in_write else 0.05), 4),
                    in_write,
                )
                for phase in PHASES
            ]


@contextmanager
def drill(dsn: str, workdir: Path) -> Iterator[Drill]:
    """Upstreams on loopback and a forkserver that has imported the CLI, for the life of the block."""
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(["cli", "ingest.runner", "tests.ingest.killdrill"])
    oai, scholarly = drill_upstreams()
    watch = WriteWatch(dsn)
    try:
        with serve(oai, scholarly) as loop:
            yield Drill(dsn, workdir, loop, ctx, watch)
    finally:
        watch.close()
        # The forkserver outlives its last child; its sockets close with it.
        forkserver._forkserver._stop()  # type: ignore[attr-defined]


def summarize(outcomes: list[Outcome]) -> dict[str, Any]:
    killed = [o for o in outcomes if o.killed]
    return {
        "kill_points": len(outcomes),
        "killed_mid_run": len(killed),
        "by_phase": dict(Counter(o.point.phase for o in killed)),
        "while_writing": sum(o.point.in_write for o in killed),
        "resumes": sum(o.resumes for o in killed),
        "rows_compared": sum(o.diff.rows for o in outcomes),
        "lost": sum(o.diff.lost for o in outcomes),
        "duplicated": sum(o.diff.duplicated for o in outcomes),
        "changed": sum(o.diff.changed for o in outcomes),
        "seconds": round(sum(o.seconds for o in outcomes), 1),
    }
