"""Conversations with the papers, their messages, each reader's daily chat usage, and the idempotency keys of
questions (one stored answer per reader and key).

Every read and write names the viewer: a conversation is reachable only by the reader who owns it.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date, datetime
from typing import Any

import asyncpg
import orjson

from db.connection import Conn
from db.filters import Clause, Fragment, Sort, compose


@dataclass(frozen=True, slots=True)
class ConversationRow:
    id: int
    title: str
    created_at: datetime
    updated_at: datetime


@dataclass(frozen=True, slots=True)
class MessageRow:
    id: int
    conversation_id: int
    role: str  # user | assistant
    text: str
    scope: dict[str, Any] | None
    cited_paper_ids: list[int]
    source_paper_ids: list[int]
    created_at: datetime


CONVERSATION_COLUMNS = "c.id, c.title, c.created_at, c.updated_at"
MESSAGE_COLUMNS = (
    "m.id, m.conversation_id, m.role, m.text, m.scope::text, m.cited_paper_ids, m.source_paper_ids, m.created_at"
)


def _message(r: asyncpg.Record) -> MessageRow:
    return MessageRow(r[0], r[1], r[2], r[3], orjson.loads(r[4]) if r[4] else None, list(r[5]), list(r[6]), r[7])


SELECT_CONVERSATION = f"SELECT {CONVERSATION_COLUMNS} FROM conversations c WHERE c.id = $1 AND c.viewer_id = $2"

# Most recently active first; `after` cursors carry (updated_at, id), timestamps exact to the microsecond.
CONVERSATION_SORT = Sort(
    "CONVERSATIONS",
    "c.updated_at DESC, c.id DESC",
    Fragment("(c.updated_at, c.id) < ($1::timestamptz, $2::bigint)", 2),
    (("updated_at", "ts"), ("id", "int")),
)
COUNT_CONVERSATIONS = "SELECT count(*) FROM conversations WHERE viewer_id = $1"

SELECT_MESSAGES_BY_CONVERSATION_IDS = f"""
SELECT {MESSAGE_COLUMNS} FROM conversation_messages m
WHERE m.conversation_id = any($1::bigint[])
ORDER BY m.conversation_id, m.id
"""
SELECT_RECENT_MESSAGES = f"""
SELECT {MESSAGE_COLUMNS} FROM conversation_messages m
WHERE m.conversation_id = $1
ORDER BY m.id DESC
LIMIT $2::int
"""

INSERT_CONVERSATION = "INSERT INTO conversations (viewer_id, title) VALUES ($1, $2) RETURNING id"
TOUCH_CONVERSATION = "UPDATE conversations SET updated_at = now() WHERE id = $1 AND viewer_id = $2 RETURNING id"
INSERT_MESSAGES = """
INSERT INTO conversation_messages (conversation_id, role, text, scope, cited_paper_ids, source_paper_ids,
                                   removed_citations, prompt_tokens, completion_tokens, tokens_estimated, model)
SELECT $1::bigint, m.role, m.text, m.scope::jsonb, m.cited, m.sources, m.removed, m.prompt_tokens,
       m.completion_tokens, m.estimated, m.model
FROM (VALUES ('user', $2::text, $3::text, '{}'::bigint[], $4::bigint[], 0, NULL::int, NULL::int, false,
              NULL::text),
             ('assistant', $5::text, NULL, $6::bigint[], $4::bigint[], $7::int, $8::int, $9::int, $11::bool,
              $10::text))
     AS m (role, text, scope, cited, sources, removed, prompt_tokens, completion_tokens, estimated, model)
