"""The enrichment (Semantic Scholar + OpenAlex -> researchers); the harvest (arXiv OAI-PMH -> papers) is in
`ingest.harvest`.

Both are transactional per batch: a page (or an enrichment batch) is written, together with its
checkpoint, in one transaction, and the cache forgets what it touched only after that commits. A
failure loses at most the batch in flight; the next run resumes where the last commit left off.
"""

from __future__ import annotations

import logging
from collections import Counter, defaultdict
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import TextIO

import asyncpg

from db.cache.store import CacheStore
from db.queries.figures import refresh_figures
from db.queries.ingest_state import (
    QueuedPaper,
    clear_enrich_failures,
    fetch_enrich_queue,
    fetch_identity_owners,
    fetch_s2_figures,
    fetch_stored_rors,
    record_enrich_failures,
    record_progress,
)
from db.queries.merges import apply_s2_merges
from db.queries.writes.citations import mark_enriched, update_citations
from db.queries.writes.institutions import upsert_institutions
from db.queries.writes.matches import apply_authorship_matches
from db.queries.writes.researchers import replace_researcher_works, upsert_researchers
from db.records import AuthorshipMatch, CitationRecord, InstitutionRecord, ResearcherRecord, Touched, WorkRecord
from ingest.cache import commit_position, invalidate_after_commit
from ingest.clients.openalex import OpenAlexClient
from ingest.clients.semantic_scholar import SemanticScholarClient
from ingest.errors import BudgetExhausted, UpstreamError
from ingest.harvest import harvest_arxiv as harvest_arxiv  # the harvest beside the enrichment, for callers of both
from ingest.parsers.names import align_authors
from ingest.parsers.openalex import OAWork, arxiv_doi, match_works
from ingest.parsers.s2 import S2Paper
from ingest.progress import RunProgress, Summary

log = logging.getLogger("ingest")

# Papers per transaction. S2's /paper/batch takes 500, but each new author's works list is a request
# of its own (about one a second with a key): 100 papers commit every few minutes, not every half hour.
ENRICH_BATCH = 100
UNKNOWN_PAPER_PATIENCE = timedelta(days=30)
MAX_FAILED_BATCHES = 3  # in a row: the upstream is down, stop instead of walking the whole queue
ENRICH_PROGRESS = "enrich"  # its row in ingest_progress


# ---------------------------------------------------------------------------------------- enrichment


@dataclass(slots=True)
class EnrichBatch:
    arxiv_ids: list[str]
    # Papers neither source knows yet stay queued (the sources index new papers days later) until
    # they are older than this; then they leave the queue unmatched.
    give_up_before: datetime
    done: list[str] = field(default_factory=list)
    researchers: dict[str, ResearcherRecord] = field(default_factory=dict)  # by S2 author id
    institutions: dict[str, InstitutionRecord] = field(default_factory=dict)  # by ROR id
    matches: list[AuthorshipMatch] = field(default_factory=list)
    works: dict[str, list[WorkRecord]] = field(default_factory=dict)  # by S2 author id
    citations: list[CitationRecord] = field(default_factory=list)
    # S2 author ids that S2 answers with another (it merged them): {old id: surviving id}.
    s2_merged: dict[str, str] = field(default_factory=dict)
    new_researchers: set[str] = field(default_factory=set)  # S2 author ids the archive does not hold yet
    unmatched: set[str] = field(default_factory=set)  # papers neither source could match
    failed: dict[str, str] = field(default_factory=dict)  # papers set aside, with the reason

    def only(self, arxiv_ids: set[str]) -> EnrichBatch:
        """The part of the batch that writes these papers: their matches and citations, and the researchers
        (with their works) and institutions those matches name. The S2 merges go with every part (a merge
        applied twice finds nothing left to merge)."""
        matches = [m for m in self.matches if m.arxiv_id in arxiv_ids]
        people = {m.researcher_key for m in matches}
        rors = {r for m in matches for r in m.institution_rors}
        return EnrichBatch(
            [a for a in self.arxiv_ids if a in arxiv_ids],
            self.give_up_before,
            done=[a for a in self.done if a in arxiv_ids],
            researchers={k: v for k, v in self.researchers.items() if k in people},
            institutions={k: v for k, v in self.institutions.items() if k in rors},
            matches=matches,
            works={k: v for k, v in self.works.items() if k in people},
            citations=[c for c in self.citations if c.arxiv_id in arxiv_ids],
            s2_merged=self.s2_merged,
            new_researchers=self.new_researchers & people,
            unmatched=self.unmatched & arxiv_ids,
        )


