"""The arXiv harvest (OAI-PMH ListRecords -> papers) as a run of steps: resume, fetch, checkpoint, write in
order, settle.

A page is written together with its checkpoint in one transaction, and the cache forgets what it touched only
after that commits. With a second connection two pages are written at once; their checkpoints still commit in
page order (each page's transaction waits for the page before), so a crash never skips a page and the next run
resumes where the last commit left off.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import time
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, replace
from datetime import UTC, date, datetime
from functools import partial
from typing import TextIO

import asyncpg

from db.cache.store import CacheStore
from db.queries.figures import refresh_figures
from db.queries.ingest_state import commit_without_flush_wait, record_progress, tombstone_papers
from db.queries.paper_people import add_people_of_papers
from db.queries.writes.papers import PaperWriteResult, upsert_papers
from ingest.cache import commit_position, invalidate_after_commit, to_the_end
from ingest.checkpoints import HarvestState, arxiv_checkpoint_key, load_harvest_state, save_harvest_state
from ingest.clients.arxiv_oai import ArxivOAIClient
from ingest.errors import BadResumptionToken, NoRecordsMatch, UpstreamError
from ingest.pacing import DutyCycle
from ingest.parsers.oai import OAIPage
from ingest.progress import RunProgress, Summary

log = logging.getLogger("ingest")

MAX_TOKEN_RESTARTS = 3
# A page parses into some 40,000 objects (records, names, dates, rows) that live until it is written. At the
# default threshold of 700 allocations the collector rescans them dozens of times a page and promotes them into
# full collections over everything alive: 12% of the harvest's CPU time, 6% at this threshold.
HARVEST_GC_THRESHOLD = 10_000

# What a page's transaction wrote, the papers it withdrew, where its commit is in the WAL (ingest/cache.py), and
# the seconds it kept PostgreSQL busy (its wait for the page before left out).
Written = tuple[PaperWriteResult, set[int], int | None, float]


@contextlib.contextmanager
def _young_collections_every(allocations: int) -> Iterator[None]:
    previous = gc.get_threshold()
    gc.set_threshold(allocations, *previous[1:])
    try:
        yield
    finally:
        gc.set_threshold(*previous)


def _settle(commit: asyncio.Future[None], task: asyncio.Task[Written]) -> None:
    if commit.done():
        return
    if task.cancelled():
        commit.cancel()
    elif (exc := task.exception()) is not None:
        commit.set_exception(exc)
    else:
        commit.set_result(None)


@dataclass(frozen=True, slots=True)
class PageCheckpoint:
    """What a page's transaction saves with its rows: the harvest state after it, the page's number, and (on the
    last page of a complete harvest up to now) the moment the archive is caught up to."""

    state: HarvestState
    number: int
    caught_up_to: datetime | None


@dataclass(slots=True)
class PageWrite:
    """A page being written: its transaction's task, the page and its number."""

    task: asyncio.Task[Written]
    page: OAIPage
    number: int


