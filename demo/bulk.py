"""The demo dataset into an empty database at COPY speed: each row written once, indexes built after.

The rows are the ones the upsert path (`demo.loader`) leaves behind for the same plan: the same
generators, and ids given in the order that path's inserts take them (papers and researchers from 1 in
generation order). Everything a paper needs (authorship matches, citations, analysis) is known before
its row is written, and researchers are written once their works' totals are known. The whole load is
one transaction: a failed or interrupted load leaves the database empty, as it found it.
"""

from __future__ import annotations

import asyncio
import hashlib
import multiprocessing
import traceback
import uuid
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from multiprocessing.process import BaseProcess
from multiprocessing.queues import Queue
from queue import Empty, Full
from typing import Any

import asyncpg

from db.ids import normalize_ror
from db.queries import bulk_load
from db.queries.figures import refresh_institution_figures, refresh_researcher_figures
from db.queries.writes.analyses import AnalysisRecord
from db.queries.writes.institutions import upsert_institutions
from db.records import AuthorshipMatch, CitationRecord, InstitutionRecord, PaperRecord, ResearcherRecord
from db.slugs import paper_slug, slugify
from demo.papers import WorkRow, generate_papers, generate_work_rows
from demo.people import DemoPlan, make_institutions, new_people, researcher_index, researcher_records

TABLES = (
    "papers",
    "paper_versions",
    "authorships",
    "authorship_institutions",
    "researchers",
    "researcher_works",
    "researcher_institutions",
)
PAPER_COLUMNS = (
    "id", "arxiv_id", "version", "slug", "title", "abstract", "authors_text", "categories", "primary_category",
    "published", "updated", "doi", "journal_ref", "comments", "license", "withdrawn", "author_count",
    "matched_count", "cited_by_count", "cited_by_source", "s2_paper_id", "openalex_id", "s2_corpus_id",
    "summary", "topics", "paper_type", "research_field", "novelty", "significance_score", "analysed",
    "analysis_model", "analysis_source_md5", "analysed_at",
)  # fmt: skip
VERSION_COLUMNS = ("paper_id", "version", "submitted_at", "size_kb", "source_type")
AUTHORSHIP_COLUMNS = ("paper_id", "position", "name", "researcher_id", "affiliation", "is_collaboration")
AFFILIATION_COLUMNS = ("paper_id", "position", "institution_id")
RESEARCHER_COLUMNS = (
    "id", "name", "name_slug", "s2_author_id", "openalex_id", "orcid", "s2_paper_count", "s2_citation_count",
    "s2_h_index", "openalex_works_count", "openalex_cited_by_count", "openalex_h_index", "openalex_i10_index",
    "s2_updated_at", "openalex_updated_at",
)  # fmt: skip
WORK_COLUMNS = ("researcher_id", "source", "external_id", "title", "year", "citation_count", "arxiv_id", "doi")

Row = tuple[Any, ...]
Progress = Callable[[str, int, int], None]  # (stage, done, total)


@dataclass(slots=True)
class PaperRows:
    papers: list[Row] = field(default_factory=list)
    versions: list[Row] = field(default_factory=list)
    authorships: list[Row] = field(default_factory=list)
    affiliations: list[Row] = field(default_factory=list)


@dataclass(slots=True)
class Identities:
    """What the researchers' first pass gives besides names: their optional identifiers, by index."""

    openalex: list[str | None] = field(default_factory=list)
    orcid: list[str | None] = field(default_factory=list)


def _source_md5(title: str, abstract: str) -> uuid.UUID:
    return uuid.UUID(hashlib.md5(f"{title}\n{abstract}".encode()).hexdigest())