def _single(values: Counter[str]) -> str | None:
    return next(iter(values)) if len(values) == 1 else None


def plan_paper(
    paper: QueuedPaper,
    s2: S2Paper | None,
    works: list[OAWork],
    batch: EnrichBatch,
    names: dict[str, str],
    oa_claims: defaultdict[str, Counter[str]],
    orcid_claims: defaultdict[str, Counter[str]],
) -> None:
    """Align one paper's arXiv authors with S2's and OpenAlex's lists and record the verdicts.

    `works` are the paper's OpenAlex works, the one that speaks for it first (the preprint); a
    journal duplicate only adds institutions its preprint lacks.
    """
    oaw = works[0] if works else None
    s2_align = align_authors(paper.authors, [a.name for a in s2.authors]) if s2 else {}
    oa_align = align_authors(paper.authors, [a.name for a in oaw.authorships]) if oaw else {}
    dup_aligns = [(w, align_authors(paper.authors, [a.name for a in w.authorships])) for w in works[1:]]
    # Every aligned author: a researcher when S2 identifies them, and the institutions OpenAlex gives either way
    # (an author S2 has no identity for still counts for their institution).
    for position in sorted(s2_align.keys() | oa_align.keys()):
        author = s2.authors[s2_align[position]] if s2 is not None and position in s2_align else None
        s2_id = author.author_id if author is not None else None
        if author is not None and s2_id:
            names.setdefault(s2_id, author.name)
        rors: list[str] = []
        if oaw is not None and position in oa_align:
            oa = oaw.authorships[oa_align[position]]
            # OpenAlex agrees on this person (same arXiv position by name): its ids attach to them.
            if s2_id and oa.author_id:
                oa_claims[s2_id][oa.author_id] += 1
            if s2_id and oa.orcid:
                orcid_claims[s2_id][oa.orcid] += 1
            rors = [inst.ror_id for inst in oa.institutions]
            for inst in oa.institutions:
                batch.institutions.setdefault(inst.ror_id, inst)
        for dup, align in dup_aligns:
            if rors or position not in align:
                break
            for inst in dup.authorships[align[position]].institutions:
                batch.institutions.setdefault(inst.ror_id, inst)
                rors.append(inst.ror_id)
        if s2_id or rors:
            batch.matches.append(AuthorshipMatch(paper.arxiv_id, position, s2_id, rors))
    preprint_id = oaw.openalex_id if oaw is not None and oaw.is_preprint else None
    if s2 is not None and s2.citation_count is not None:
        batch.citations.append(
            CitationRecord(paper.arxiv_id, s2.citation_count, "s2", s2.paper_id, preprint_id, s2.corpus_id)
        )
    elif oaw is not None and oaw.cited_by_count is not None:
        batch.citations.append(
            CitationRecord(
                paper.arxiv_id,
                oaw.cited_by_count,
                "openalex",
                s2.paper_id if s2 else None,
                preprint_id,
                s2.corpus_id if s2 else None,
            )
        )
    if not s2_align and not oa_align:
        batch.unmatched.add(paper.arxiv_id)
    if s2 is not None or works or paper.published < batch.give_up_before:
        batch.done.append(paper.arxiv_id)