ORDER BY m.role DESC
RETURNING id, role
"""
DELETE_CONVERSATION = "DELETE FROM conversations WHERE id = $1 AND viewer_id = $2 RETURNING id"

# One more question for today, unless the reader's quota is spent: no row back means it is.
RESERVE_MESSAGE = """
INSERT INTO chat_usage AS u (viewer_id, day, messages) SELECT $1::text, $2::date, 1 WHERE $3::int > 0
ON CONFLICT (viewer_id, day) DO UPDATE SET messages = u.messages + 1 WHERE u.messages < $3::int
RETURNING u.messages
"""
RELEASE_MESSAGE = "UPDATE chat_usage SET messages = greatest(messages - 1, 0) WHERE viewer_id = $1 AND day = $2"
ADD_TOKENS = """
UPDATE chat_usage SET prompt_tokens = prompt_tokens + $3, completion_tokens = completion_tokens + $4
WHERE viewer_id = $1 AND day = $2
"""


# -- idempotency keys ---------------------------------------------------------------------------------------

# The key is the caller's: take it when it is new (expired keys are deleted first), or abandoned by a worker that
# died mid-answer (the same question, still unanswered after the answer's time limit).
CLAIM_REQUEST = """
INSERT INTO chat_requests AS r (viewer_id, key, fingerprint) VALUES ($1, $2, $3)
ON CONFLICT (viewer_id, key) DO UPDATE SET started_at = now()
WHERE r.answer_id IS NULL AND r.fingerprint = excluded.fingerprint
  AND r.started_at < now() - make_interval(secs => $4::float8)
RETURNING true
"""
SELECT_REQUEST = """
SELECT r.fingerprint, m.conversation_id, m.id, m.text, m.cited_paper_ids, m.source_paper_ids, m.removed_citations,
       m.prompt_tokens, m.completion_tokens, m.tokens_estimated
FROM chat_requests r LEFT JOIN conversation_messages m ON m.id = r.answer_id
WHERE r.viewer_id = $1 AND r.key = $2
"""
EXPIRE_REQUESTS = "DELETE FROM chat_requests WHERE viewer_id = $1 AND started_at < now() - make_interval(secs => $2)"
FORGET_REQUEST = "DELETE FROM chat_requests WHERE viewer_id = $1 AND key = $2 AND answer_id IS NULL"
ANSWER_REQUEST = "UPDATE chat_requests SET answer_id = $3 WHERE viewer_id = $1 AND key = $2"


@dataclass(frozen=True, slots=True)
class StoredAnswer:
    """An answer as stored, for a retried key."""

    conversation_id: int
    message_id: int
    text: str
    cited_paper_ids: list[int]
    source_paper_ids: list[int]
    removed_citations: int
    prompt_tokens: int
    completion_tokens: int
    tokens_estimated: bool


@dataclass(frozen=True, slots=True)
class Taken:
    """The key is held: by another question (`fingerprint` differs), an answer still being written (`answer`
    None), or an answer already stored."""

    fingerprint: bytes
    answer: StoredAnswer | None


async def claim_chat_request(
    conn: Conn, viewer_id: str, key: str, fingerprint: bytes, *, abandoned_after_s: float, expires_after_s: float
) -> Taken | None:
    """Take the reader's key for this question (None), or say who holds it. Expired keys of the reader go first."""
    async with conn.transaction():
        await conn.execute(EXPIRE_REQUESTS, viewer_id, expires_after_s)
        while True:
            if await conn.fetchval(CLAIM_REQUEST, viewer_id, key, fingerprint, abandoned_after_s):
                return None
            r = await conn.fetchrow(SELECT_REQUEST, viewer_id, key)
            if r is None:  # deleted between the two (its answer failed): claim it again
                continue
            answer = None
            if r[2] is not None:
                answer = StoredAnswer(r[1], r[2], r[3], list(r[4]), list(r[5]), r[6], r[7] or 0, r[8] or 0, r[9])
            return Taken(bytes(r[0]), answer)


async def forget_chat_request(conn: Conn | asyncpg.Pool, viewer_id: str, key: str) -> None:
    """Free an unanswered key (its answer failed or was stopped), so that a retry starts afresh."""
    await conn.execute(FORGET_REQUEST, viewer_id, key)


@dataclass(frozen=True, slots=True)
class SavedTurn:
    conversation_id: int
    question_id: int
    answer_id: int


async def fetch_conversation(conn: Conn | asyncpg.Pool, conversation_id: int, viewer_id: str) -> ConversationRow | None:
    r = await conn.fetchrow(SELECT_CONVERSATION, conversation_id, viewer_id)
    return ConversationRow(*r) if r is not None else None