def _paper_row(
    paper_id: int, p: PaperRecord, matched: int, c: CitationRecord | None, a: AnalysisRecord | None, now: datetime
) -> Row:
    cited = (c.cited_by_count, c.source, c.s2_paper_id, c.openalex_id, c.s2_corpus_id) if c else (None,) * 5
    analysis: Row = (None,) * 6 + (False, None, None, None)
    if a is not None:
        analysis = (a.summary, a.topics, a.paper_type, a.research_field, a.novelty, a.significance_score, True)
        analysis += (a.model, a.source_md5 or _source_md5(p.title, p.abstract), now)
    return (
        (paper_id, p.arxiv_id, p.version, paper_slug(p.arxiv_id, p.title), p.title, p.abstract, p.authors_text)
        + (p.categories, p.primary_category, p.published, p.updated, p.doi, p.journal_ref, p.comments, p.license)
        + (p.withdrawn, len(p.authors), matched)
        + cited
        + analysis
    )


def _institution(inst_ids: dict[str, int]) -> Callable[[str], int | None]:
    # The generator's ROR ids are normalised already: the dictionary answers, normalising only on a miss.
    return lambda ror: inst_ids.get(ror) or inst_ids.get(normalize_ror(ror) or ror)


def paper_rows(
    generated: Iterator[tuple[PaperRecord, list[AuthorshipMatch], CitationRecord | None, AnalysisRecord | None]],
    inst_ids: dict[str, int],
    now: datetime,
    batch_size: int,
) -> Iterator[PaperRows]:
    """Batches of every row the papers need, with researcher ids as the upsert path assigns them (index + 1)."""
    rows = PaperRows()
    institution = _institution(inst_ids)
    for paper_id, (p, matches, citation, analysis) in enumerate(generated, 1):
        by_position = {m.position: m for m in matches}
        matched = 0
        for a in p.authors:
            m = None if a.is_collaboration else by_position.get(a.position)
            rid = researcher_index(m.researcher_key) + 1 if m and m.researcher_key else None
            matched += rid is not None
            rows.authorships.append((paper_id, a.position, a.name, rid, a.affiliation, a.is_collaboration))
            if m is not None:
                insts = {i for i in map(institution, m.institution_rors) if i is not None}
                rows.affiliations.extend((paper_id, a.position, i) for i in sorted(insts))
        for v in {v.version: v for v in p.versions}.values():
            rows.versions.append((paper_id, v.version, v.submitted_at, v.size_kb, v.source_type))
        rows.papers.append(_paper_row(paper_id, p, matched, citation, analysis, now))
        if len(rows.papers) >= batch_size:
            yield rows
            rows = PaperRows()
    if rows.papers:
        yield rows


def identities(records: Iterator[ResearcherRecord], into: Identities) -> None:
    for r in records:
        into.openalex.append(r.openalex_id)
        into.orcid.append(r.orcid)


def researcher_rows(
    careers: Iterator[tuple[int, list[WorkRow], ResearcherRecord]], ids: Identities, now: datetime, batch: int
) -> Iterator[tuple[list[Row], list[Row]]]:
    """Batches of researcher rows (with their works' totals) and of their works, each work once."""
    researchers: list[Row] = []
    works: list[Row] = []
    for j, career, t in careers:
        rid = j + 1
        researchers.append(
            (rid, t.name, slugify(t.name), t.s2_author_id, ids.openalex[j], ids.orcid[j], t.s2_paper_count)
            + (t.s2_citation_count, t.s2_h_index, t.openalex_works_count, t.openalex_cited_by_count)
            + (t.openalex_h_index, t.openalex_i10_index, now, now)
        )
        once = {(w[0], w[1]): w for w in career}
        works.extend((rid, *w) for w in once.values())
        if len(researchers) >= batch:
            yield researchers, works
            researchers, works = [], []
    if researchers:
        yield researchers, works


Message = tuple[str, Any]