async def gather_batch(
    conn: asyncpg.Connection,
    queue: list[QueuedPaper],
    s2c: SemanticScholarClient,
    oac: OpenAlexClient | None,
) -> EnrichBatch:
    """All upstream requests for one batch; nothing is written here."""
    ids = [q.arxiv_id for q in queue]
    batch = EnrichBatch(ids, datetime.now(UTC) - UNKNOWN_PAPER_PATIENCE)
    s2papers = await s2c.papers_by_arxiv_id(ids)
    oa_works: dict[str, list[OAWork]] = {}
    if oac is not None:
        wanted = {q.arxiv_id: (q.doi.lower() if q.doi else None) for q in queue}
        dois = [arxiv_doi(a) for a in ids] + [d for d in wanted.values() if d]
        oa_works = match_works(wanted, await oac.works_by_doi(dois))
    names: dict[str, str] = {}
    oa_claims: defaultdict[str, Counter[str]] = defaultdict(Counter)
    orcid_claims: defaultdict[str, Counter[str]] = defaultdict(Counter)
    for q in queue:
        try:
            plan_paper(q, s2papers.get(q.arxiv_id), oa_works.get(q.arxiv_id, []), batch, names, oa_claims, orcid_claims)
        except Exception as exc:  # pure code over one paper's data: whatever it raises is that paper's
            batch.failed[q.arxiv_id] = failure_reason(exc)
    if batch.failed:
        batch = replace(batch.only(set(ids) - set(batch.failed)), failed=batch.failed)
        names = {k: v for k, v in names.items() if k in {m.researcher_key for m in batch.matches}}
    if oac is not None:
        await _add_institution_names(conn, oac, batch)
    if not names:
        return batch

    s2recs = await s2c.authors(sorted(names))
    s2_ids = _follow_s2_merges(batch, s2recs, names, oa_claims, orcid_claims)
    # An OpenAlex id or ORCID is one person's: a value claimed for two S2 authors attaches to neither.
    oa_of = {s: v for s in s2_ids if (v := _single(oa_claims[s]))}
    orcid_of = {s: v for s in s2_ids if (v := (s2recs[s].orcid if s in s2recs else None) or _single(orcid_claims[s]))}
    for mapping in (oa_of, orcid_of):
        shared = {v for v, n in Counter(mapping.values()).items() if n > 1}
        for s in [s for s, v in mapping.items() if v in shared]:
            del mapping[s]
    owners = await fetch_identity_owners(conn, sorted(set(oa_of.values())), sorted(set(orcid_of.values())))
    for kind, mapping in (("openalex", oa_of), ("orcid", orcid_of)):
        for s, v in list(mapping.items()):
            owner = owners.get((kind, v), s)
            if owner is not None and owner != s:
                del mapping[s]  # already another researcher's
    oa_figures = await oac.authors(sorted(set(oa_of.values()))) if oac is not None and oa_of else {}
    stored = await fetch_s2_figures(conn, s2_ids)
    for s in s2_ids:
        rec = s2recs.get(s) or ResearcherRecord(name=names[s], s2_author_id=s)
        oa = oa_figures.get(oa_of.get(s, ""))
        batch.researchers[s] = replace(
            rec,
            openalex_id=oa_of.get(s),
            orcid=orcid_of.get(s),
            openalex_works_count=oa.openalex_works_count if oa else None,
            openalex_cited_by_count=oa.openalex_cited_by_count if oa else None,
            openalex_h_index=oa.openalex_h_index if oa else None,
            openalex_i10_index=oa.openalex_i10_index if oa else None,
        )
        if s not in stored:
            batch.new_researchers.add(s)
        if s not in s2recs:
            continue
        before = stored.get(s)
        figures = (rec.s2_paper_count, rec.s2_citation_count, rec.s2_h_index)
        if before is not None and before[3] and before[:3] == figures:
            continue  # same figures and a stored works list: the career has not changed
        try:
            batch.works[s] = await s2c.author_works(s)
        except BudgetExhausted:
            raise
        except UpstreamError as exc:
            log.error("works of S2 author %s skipped: %s", s, exc)
    return batch


