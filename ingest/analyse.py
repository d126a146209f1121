"""The analysis stage: each paper not yet analysed (or whose title or abstract changed since) gets one request
to the language model for its summary, topics, type, field, novelty and significance.

Newest first, `batch_size` papers per transaction, their requests side by side (paced by the client). A
batch commits its analyses, its failures and the day's token count (the checkpoint) together, and the cache
forgets those papers only after that commit. An answer that fails validation is asked for once more, with
what was wrong; a second failure marks the paper failed with the reason, and it waits until its text
changes. A paper whose request failed upstream stays queued. The daily token budget is checked before each
batch: once spent, the run stops cleanly.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from typing import TextIO

import asyncpg

from db.cache.store import CacheStore
from db.queries.analyses import (
    EVER,
    QUEUE_START,
    AnalysisFailure,
    QueuedAnalysis,
    fetch_analysis_queue,
    record_analysis_failures,
)
from db.queries.ingest_state import commit_without_flush_wait, fetch_checkpoint, save_checkpoint
from db.queries.writes.analyses import AnalysisRecord, upsert_analyses
from db.records import Touched
from ingest.cache import tell_after_commit
from ingest.parsers.analysis import (
    MAX_ANSWER_TOKENS,
    RESPONSE_FORMAT,
    InvalidAnalysis,
    PaperAnalysis,
    analysis_messages,
    correction_messages,
    parse_analysis,
)
from ingest.progress import RunProgress, Summary
from llm import ModelClient, ModelRateLimited, ModelRequestFailed

log = logging.getLogger("ingest")

ANALYSE_BATCH = 20
CHECKPOINT_KEY = "analyse"
MAX_FAILED_BATCHES = 3  # in a row: the model endpoint is down, stop instead of walking the whole queue


@dataclass(slots=True)
class TokenDay:
    """Tokens spent by the analysis on one UTC day: the stage's checkpoint."""

    day: date
    tokens: int = 0

    @classmethod
    def load(cls, state: dict[str, object] | None, today: date) -> TokenDay:
        if state is not None and state.get("day") == today.isoformat() and isinstance(state.get("tokens"), int):
            return cls(today, int(state["tokens"]))  # type: ignore[call-overload]
        return cls(today)

    def to_json(self) -> dict[str, object]:
        return {"day": self.day.isoformat(), "tokens": self.tokens}


@dataclass(slots=True)
class BatchResult:
    analyses: list[AnalysisRecord] = field(default_factory=list)
    failures: list[AnalysisFailure] = field(default_factory=list)
    upstream: list[ModelRequestFailed] = field(default_factory=list)


async def analyse_paper(client: ModelClient, paper: QueuedAnalysis) -> PaperAnalysis:
    """One paper's analysis: a request, and one more with the problem named when the first answer is invalid.

    Raises InvalidAnalysis (the second answer was invalid too) or ModelRequestFailed."""
    messages = analysis_messages(paper.title, paper.abstract, paper.categories)
    answer = await client.complete(messages, max_tokens=MAX_ANSWER_TOKENS, response_format=RESPONSE_FORMAT)
    try:
        return _parse(answer.text, answer.refusal)
    except InvalidAnalysis as first:
        log.info("analysis of %s invalid (%s); asking again", paper.arxiv_id, first)
        again = correction_messages(messages, answer.text, str(first))
        answer = await client.complete(again, max_tokens=MAX_ANSWER_TOKENS, response_format=RESPONSE_FORMAT)
        return _parse(answer.text, answer.refusal)


def _parse(text: str, refusal: str | None) -> PaperAnalysis:
    if refusal:
        raise InvalidAnalysis(f"the model refused: {' '.join(refusal.split())[:200]}")
    return parse_analysis(text)


async def _one(client: ModelClient, paper: QueuedAnalysis, result: BatchResult) -> None:
    try:
        found = await analyse_paper(client, paper)
    except InvalidAnalysis as exc:
        result.failures.append(AnalysisFailure(paper.id, paper.source_md5, str(exc)))
        log.warning("analysis of %s failed: %s; skipped until its text changes", paper.arxiv_id, exc)
        return
    except ModelRequestFailed as exc:
        result.upstream.append(exc)
        return
    result.analyses.append(
        AnalysisRecord(
            paper.arxiv_id,
            summary=found.summary,
            topics=list(found.topics),
            paper_type=found.paper_type,
            research_field=found.research_field,
            novelty=found.novelty,
            significance_score=found.significance_score,
            model=client.model,
            source_md5=paper.source_md5,
        )
    )


