"""The enrichment (Semantic Scholar + OpenAlex -> researchers); the harvest (arXiv OAI-PMH -> papers) is in
`ingest.harvest`.

Both are transactional per batch: a page (or an enrichment batch) is written, together with its
checkpoint, in one transaction, and the cache forgets what it touched only after that commits. A
failure loses at most the batch in flight; the next run resumes where the last commit left off.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from dataclasses import replace
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
from db.queries.matching import fetch_known_s2_authors
from db.queries.merges import absorb_by_identity, apply_s2_merges, drop_s2_redirects
from db.queries.writes.citations import mark_enriched, update_citations
from db.queries.writes.institutions import upsert_institutions
from db.queries.writes.matches import apply_authorship_matches, record_unlinked
from db.queries.writes.researchers import fetch_researcher_ids_by_keys, replace_researcher_works, upsert_researchers
from db.records import (
    ResearcherRecord,
    Touched,
)
from ingest.cache import tell_after_commit
from ingest.clients.openalex import OpenAlexClient
from ingest.clients.semantic_scholar import SemanticScholarClient
from ingest.enrich_plan import EnrichBatch, canonical, failure_reason, plan_batch, record
from ingest.errors import BudgetExhausted, UpstreamError
from ingest.harvest import harvest_arxiv as harvest_arxiv  # the harvest beside the enrichment, for callers of both
from ingest.matching.evidence import Claims, Stored, build_evidence, repeated_ids, unique_claims
from ingest.matching.links import Evidence, Link
from ingest.pacing import DutyCycle
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
    # Every S2 author the papers name, asked before matching: their records (ORCIDs, names) are evidence, and S2
    # answers an id it merged with the survivor's record.
    asked = sorted({a.author_id for p in s2papers.values() for a in p.authors if a.author_id})
    answered = await s2c.authors(asked) if asked else {}
    batch.s2_merged = {old: new for old, rec in answered.items() if (new := rec.s2_author_id) and new != old}
    batch.s2_live = sorted(old for old, rec in answered.items() if rec.s2_author_id == old)
    s2recs = {rec.s2_author_id: rec for rec in answered.values() if rec.s2_author_id}
    s2papers = {a: canonical(p, batch.s2_merged) for a, p in s2papers.items()}
    s2_ids = sorted({a.author_id for p in s2papers.values() for a in p.authors if a.author_id})
    stored = {
        s: Stored(r.name, r.openalex_id, r.orcid, r.rors)
        for s, r in (await fetch_known_s2_authors(conn, s2_ids)).items()
    }
    speaking = [ws[0] for ws in oa_works.values() if ws]
    repeated = repeated_ids(speaking)
    holders = await fetch_identity_owners(
        conn,
        sorted({a.author_id for w in speaking for a in w.authorships if a.author_id}),
        sorted({a.orcid for w in speaking for a in w.authorships if a.orcid}),
    )

    def evidence(claims: Claims) -> Evidence:
        return build_evidence(stored, s2recs, claims, holders, repeated)

    decided = plan_batch(batch, queue, s2papers, oa_works, evidence)
    for q in queue:
        s2 = s2papers.get(q.arxiv_id)
        works = oa_works.get(q.arxiv_id, [])
        if q.arxiv_id in decided:
            record(batch, q, s2, works, decided[q.arxiv_id])
        elif s2 is None and not works:
            batch.unmatched.add(q.arxiv_id)
        if q.arxiv_id not in batch.failed and (s2 is not None or works or q.published < batch.give_up_before):
            batch.done.append(q.arxiv_id)
    if batch.failed:
        batch = replace(batch.only(set(ids) - set(batch.failed)), failed=batch.failed)
    if oac is not None:
        await _add_institution_names(conn, oac, batch)
    await _add_researchers(conn, batch, decided, s2papers, s2recs, holders, repeated, s2c, oac)
    return batch


async def _add_researchers(
    conn: asyncpg.Connection,
    batch: EnrichBatch,
    decided: Mapping[str, list[Link]],
    s2papers: Mapping[str, S2Paper],
    s2recs: Mapping[str, ResearcherRecord],
    holders: Mapping[tuple[str, str], str | None],
    repeated: set[str],
    s2c: SemanticScholarClient,
    oac: OpenAlexClient | None,
) -> None:
    """The researchers the batch's links name: S2 authors, with the OpenAlex id and ORCID the links claim for them
    alone (and no other researcher holds), and researchers known by an OpenAlex id alone; their figures and, for an
    S2 author whose figures changed, their works list."""
    linked = {m.researcher_key for m in batch.matches if m.researcher_key}
    links = [x for a in batch.arxiv_ids for x in decided.get(a, []) if x.key in linked]
    s2_linked = sorted({x.key for x in links if x.key and x.s2_id == x.key})
    oa_only = sorted(linked - set(s2_linked))
    claims = Claims()
    claims.add(links)
    oa_of, orcid_of, _ = unique_claims(claims, repeated)
    for mapping, kind in ((oa_of, "openalex"), (orcid_of, "orcid")):
        for s, v in list(mapping.items()):
            holder = holders.get((kind, v), s)
            if s not in linked or (holder is not None and holder != s):
                del mapping[s]  # already another S2 author's researcher
    for s in s2_linked:
        if (own := s2recs[s].orcid if s in s2recs else None) is not None:
            orcid_of[s] = own  # S2's own record says so
    claimed = set(oa_of.values()) | set(orcid_of.values())
    oa_authorship = {x.key: x.oa for x in links if x.key in oa_only and x.oa is not None}
    wanted_figures = sorted(set(oa_of.values()) | set(oa_only))
    oa_figures = await oac.authors(wanted_figures) if oac is not None and wanted_figures else {}
    known = await fetch_s2_figures(conn, s2_linked)
    names = {a.author_id: a.name for p in s2papers.values() for a in p.authors if a.author_id}
    for s in s2_linked:
        if s not in s2recs and s not in names:
            continue  # a stored researcher OpenAlex's id led to: linked as it is (write_batch finds it)
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
        if s not in known:
            batch.new_researchers.add(s)
    for key in oa_only:
        authorship = oa_authorship.get(key)
        figures = oa_figures.get(key)
        orcid = authorship.orcid if authorship is not None else None
        if orcid and (orcid in claimed or orcid in repeated or holders.get(("orcid", orcid)) is not None):
            orcid = None  # another researcher's
        name = authorship.name if authorship is not None and authorship.name else key
        batch.researchers[key] = ResearcherRecord(
            name=figures.name if figures is not None and figures.name != key else name,
            openalex_id=key,
            orcid=orcid,
            openalex_works_count=figures.openalex_works_count if figures else None,
            openalex_cited_by_count=figures.openalex_cited_by_count if figures else None,
            openalex_h_index=figures.openalex_h_index if figures else None,
            openalex_i10_index=figures.openalex_i10_index if figures else None,
        )
    for s in s2_linked:
        rec_found = s2recs.get(s)
        if rec_found is None:
            continue
        before = known.get(s)
        now = (rec_found.s2_paper_count, rec_found.s2_citation_count, rec_found.s2_h_index)
        if before is not None and before[3] and before[:3] == now:
            continue  # same figures and a stored works list: the career has not changed
        try:
            batch.works[s] = await s2c.author_works(s)
        except BudgetExhausted:
            raise
        except UpstreamError as exc:
            log.error("works of S2 author %s skipped: %s", s, exc)


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


async def write_batch(conn: asyncpg.Connection, batch: EnrichBatch) -> Touched:
    """One transaction's writes (the caller holds the transaction); returns what it touched."""
    touched = Touched()
    await drop_s2_redirects(conn, batch.s2_live)
    await apply_s2_merges(conn, batch.s2_merged, touched)
    await absorb_by_identity(
        conn,
        [(r.s2_author_id, r.openalex_id, r.orcid) for r in batch.researchers.values() if r.s2_author_id],
        touched,
    )
    inst_ids = await upsert_institutions(conn, list(batch.institutions.values()), touched=touched)
    rids = await upsert_researchers(conn, list(batch.researchers.values()), touched=touched)
    unknown = sorted({m.researcher_key for m in batch.matches if m.researcher_key and m.researcher_key not in rids})
    if unknown:
        rids |= await fetch_researcher_ids_by_keys(conn, unknown)
    await apply_authorship_matches(conn, batch.matches, rids, inst_ids, touched=touched)
    await record_unlinked(conn, batch.done, batch.unlinked)
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
    await tell_after_commit(cache, conn, touched)
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
    pacing: DutyCycle | None = None,
) -> Summary:
    """Enrich papers newest first, `batch_size` per transaction, until the queue (or `limit`) is done; after each
    batch's writes it pauses as `pacing` says (ingest/pacing.py; not at all by default).

    A paper whose data cannot be written is set aside (`enrich_failures`, with the reason) and the rest of its
    batch is written; it is tried again on a later run, after a backoff or once the paper changed.

    Summary: seen = papers taken from the queue, inserted = new researchers, updated = papers whose
    rows changed, skipped = papers neither source could match, failed = papers of failed batches and
    papers set aside.
    """
    summary = Summary()
    pacing = pacing or DutyCycle()
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
            began = time.monotonic()
            written, failed = await write_isolating(conn, batch, cache)
            busy_s = time.monotonic() - began
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
            await pacing.after(busy_s)
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