async def _add_institution_names(conn: asyncpg.Connection, oac: OpenAlexClient, batch: EnrichBatch) -> None:
    """Institutions new to the archive come with ROR's acronyms and other names (through OpenAlex), so that
    `institution(id: "MIT")` finds them. Without them an institution is still stored, under its name."""
    new = [i for i in batch.institutions.values() if i.openalex_id]
    stored = await fetch_stored_rors(conn, [i.ror_id for i in new]) if new else set()
    wanted = [i.openalex_id for i in new if i.ror_id not in stored and i.openalex_id]
    if not wanted:
        return
    try:
        found = await oac.institutions(wanted)
    except BudgetExhausted:
        raise
    except UpstreamError as exc:
        log.error("names of %d new institutions skipped: %s", len(wanted), exc)
        return
    for rec in found.values():
        if rec.ror_id in batch.institutions:
            batch.institutions[rec.ror_id] = rec


def _follow_s2_merges(
    batch: EnrichBatch,
    s2recs: dict[str, ResearcherRecord],
    names: dict[str, str],
    oa_claims: defaultdict[str, Counter[str]],
    orcid_claims: defaultdict[str, Counter[str]],
) -> list[str]:
    """S2 answers an author id it merged into another with the survivor's record: from here on the batch speaks
    of the surviving id only (the write merges a researcher stored under the old one). Returns the S2 ids."""
    merged = {asked: new for asked, rec in s2recs.items() if (new := rec.s2_author_id) and new != asked}
    batch.s2_merged.update(merged)
    for old, new in merged.items():
        s2recs[new] = s2recs.pop(old)
        names.setdefault(new, names.pop(old))
        oa_claims[new] += oa_claims.pop(old, Counter())
        orcid_claims[new] += orcid_claims.pop(old, Counter())
    if merged:
        batch.matches = [
            replace(m, researcher_key=merged.get(m.researcher_key, m.researcher_key)) if m.researcher_key else m
            for m in batch.matches
        ]
    return sorted(names)


async def write_batch(conn: asyncpg.Connection, batch: EnrichBatch) -> Touched:
    """One transaction's writes (the caller holds the transaction); returns what it touched."""
    touched = Touched()
    await apply_s2_merges(conn, batch.s2_merged, touched)
    inst_ids = await upsert_institutions(conn, list(batch.institutions.values()), touched=touched)
    rids = await upsert_researchers(conn, list(batch.researchers.values()), touched=touched)
    await apply_authorship_matches(conn, batch.matches, rids, inst_ids, touched=touched)
    await replace_researcher_works(
        conn, {rids[s]: works for s, works in batch.works.items() if s in rids}, touched=touched
    )
    await update_citations(conn, batch.citations, touched=touched)
    await mark_enriched(conn, batch.done)
    await clear_enrich_failures(conn, batch.done)
    await refresh_figures(conn, touched)
    return touched


# What one paper's data can make a write fail with (a value PostgreSQL refuses, a constraint it breaks): that
# paper is set aside and the rest is written. Anything else (a lost connection, a timeout) stops the run.
PAPER_WRITE_ERRORS = (asyncpg.DataError, asyncpg.IntegrityConstraintViolationError, ValueError, OverflowError)
# A paper set aside is tried again after this, then after twice as long each time (up to 128 times), or as soon
# as the paper itself changes.
FAILED_PAPER_RETRY = timedelta(hours=1)


def failure_reason(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}".replace("\x00", "")[:500]