def produce(plan: DemoPlan, inst_ids: dict[str, int], now: datetime, batch_size: int, out: Queue[Message]) -> None:
    """In a process of its own: every row of the plan, as ("papers", PaperRows) and ("researchers", (researchers,
    works)) batches, then ("done", None); ("error", text) when generating fails. The generators are sequential
    (one seeded stream each), so the process generates while the loader's process encodes and COPYs."""
    try:
        institutions = make_institutions(plan)
        people = new_people(plan)
        ids = Identities()
        identities(researcher_records(plan, people), ids)
        arxiv_ids: list[str] = []
        generated = generate_papers(plan, people, institutions, arxiv_ids)
        for rows in paper_rows(generated, inst_ids, now, batch_size):
            _put(out, ("papers", rows))
        for batch in researcher_rows(generate_work_rows(plan, people, arxiv_ids), ids, now, batch_size):
            _put(out, ("researchers", batch))
        _put(out, ("done", None))
    except Exception:  # noqa: BLE001 - reported to the loader, which raises it
        _put(out, ("error", traceback.format_exc()))


def _put(out: Queue[Message], message: Message) -> None:
    # A loader that died (killed, interrupted) reads no more: the generating process ends instead of waiting.
    parent = multiprocessing.parent_process()
    while True:
        if parent is not None and not parent.is_alive():
            raise SystemExit(1)
        try:
            out.put(message, timeout=0.5)
            return
        except Full:
            continue


def _next_message(queue: Queue[Message], process: BaseProcess) -> Message:
    # Never an unbounded wait: a thread blocked in get() would keep an interrupted loader from exiting.
    while True:
        try:
            return queue.get(timeout=0.5)
        except Empty:
            if not process.is_alive():
                return ("error", "the generating process ended before its last batch")


async def _messages(plan: DemoPlan, inst_ids: dict[str, int], now: datetime, batch: int) -> AsyncIterator[Message]:
    # Spawned, not forked: a forked child would hold the loader's database socket open after the loader died,
    # and with it the load's transaction and locks.
    context = multiprocessing.get_context("spawn")
    queue: Queue[Message] = context.Queue(maxsize=4)
    process = context.Process(target=produce, args=(plan, inst_ids, now, batch, queue), daemon=True)
    process.start()
    try:
        while True:
            kind, body = await asyncio.to_thread(_next_message, queue, process)
            if kind == "done":
                return
            if kind == "error":
                raise RuntimeError(f"generating the demo failed:\n{body}")
            yield kind, body
    finally:
        process.kill()
        process.join()


async def load(
    conn: asyncpg.Connection,
    plan: DemoPlan,
    institutions: Sequence[InstitutionRecord],
    batch_size: int,
    progress: Progress,
) -> int:
    """Write the plan into empty tables inside the caller's transaction; returns the number of works."""
    now: datetime = await conn.fetchval("SELECT now()")
    deferred = await bulk_load.deferred_indexes(conn, TABLES)
    inst_ids = await upsert_institutions(conn, institutions)
    papers = researchers = works_total = 0
    progress("papers", 0, plan.papers)
    async for kind, body in _messages(plan, inst_ids, now, batch_size):
        if kind == "papers":
            await bulk_load.copy_rows(conn, "papers", PAPER_COLUMNS, body.papers)
            await bulk_load.copy_rows(conn, "paper_versions", VERSION_COLUMNS, body.versions)
            await bulk_load.copy_rows(conn, "authorships", AUTHORSHIP_COLUMNS, body.authorships)
            await bulk_load.copy_rows(conn, "authorship_institutions", AFFILIATION_COLUMNS, body.affiliations)
            papers += len(body.papers)
            progress("papers", papers, plan.papers)
        else:
            await bulk_load.copy_rows(conn, "researchers", RESEARCHER_COLUMNS, body[0])
            await bulk_load.copy_rows(conn, "researcher_works", WORK_COLUMNS, body[1])
            works_total += len(body[1])
            researchers += len(body[0])
            progress("works", researchers, plan.researchers)

    progress("indexes", 0, 1)
    await bulk_load.fill_researcher_institutions(conn)
    await deferred.restore(conn)
    await bulk_load.rebuild_derived(conn)
    for table in ("papers", "researchers"):
        await bulk_load.continue_identity(conn, table)
    progress("indexes", 1, 1)
    progress("figures", 0, 1)
    await refresh_researcher_figures(conn, None)
    await refresh_institution_figures(conn, None)
    progress("figures", 1, 1)
    return works_total