async def analyse(
    conn: asyncpg.Connection,
    client: ModelClient,
    *,
    limit: int | None = None,
    since: date | None = None,
    daily_tokens: int = 0,
    batch_size: int = ANALYSE_BATCH,
    cache: CacheStore | None = None,
    stream: TextIO | None = None,
    today: date | None = None,
) -> Summary:
    """Analyse queued papers newest first until the queue, `limit` or the day's token budget is done.

    `since`: only papers first published on or after that day. `daily_tokens` 0: no budget. Summary: seen =
    papers taken from the queue, updated = analyses written, failed = papers marked failed (invalid answers)
    plus papers whose requests failed upstream (they stay queued), tokens = tokens this run spent.
    """
    summary = Summary()
    day = today or datetime.now(UTC).date()
    budget = TokenDay.load(await fetch_checkpoint(conn, CHECKPOINT_KEY), day)
    floor = datetime(since.year, since.month, since.day, tzinfo=UTC) if since else EVER
    before = QUEUE_START
    failed_in_row = 0
    with RunProgress("analyse", total=limit, stream=stream) as progress:
        while limit is None or summary.seen < limit:
            if daily_tokens and budget.tokens >= daily_tokens:
                summary.stopped = (
                    f"the daily token budget is spent ({budget.tokens:,} of {daily_tokens:,} tokens on {day}); "
                    "the rest waits for tomorrow"
                )
                break
            n = batch_size if limit is None else min(batch_size, limit - summary.seen)
            queue = await fetch_analysis_queue(conn, n, since=floor, before=before)
            if not queue:
                break
            before = (queue[-1].published, queue[-1].id)
            summary.seen += len(queue)
            spent_before = client.usage.total_tokens
            result = BatchResult()
            await asyncio.gather(*(_one(client, paper, result) for paper in queue))
            budget.tokens += client.usage.total_tokens - spent_before
            stop = None
            if result.upstream:
                whole_batch = not result.analyses and not result.failures
                failed_in_row = failed_in_row + 1 if whole_batch else 0
                log.error("%d request(s) failed: %s; they stay queued", len(result.upstream), result.upstream[0])
                stop = _stop_reason(result.upstream, failed_in_row, client.policy.max_retry_after_s)
            else:
                failed_in_row = 0
            if stop is not None and "budget" in stop:
                # Not failures: papers the provider's spent budget left unanswered, as the token budget would.
                summary.seen -= len(result.upstream)
                result.upstream.clear()
            touched = Touched()
            async with conn.transaction():
                await commit_without_flush_wait(conn)
                await upsert_analyses(conn, result.analyses, touched=touched)
                await record_analysis_failures(conn, result.failures)
                await save_checkpoint(conn, CHECKPOINT_KEY, budget.to_json())
            await tell_after_commit(cache, conn, touched)
            summary.updated += len(result.analyses)
            summary.failed += len(result.failures) + len(result.upstream)
            _count_requests(summary, client)
            progress.update(summary)
            if stop is not None:
                summary.stopped = stop
                break
    _count_requests(summary, client)
    return summary


def _stop_reason(errors: list[ModelRequestFailed], failed_in_row: int, longest_wait_s: float) -> str | None:
    for exc in errors:
        if isinstance(exc, ModelRateLimited) and exc.retry_after_s is not None and exc.retry_after_s > longest_wait_s:
            # A wait of hours: the provider's budget for the day, not a pause to sit through.
            return f"the model endpoint's budget is spent ({exc}); committed work is kept"
    if failed_in_row >= MAX_FAILED_BATCHES:
        return f"{failed_in_row} batches in a row failed; last: {errors[-1]}"
    return None


def _count_requests(summary: Summary, client: ModelClient) -> None:
    summary.requests, summary.retries = client.stats.requests, client.stats.retries
    summary.tokens = client.usage.total_tokens