async def write_isolating(
    conn: asyncpg.Connection, batch: EnrichBatch, cache: CacheStore | None
) -> tuple[list[tuple[EnrichBatch, Touched]], dict[str, str]]:
    """Write a batch in one transaction; when a paper's data fails it, halve the batch until that paper is alone,
    writing the rest. Returns the parts written (with what each touched) and the papers set aside, with why."""
    if not batch.arxiv_ids:
        return [], {}
    try:
        async with conn.transaction():
            touched = await write_batch(conn, batch)
            await record_progress(conn, ENRICH_PROGRESS, records=len(batch.done))
    except PAPER_WRITE_ERRORS as exc:
        if len(batch.arxiv_ids) <= 1:
            return [], dict.fromkeys(batch.arxiv_ids, failure_reason(exc))
        half = len(batch.arxiv_ids) // 2
        written: list[tuple[EnrichBatch, Touched]] = []
        failed: dict[str, str] = {}
        for part in (batch.arxiv_ids[:half], batch.arxiv_ids[half:]):
            w, f = await write_isolating(conn, batch.only(set(part)), cache)
            written += w
            failed |= f
        return written, failed
    await invalidate_after_commit(cache, touched, await commit_position(cache, conn))
    return [(batch, touched)], {}


async def enrich(
    conn: asyncpg.Connection,
    s2c: SemanticScholarClient,
    oac: OpenAlexClient | None,
    *,
    limit: int | None = None,
    batch_size: int = ENRICH_BATCH,
    cache: CacheStore | None = None,
    stream: TextIO | None = None,
) -> Summary:
    """Enrich papers newest first, `batch_size` per transaction, until the queue (or `limit`) is done.

    A paper whose data cannot be written is set aside (`enrich_failures`, with the reason) and the rest of its
    batch is written; it is tried again on a later run, after a backoff or once the paper changed.

    Summary: seen = papers taken from the queue, inserted = new researchers, updated = papers whose
    rows changed, skipped = papers neither source could match, failed = papers of failed batches and
    papers set aside.
    """
    summary = Summary()
    after: tuple[datetime, int] | None = None
    failed_in_row = 0
    with RunProgress("enrich", total=limit, stream=stream) as progress:
        while limit is None or summary.seen < limit:
            n = batch_size if limit is None else min(batch_size, limit - summary.seen)
            queue = await fetch_enrich_queue(conn, n, after)
            if not queue:
                break
            after = (queue[-1].published, queue[-1].id)
            summary.seen += len(queue)
            try:
                batch = await gather_batch(conn, queue, s2c, oac)
            except BudgetExhausted as exc:
                summary.seen -= len(queue)
                summary.stopped = str(exc)
                log.warning("stopping: %s; everything committed so far is kept", exc)
                break
            except UpstreamError as exc:
                summary.failed += len(queue)
                failed_in_row += 1
                log.error("enrichment batch of %d papers failed: %s; they stay queued", len(queue), exc)
                if failed_in_row >= MAX_FAILED_BATCHES:
                    summary.stopped = f"{failed_in_row} batches in a row failed; last: {exc}"
                    break
                continue
            failed_in_row = 0
            written, failed = await write_isolating(conn, batch, cache)
            failed |= batch.failed
            new_researchers: set[str] = set()
            for part, touched in written:
                new_researchers |= part.new_researchers
                summary.updated += len(touched.papers & {q.id for q in queue})
                summary.skipped += len(part.unmatched)
            summary.inserted += len(new_researchers)
            if failed:
                await _set_aside(conn, queue, failed)
                summary.failed += len(failed)
            _count_requests(summary, s2c, oac)
            progress.update(summary)
    _count_requests(summary, s2c, oac)
    return summary


async def _set_aside(conn: asyncpg.Connection, queue: list[QueuedPaper], failed: dict[str, str]) -> None:
    ids = {q.arxiv_id: q.id for q in queue}
    for arxiv_id, why in sorted(failed.items()):
        log.error("paper %s set aside, its enrichment is retried later: %s", arxiv_id, why)
    await record_enrich_failures(conn, {ids[a]: why for a, why in failed.items()}, retry_after=FAILED_PAPER_RETRY)


def _count_requests(summary: Summary, s2c: SemanticScholarClient, oac: OpenAlexClient | None) -> None:
    summary.requests = s2c.http.stats.requests + (oac.http.stats.requests if oac else 0)
    summary.retries = s2c.http.stats.retries + (oac.http.stats.retries if oac else 0)