class HarvestRun:
    """One harvest of the arXiv archive (or of one set), step by step; `run()` takes every step in turn."""

    def __init__(
        self,
        conn: asyncpg.Connection,
        client: ArxivOAIClient,
        *,
        set_spec: str | None = None,
        cache: CacheStore | None = None,
        writer: asyncpg.Connection | None = None,
        pacing: DutyCycle | None = None,
    ) -> None:
        self.conn = conn
        self.pacing = pacing or DutyCycle()
        self.client = client
        self.set_spec = set_spec
        self.cache = cache
        self.key = arxiv_checkpoint_key(set_spec)
        self.writers = [conn, *([writer] if writer is not None else [])]
        self.summary = Summary()
        self.state = HarvestState()
        self.token: str | None = None
        self.restarts = 0
        self.prefetched: asyncio.Task[OAIPage] | None = None
        self.inflight: deque[PageWrite] = deque()
        # The last page's commit, as a future the next page's transaction waits on.
        self.previous: asyncio.Future[None] | None = None
        self.dispatched = 0
        self.progress: RunProgress | None = None

    # -- resume ------------------------------------------------------------------------------------------

    async def resume(self, from_: date | None = None, until: date | None = None) -> None:
        """Where to start: `from_` (clamped to the earliest datestamp), else the interrupted harvest's token,
        else where the last complete harvest left off, else the start of the archive."""
        saved = await load_harvest_state(self.conn, self.key)
        if from_ is not None:
            earliest = await self.client.identify()
            if earliest is not None and from_ < earliest:
                log.info("--from %s is before the repository's earliest datestamp; using %s", from_, earliest)
                from_ = earliest
            self.state = HarvestState(harvest_from=from_, until=until, next_from=saved.next_from if saved else None)
        elif saved is not None and saved.token:
            self.state, self.token = saved, saved.token
            log.info(
                "resuming the interrupted harvest from %s (page %d)", saved.harvest_from or "the start", saved.pages
            )
        elif saved is not None:
            self.state = HarvestState(harvest_from=saved.next_from, until=until, next_from=saved.next_from)
        else:
            self.state = HarvestState(until=until)

    # -- fetch -------------------------------------------------------------------------------------------

    async def fetch(self) -> OAIPage:
        """The next page, downloaded and parsed: the one fetched ahead, else by token, else the first."""
        if self.prefetched is not None:
            # Taken before it is awaited: a page that failed is fetched again (or the list restarted), not awaited
            # twice.
            ahead, self.prefetched = self.prefetched, None
            return await ahead
        if self.token is not None:
            return await self.client.list_records(token=self.token)
        return await self.client.list_records(
            from_=self.state.harvest_from, until=self.state.until, set_spec=self.set_spec
        )

    def fetch_ahead(self, page: OAIPage) -> None:
        """Download and parse the page after `page` while `page` is written: the parse runs here, the writes in
        PostgreSQL, so they overlap. Pacing still holds."""
        self.token = page.token
        if self.token:
            self.prefetched = asyncio.create_task(self.client.list_records(token=self.token))

    # -- checkpoint --------------------------------------------------------------------------------------

    def checkpoint(self, page: OAIPage) -> PageCheckpoint:
        """Advance the harvest state past `page`; records that could not be parsed are logged (and counted
        when the page settles)."""
        for ident, why in page.skipped:
            log.error("skipped record %s: %s", ident, why)
        # A complete harvest up to now holds everything the upstream had when it began.
        began = self.state.started or page.response_date
        caught_up_to = began if not page.token and self.state.until is None else None
        self.state = self.state.page_done(page.token, page.response_date)
        return PageCheckpoint(self.state, self.state.pages, caught_up_to)

    # -- write in order ----------------------------------------------------------------------------------

    async def write(self, page: OAIPage, checkpoint: PageCheckpoint) -> None:
        """Start writing `page` on a free connection, once no page in flight shares a record with it."""
        if len(self.inflight) == len(self.writers):
            await self.settle()  # frees the connection the next page goes to
        if self.pacing.owing:
            # Paced (WOVEPAPER_INGEST_SHARE): every page in flight commits and the cache forgets what it touched
            # before the pause, so no committed page stays unseen for its length.
            await self.settle_all()
            await self.pacing.pay()
        ids = {r.arxiv_id for r in page.records} | set(page.deleted)
        while self.inflight and any(ids & {r.arxiv_id for r in w.page.records} for w in self.inflight):
            # The server may repeat a record on the next page: two concurrent upserts of one paper
            # can trip the slug's unique index, so the earlier page commits first.
            await self.settle()
        conn = self.writers[self.dispatched % len(self.writers)]
        task = asyncio.create_task(self._write_page(conn, page, checkpoint, self.previous))
        self.previous = asyncio.get_running_loop().create_future()
        task.add_done_callback(partial(_settle, self.previous))
        self.inflight.append(PageWrite(task, page, checkpoint.number))
        self.dispatched += 1

    async def _write_page(
        self,
        conn: asyncpg.Connection,
        page: OAIPage,
        checkpoint: PageCheckpoint,
        before: asyncio.Future[None] | None,
    ) -> Written:
        began = time.monotonic()
        waited = 0.0
        async with conn.transaction():
            await commit_without_flush_wait(conn)
            result = await upsert_papers(conn, page.records)
            tombstoned = await tombstone_papers(conn, page.deleted)
            # A withdrawn paper leaves its researchers' and institutions' counts (refreshed below).
            await add_people_of_papers(conn, tombstoned, result.touched)
            if before is not None:
                # Checkpoints commit in page order: wait for the page before (its failure rolls this back).
                # Until then this transaction holds rows of its own papers only, which the page before never
                # needs (pages that share a paper are not written at once). Figure rows are shared: taking one
                # before this wait could make the page before wait on this one, for ever, since PostgreSQL
                # cannot see a wait that passes through Python. Category counts, shared too, change at commit
                # (migration 0018).
                log.debug("page %d written; waiting for page %d to commit", checkpoint.number, checkpoint.number - 1)
                waiting = time.monotonic()
                await asyncio.shield(before)
                waited = time.monotonic() - waiting
            # A re-harvest that changed an author list can drop matches: keep stored figures true.
            await refresh_figures(conn, result.touched)
            await record_progress(conn, self.key, records=page.seen, caught_up_to=checkpoint.caught_up_to)
            await save_harvest_state(conn, self.key, checkpoint.state)
        position = await commit_position(self.cache, conn)
        return result, tombstoned, position, time.monotonic() - began - waited

    async def settle(self) -> None:
        """Wait for the oldest page in flight to commit; then the cache forgets what it touched, and it counts. A
        run stopped meanwhile lets the page finish (`to_the_end`), and `close` tells the cache."""
        w = self.inflight[0]
        result, tombstoned, position, busy_s = await to_the_end(w.task)
        self.inflight.popleft()
        await self._forget(w, result, tombstoned, position)
        s, page = self.summary, w.page
        s.seen += page.seen
        s.inserted += result.inserted
        s.updated += result.updated + len(tombstoned)
        s.skipped += result.unchanged + len(page.deleted) - len(tombstoned)
        s.failed += len(page.skipped)
        self._count_requests()
        if self.progress is not None:
            self.progress.update(s, f"page {w.number}")
        self.pacing.owe(busy_s)

    async def _forget(self, w: PageWrite, result: PaperWriteResult, tombstoned: set[int], position: int | None) -> None:
        touched = result.touched
        touched.papers |= tombstoned
        touched.paper_keys |= set(w.page.deleted)
        await invalidate_after_commit(self.cache, touched, position)

    async def settle_all(self) -> None:
        while self.inflight:
            await self.settle()

    # -- the ends of a harvest ---------------------------------------------------------------------------

    async def restart(self) -> None:
        """The resumption token expired: start the list again from the harvest's first date."""
        self.restarts += 1
        log.warning("resumption token expired; restarting from %s", self.state.harvest_from or "the start")
        await self.settle_all()
        self.token = None
        self.state = replace(self.state, token=None, started=None)

    async def caught_up(self) -> None:
        """Nothing new since the harvest's first date: the harvest is complete as it stands."""
        log.info("nothing new since %s", self.state.harvest_from)
        await self.settle_all()
        async with self.conn.transaction():
            now = datetime.now(UTC) if self.state.until is None else None
            self.state = self.state.page_done(None, None)
            await record_progress(self.conn, self.key, records=0, pages=0, caught_up_to=now)
            await save_harvest_state(self.conn, self.key, self.state)

    async def stop(self, exc: UpstreamError) -> None:
        log.error("harvest stopped: %s; committed pages are kept and the next run resumes", exc)
        self.summary.failed += 1
        self.summary.stopped = str(exc)
        await self.settle_all()

    async def close(self) -> None:
        """Whatever stopped the run, pages already being written still commit (in order)."""
        if self.prefetched is not None:
            self.prefetched.cancel()
            with contextlib.suppress(BaseException):
                await self.prefetched
        for w in self.inflight:
            with contextlib.suppress(BaseException):
                result, tombstoned, position, _ = await w.task
                # Committed: the cache forgets it, whatever stopped the run (else stale until its TTL).
                await self._forget(w, result, tombstoned, position)
        if self.previous is not None and self.previous.done() and not self.previous.cancelled():
            self.previous.exception()  # retrieved: a failure was already raised through its task

    def _count_requests(self) -> None:
        self.summary.requests = self.client.http.stats.requests
        self.summary.retries = self.client.http.stats.retries

    # -- the whole run -----------------------------------------------------------------------------------

    async def step(self) -> bool:
        """Fetch a page and start writing it; False once the list is done."""
        try:
            page = await self.fetch()
        except BadResumptionToken:
            if self.token is None or self.restarts >= MAX_TOKEN_RESTARTS:
                raise
            await self.restart()
            return True
        except NoRecordsMatch:
            await self.caught_up()
            return False
        self.fetch_ahead(page)
        await self.write(page, self.checkpoint(page))
        return bool(self.token)

    async def run(self, stream: TextIO | None = None) -> Summary:
        """Every page from where `resume` left the run, then what every page wrote, summed."""
        with RunProgress(f"arxiv {self.key}", stream=stream) as self.progress:
            with _young_collections_every(HARVEST_GC_THRESHOLD):
                try:
                    while await self.step():
                        pass
                    await self.settle_all()
                except UpstreamError as exc:
                    await self.stop(exc)
                finally:
                    await self.close()
        self._count_requests()
        return self.summary


async def harvest_arxiv(
    conn: asyncpg.Connection,
    client: ArxivOAIClient,
    *,
    from_: date | None = None,
    until: date | None = None,
    set_spec: str | None = None,
    cache: CacheStore | None = None,
    stream: TextIO | None = None,
    writer: asyncpg.Connection | None = None,
    pacing: DutyCycle | None = None,
) -> Summary:
    """ListRecords from `from_` (clamped to earliestDatestamp) or from the checkpoint, page by page.

    With a second connection (`writer`) two pages are written at once, each in its own transaction;
    their checkpoints still commit in page order, so a crash never skips a page. `pacing`: the share of the time
    it may keep PostgreSQL writing (ingest/pacing.py; all of it by default).

    Summary: seen = records read, inserted/updated = papers written, skipped = records already up
    to date, failed = records that could not be parsed (logged) plus a request that failed for good.
    """
    run = HarvestRun(conn, client, set_spec=set_spec, cache=cache, writer=writer, pacing=pacing)
    await run.resume(from_, until)
    return await run.run(stream)
