"""One chat turn: a reader's question answered from the archive's papers by the language model.

`ChatService.start` does everything before the model is asked (the quota, the conversation, retrieval, the
prompt) and raises ChatError for what makes a question unanswerable; `Answer.events` then streams: the
sources, the answer's text as the model writes it (citations checked on the way), and, once the turn is
stored, its ids and citations. Closing the event iterator early (the reader went away) closes the model's
stream too, and nothing of that turn is stored.

A question asked with an idempotency key is answered once: a retry with the same key gets the stored answer
again (`Replay`: the same events, no quota, no model), a retry while the answer is still written is refused as in
progress, and the same key with another question is refused. A failed or stopped answer frees its key.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
from collections.abc import AsyncGenerator, Callable
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, time, timedelta
from typing import Any

import asyncpg
import orjson

from chat.citations import CitationFilter
from chat.prompt import ANSWER_TOKENS, Prompt, Turn, build_prompt
from chat.retrieval import ChatScope, retrieve
from db.connection import Conn
from db.queries.chat import (
    MessageRow,
    StoredAnswer,
    claim_chat_request,
    fetch_conversation,
    fetch_recent_messages,
    forget_chat_request,
    release_chat_message,
    reserve_chat_message,
    save_turn,
)
from db.queries.papers import PaperRow, fetch_papers_by_ids
from llm import ModelClient, ModelRequestFailed, TextPart, Usage
from retry_rules import RetryPolicy
from settings.language_model import ModelConfig
from telemetry.metrics import CHAT_ANSWERS, MODEL_TOKENS, count_rejection

log = logging.getLogger("chat")

MAX_QUESTION_CHARS = 2_000
# A reader waits on the answer: one retry after a short pause, and no sitting through a long Retry-After.
CHAT_RETRY = RetryPolicy(max_attempts=2, base_delay_s=0.5, max_delay_s=2.0, max_retry_after_s=5.0)
TITLE_CHARS = 80
RECENT_MESSAGES = 12
# How long a stored answer is sent again for a retried key (a client's retries come within minutes; the draft
# standard's examples and Stripe keep keys a day).
IDEMPOTENCY_KEY_TTL_S = 86_400.0
# An unanswered key older than the answer's time limit and this was left by a worker that died: taken over.
ABANDONED_AFTER_S = 30.0
# What a retry of an answer still being written is asked to wait: answers take seconds.
IN_PROGRESS_RETRY_S = 2
PINNED_CITATIONS = 3
NOTHING_FOUND = (
    "I found no papers in the archive that bear on this question, so I cannot answer it from the archive. "
    "Try other words, or ask without limiting the question to this page."
)


class ChatError(Exception):
    """Why a question cannot be answered: a stable code, a message for the reader, the HTTP status of /chat."""

    def __init__(self, code: str, message: str, *, status: int, **extensions: Any) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.status = status
        self.extensions = extensions


def unavailable() -> ChatError:
    return ChatError(
        "CHAT_UNAVAILABLE", "Chat is not available on this server (no language model is configured).", status=503
    )


@dataclass(frozen=True, slots=True)
class Question:
    viewer_id: str
    text: str
    scope: ChatScope | None = None  # None: the conversation's last scope, or the whole archive
    conversation_id: int | None = None
    idempotency_key: str | None = None

    def fingerprint(self) -> bytes:
        """What a retry with the same key must ask again."""
        scope = self.scope.to_json() if self.scope is not None else None
        return hashlib.sha256(orjson.dumps([self.text, scope, self.conversation_id])).digest()


@dataclass(frozen=True, slots=True)
class Sources:
    papers: list[PaperRow]


@dataclass(frozen=True, slots=True)
class Delta:
    text: str


@dataclass(frozen=True, slots=True)
class Done:
    conversation_id: int
    message_id: int
    text: str
    citations: list[PaperRow]
    removed_citations: int
    usage: Usage
    replayed: bool = False  # sent again for a retried idempotency key


ChatEvent = Sources | Delta | Done


def _tomorrow(day: date) -> datetime:
    return datetime.combine(day + timedelta(days=1), time(0), tzinfo=UTC)


def _title(question: str) -> str:
    text = " ".join(question.split())
    if len(text) <= TITLE_CHARS:
        return text
    return text[:TITLE_CHARS].rsplit(" ", 1)[0] + " …"


def _history(messages: list[MessageRow]) -> tuple[list[Turn], MessageRow | None, MessageRow | None]:
    """Turns oldest first, the last question and the last answer, from the newest-first recent messages."""
    ordered = list(reversed(messages))
    turns = [
        Turn(q.text, a.text)
        for q, a in zip(ordered, ordered[1:], strict=False)
        if q.role == "user" and a.role == "assistant"
    ]
    last_question = next((m for m in messages if m.role == "user"), None)
    last_answer = next((m for m in messages if m.role == "assistant"), None)
    return turns, last_question, last_answer


@dataclass
class ChatService:
    pool: asyncpg.Pool
    model: ModelClient | None
    daily_messages: int
    semantic: bool = False
    # The longest a whole answer may take; the model client's own timeout bounds each silence within it.
    answer_timeout_s: float = 120.0
    today: Callable[[], date] = field(default=lambda: datetime.now(UTC).date())

    @classmethod
    def open(
        cls, pool: asyncpg.Pool, config: ModelConfig | None, *, daily_messages: int, semantic: bool
    ) -> ChatService:
        """The service for a configured model (None: chat answers CHAT_UNAVAILABLE). Close it with `aclose`."""
        model = ModelClient.from_config(config, policy=CHAT_RETRY) if config is not None else None
        timeout = 2 * config.timeout_s if config is not None else 0.0
        return cls(pool, model, daily_messages, semantic=semantic, answer_timeout_s=timeout)

    async def aclose(self) -> None:
        if self.model is not None:
            await self.model.aclose()

    async def start(self, question: Question) -> Answer | Replay:
        """Everything before the model is asked, or the stored answer of a retried key. Raises ChatError
        (CHAT_UNAVAILABLE, NOT_FOUND, RATE_LIMITED, IDEMPOTENCY_KEY_IN_USE, IDEMPOTENCY_KEY_REUSED)."""
        if self.model is None:
            raise unavailable()
        if question.idempotency_key is None:
            return await self._start(question)
        if (replay := await self._claim(question, question.idempotency_key)) is not None:
            return replay
        try:
            return await self._start(question)
        except BaseException:
            await self.forget(question)
            raise

    async def _claim(self, question: Question, key: str) -> Replay | None:
        fingerprint = question.fingerprint()
        async with self.pool.acquire() as conn:
            held = await claim_chat_request(
                conn,
                question.viewer_id,
                key,
                fingerprint,
                abandoned_after_s=self.answer_timeout_s + ABANDONED_AFTER_S,
                expires_after_s=IDEMPOTENCY_KEY_TTL_S,
            )
            if held is None:
                return None
            if held.fingerprint != fingerprint:
                raise ChatError(
                    "IDEMPOTENCY_KEY_REUSED",
                    "This idempotency key was used for another question; use a new key for a new question.",
                    status=422,
                )
            if held.answer is None:
                raise ChatError(
                    "IDEMPOTENCY_KEY_IN_USE",
                    "The answer to this question is still being written; retry in a moment for it.",
                    status=409,
                    retryAfterS=IN_PROGRESS_RETRY_S,
                )
            return await Replay.of(conn, held.answer)

    async def forget(self, question: Question) -> None:
        """Free the question's key, if it has one (its answer failed or stopped). A failure here leaves the key
        to be taken over once abandoned."""
        if question.idempotency_key is None:
            return
        try:
            await forget_chat_request(self.pool, question.viewer_id, question.idempotency_key)
        except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError) as exc:
            log.warning("chat idempotency key not freed: %s: %s", type(exc).__name__, exc)

    async def _start(self, question: Question) -> Answer:
        history: list[Turn] = []
        scope = question.scope
        pinned: list[int] = []
        if question.conversation_id is not None:
            if await fetch_conversation(self.pool, question.conversation_id, question.viewer_id) is None:
                raise ChatError("NOT_FOUND", "No such conversation.", status=404)
            recent = await fetch_recent_messages(self.pool, question.conversation_id, RECENT_MESSAGES)
            history, last_question, last_answer = _history(recent)
            if scope is None and last_question is not None:
                scope = ChatScope.from_json(last_question.scope)
            if last_answer is not None:
                pinned = last_answer.cited_paper_ids[:PINNED_CITATIONS]
        scope = scope or ChatScope()
        day = self.today()
        if not await reserve_chat_message(self.pool, question.viewer_id, day, self.daily_messages):
            count_rejection("RATE_LIMITED")
            reset = _tomorrow(day)
            raise ChatError(
                "RATE_LIMITED",
                f"You have asked {self.daily_messages} questions today, the daily limit; ask again after "
                f"{reset:%Y-%m-%d %H:%M} UTC.",
                status=429,
                resetAt=reset.isoformat().replace("+00:00", "Z"),
                retryAfterS=max(int((reset - datetime.now(UTC)).total_seconds()), 1),
            )
        try:
            papers = await retrieve(self.pool, question.text, scope, semantic=self.semantic, pinned=pinned)
            prompt = build_prompt(question.text, papers, history, scope_kind=scope.kind)
        except BaseException:
            await release_chat_message(self.pool, question.viewer_id, day)
            raise
        return Answer(self, question, scope, prompt, day)


@dataclass
class Answer:
    service: ChatService
    question: Question
    scope: ChatScope
    prompt: Prompt
    day: date
    _usage: Usage = field(default_factory=Usage, init=False)
    _finish: str | None = field(default=None, init=False)

    @property
    def sources(self) -> list[PaperRow]:
        return self.prompt.papers

    async def events(self) -> AsyncGenerator[ChatEvent, None]:
        """Sources, Deltas, then Done. Raises ChatError (MODEL_UNAVAILABLE, NOT_FOUND) after Sources."""
        outcome = "cancelled"
        stored = False
        try:
            # Each generator below closes the one it reads (aclosing): a reader who leaves closes the model's stream.
            async with contextlib.aclosing(self._events()) as events:
                async for event in events:
                    if isinstance(event, Done):
                        stored = True
                        outcome = "answered" if self.sources else "nothing_found"
                    yield event
        except ChatError:
            outcome = "model_unavailable"
            raise
        finally:
            CHAT_ANSWERS.labels(outcome).inc()
            if not stored:
                await self.service.forget(self.question)

    async def _events(self) -> AsyncGenerator[ChatEvent, None]:
        yield Sources(self.sources)
        allowed = {p.arxiv_id: p for p in self.sources}
        citations = CitationFilter(allowed)
        shown: list[str] = []
        usage = Usage()
        if not self.sources:
            shown.append(NOTHING_FOUND)
            yield Delta(NOTHING_FOUND)
        else:
            try:
                async with contextlib.aclosing(self._model_text(citations)) as texts:
                    async for text in texts:
                        shown.append(text)
                        yield Delta(text)
            except (ModelRequestFailed, TimeoutError) as exc:
                log.warning("chat answer failed: %s", exc)
                raise await self._given_back("The language model did not answer; try again in a moment.") from None
            if not any(part.strip() for part in shown):
                # Nothing to store: a reasoning model that spent its tokens thinking, a provider's filter.
                log.warning("chat answer empty (the model ended with %r)", self._finish)
                raise await self._given_back("The language model gave no answer; try again in a moment.")
            usage = self._usage
            MODEL_TOKENS.labels("prompt").inc(usage.prompt_tokens)
            MODEL_TOKENS.labels("completion").inc(usage.completion_tokens)
        text = "".join(shown)
        cited = [allowed[a] for a in citations.cited]
        async with self.service.pool.acquire() as conn:
            saved = await save_turn(
                conn,
                viewer_id=self.question.viewer_id,
                conversation_id=self.question.conversation_id,
                title=_title(self.question.text),
                question=self.question.text,
                scope=self.scope.to_json(),
                answer=text,
                cited_paper_ids=[p.id for p in cited],
                source_paper_ids=[p.id for p in self.sources],
                removed_citations=citations.removed,
                prompt_tokens=usage.prompt_tokens,
                completion_tokens=usage.completion_tokens,
                model=self.service.model.model if self.service.model and self.sources else None,
                day=self.day,
                tokens_estimated=usage.estimated,
                idempotency_key=self.question.idempotency_key,
            )
        if saved is None:
            raise ChatError("NOT_FOUND", "The conversation was deleted while the answer was written.", status=404)
        yield Done(saved.conversation_id, saved.answer_id, text, cited, citations.removed, usage)

    async def _given_back(self, message: str) -> ChatError:
        """The question given back to the reader's quota (the model never answered it), and the error to raise."""
        await release_chat_message(self.service.pool, self.question.viewer_id, self.day)
        return ChatError("MODEL_UNAVAILABLE", message, status=502)

    async def _model_text(self, citations: CitationFilter) -> AsyncGenerator[str, None]:
        model = self.service.model
        assert model is not None
        deadline = asyncio.get_running_loop().time() + self.service.answer_timeout_s
        stream = model.stream(self.prompt.messages, max_tokens=ANSWER_TOKENS)
        async with contextlib.aclosing(stream) as parts:
            while True:
                # The deadline covers the model, never the time our reader takes to receive what was sent.
                try:
                    async with asyncio.timeout_at(deadline):
                        part = await anext(parts)
                except StopAsyncIteration:
                    break
                if isinstance(part, TextPart):
                    if text := citations.feed(part.text):
                        yield text
                else:
                    self._usage, self._finish = part.usage, part.finish_reason
        if tail := citations.flush():
            yield tail


@dataclass(frozen=True, slots=True)
class Replay:
    """A stored answer sent again for a retried idempotency key: the same events as when it was written."""

    answer: StoredAnswer
    sources: list[PaperRow]
    citations: list[PaperRow]

    @classmethod
    async def of(cls, conn: Conn, answer: StoredAnswer) -> Replay:
        papers = {p.id: p for p in await fetch_papers_by_ids(conn, answer.source_paper_ids + answer.cited_paper_ids)}
        return cls(
            answer,
            [papers[i] for i in answer.source_paper_ids if i in papers],
            [papers[i] for i in answer.cited_paper_ids if i in papers],
        )

    async def events(self) -> AsyncGenerator[ChatEvent, None]:
        CHAT_ANSWERS.labels("replayed").inc()
        a = self.answer
        yield Sources(self.sources)
        yield Delta(a.text)
        usage = Usage(a.prompt_tokens, a.completion_tokens, a.tokens_estimated)
        yield Done(a.conversation_id, a.message_id, a.text, self.citations, a.removed_citations, usage, replayed=True)