async def page_conversations(conn: Conn, viewer_id: str, *, limit: int, after: Clause | None) -> list[ConversationRow]:
    """The reader's conversations, most recently active first, after the cursor's position."""
    where, args = compose([after] if after else [], offset=1)
    sql = (
        f"SELECT {CONVERSATION_COLUMNS} FROM conversations c WHERE c.viewer_id = $1 AND {where}"
        f" ORDER BY {CONVERSATION_SORT.order_by} LIMIT ${len(args) + 2}"
    )
    return [ConversationRow(*r) for r in await conn.fetch(sql, viewer_id, *args, limit)]


async def count_conversations(conn: Conn, viewer_id: str) -> int:
    count: int = await conn.fetchval(COUNT_CONVERSATIONS, viewer_id)
    return count


async def fetch_messages_by_conversation_ids(conn: Conn, ids: Sequence[int]) -> dict[int, list[MessageRow]]:
    out: dict[int, list[MessageRow]] = defaultdict(list)
    for r in await conn.fetch(SELECT_MESSAGES_BY_CONVERSATION_IDS, list(ids)):
        out[r[1]].append(_message(r))
    return out


async def fetch_recent_messages(conn: Conn | asyncpg.Pool, conversation_id: int, limit: int) -> list[MessageRow]:
    """The conversation's last `limit` messages, newest first."""
    return [_message(r) for r in await conn.fetch(SELECT_RECENT_MESSAGES, conversation_id, limit)]


async def save_turn(
    conn: Conn,
    *,
    viewer_id: str,
    conversation_id: int | None,
    title: str,
    question: str,
    scope: dict[str, Any] | None,
    answer: str,
    cited_paper_ids: Sequence[int],
    source_paper_ids: Sequence[int],
    removed_citations: int,
    prompt_tokens: int,
    completion_tokens: int,
    model: str | None,
    day: date,
    tokens_estimated: bool = False,
    idempotency_key: str | None = None,
) -> SavedTurn | None:
    """A question and its answer, in one transaction with the tokens they cost and the idempotency key that
    names the answer. None when the conversation is gone (deleted while the answer was written)."""
    async with conn.transaction():
        if conversation_id is None:
            conversation_id = await conn.fetchval(INSERT_CONVERSATION, viewer_id, title)
        elif await conn.fetchval(TOUCH_CONVERSATION, conversation_id, viewer_id) is None:
            return None
        rows = await conn.fetch(
            INSERT_MESSAGES,
            conversation_id,
            question,
            orjson.dumps(scope).decode() if scope is not None else None,
            list(source_paper_ids),
            answer,
            list(cited_paper_ids),
            removed_citations,
            prompt_tokens,
            completion_tokens,
            model,
            tokens_estimated,
        )
        await conn.execute(ADD_TOKENS, viewer_id, day, prompt_tokens, completion_tokens)
        ids = {r["role"]: r["id"] for r in rows}
        if idempotency_key is not None:
            await conn.execute(ANSWER_REQUEST, viewer_id, idempotency_key, ids["assistant"])
    assert conversation_id is not None
    return SavedTurn(conversation_id, ids["user"], ids["assistant"])


async def delete_conversation(conn: Conn | asyncpg.Pool, conversation_id: int, viewer_id: str) -> bool:
    return await conn.fetchval(DELETE_CONVERSATION, conversation_id, viewer_id) is not None


async def reserve_chat_message(conn: Conn | asyncpg.Pool, viewer_id: str, day: date, limit: int) -> bool:
    """Count one question against the reader's quota for `day`; False (nothing counted) when it is spent."""
    return await conn.fetchval(RESERVE_MESSAGE, viewer_id, day, limit) is not None


async def release_chat_message(conn: Conn | asyncpg.Pool, viewer_id: str, day: date) -> None:
    """Give a question back (it was never answered: the model failed)."""
    await conn.execute(RELEASE_MESSAGE, viewer_id, day)
