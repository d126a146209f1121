"""Chat with the papers through GraphQL: `askPapers`, `deleteConversation`, `viewer.conversations`; and the
argument checks the `/chat` event stream shares (routes/chat_stream.py).

Only signed-in readers chat (UNAUTHENTICATED otherwise), and each sees only their own conversations.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from strawberry.dataloader import DataLoader

from chat.retrieval import MAX_SCOPE_PAPERS, ChatScope
from chat.service import MAX_QUESTION_CHARS, ChatError, Done, Question, unavailable
from db.connection import Conn
from db.filters import Clause
from db.paging import TokenError, decode_global_id, encode_global_id
from db.queries.chat import (
    CONVERSATION_SORT,
    ConversationRow,
    MessageRow,
    count_conversations,
    delete_conversation,
    fetch_messages_by_conversation_ids,
    page_conversations,
)
from db.queries.papers import PaperRow
from resolvers.context import Context
from resolvers.errors import BadUserInput, NotFound, PublicError
from resolvers.institutions import lookup_institution_id
from resolvers.pages import ListQuery, read_page
from resolvers.pagination import Connection, page_request
from resolvers.papers import resolve_paper
from resolvers.researchers import lookup_researcher_id

CONVERSATION = "Conversation"
MESSAGE = "ConversationMessage"
MAX_CONVERSATIONS_PAGE = 50
# Besides the model's own time: retrieval, the prompt, storing the turn.
ANSWER_OVERHEAD_S = 10.0


class Unauthenticated(PublicError):
    code = "UNAUTHENTICATED"


class ChatFailure(PublicError):
    """A ChatError as a GraphQL error: its code, message and extensions (`resetAt` for RATE_LIMITED)."""

    def __init__(self, error: ChatError) -> None:
        super().__init__(error.message)
        self.code = error.code
        self.extensions = {"code": error.code, **error.extensions}


def signed_in(ctx: Context) -> str:
    viewer_id = ctx.identity.viewer_id
    if viewer_id is None:
        raise Unauthenticated("Sign in to chat with the papers.")
    return viewer_id


def check_question(text: str) -> str:
    question = text.strip()
    if not question:
        raise BadUserInput("`question` is empty.")
    if len(question) > MAX_QUESTION_CHARS:
        raise BadUserInput(f"`question` is longer than {MAX_QUESTION_CHARS} characters ({len(question)}).")
    if "\x00" in question:
        raise BadUserInput("`question` contains a NUL character.")
    return question


MAX_IDEMPOTENCY_KEY_CHARS = 255


def check_idempotency_key(key: str) -> str:
    """A client's key for one question: 1 to 255 printable ASCII characters (a UUID is the usual choice)."""
    if not 1 <= len(key) <= MAX_IDEMPOTENCY_KEY_CHARS or not all(" " <= c <= "~" for c in key):
        raise BadUserInput(
            f"The idempotency key must be 1 to {MAX_IDEMPOTENCY_KEY_CHARS} printable ASCII characters (a UUID, say)."
        )
    return key


def conversation_id(token: str) -> int:
    try:
        kind, db_id = decode_global_id(token)
    except TokenError:
        kind, db_id = "", 0
    if kind != CONVERSATION or not isinstance(db_id, int):
        raise BadUserInput("`conversationId` is not a conversation id: pass the `id` of one of your conversations.")
    return db_id


async def chat_scope(
    ctx: Context,
    *,
    paper: str | None = None,
    researcher: str | None = None,
    institution: str | None = None,
    papers: Sequence[str] | None = None,
) -> ChatScope:
    """Resolve a scope given by public ids (the forms `paper`, `researcher` and `institution` accept).
    Exactly one of them; NOT_FOUND when it names nothing in the archive."""
    given = [k for k, v in (("paper", paper), ("researcher", researcher), ("institution", institution)) if v]
    if papers is not None:
        given.append("papers")
    if len(given) != 1:
        raise BadUserInput("`scope` takes exactly one of `paper`, `researcher`, `institution` or `papers`.")
    if paper:
        row = await resolve_paper(ctx, paper)
        if row is None:
            raise NotFound(f"No paper {paper[:80]!r} in the archive.")
        return ChatScope("paper", (row.id,))
    if researcher:
        rid = await lookup_researcher_id(ctx, researcher)
        if rid is None or await ctx.loaders.researcher_by_id.load(rid) is None:
            raise NotFound(f"No researcher {researcher[:80]!r} in the archive.")
        return ChatScope("researcher", (rid,))
    if institution:
        iid = await lookup_institution_id(ctx, institution)
        if iid is None or await ctx.loaders.institution_by_id.load(iid) is None:
            raise NotFound(f"No institution {institution[:80]!r} in the archive.")
        return ChatScope("institution", (iid,))
    assert papers is not None
    if not 1 <= len(papers) <= MAX_SCOPE_PAPERS:
        raise BadUserInput(f"`scope.papers` takes 1 to {MAX_SCOPE_PAPERS} paper ids.")
    found = await asyncio.gather(*(resolve_paper(ctx, p) for p in papers))
    ids = tuple(dict.fromkeys(row.id for row in found if row is not None))
    if not ids:
        raise NotFound("None of `scope.papers` is in the archive.")
    return ChatScope("papers", ids)


async def question_of(
    ctx: Context,
    question: str,
    scope: dict[str, Any] | None,
    conversation: str | None,
    idempotency_key: str | None = None,
) -> Question:
    """The checked question of the signed-in reader (both transports)."""
    viewer_id = signed_in(ctx)
    text = check_question(question)
    key = check_idempotency_key(idempotency_key) if idempotency_key is not None else None
    resolved = await chat_scope(ctx, **scope) if scope else None
    return Question(viewer_id, text, resolved, conversation_id(conversation) if conversation else None, key)


# -- askPapers ---------------------------------------------------------------------------------------------


@dataclass(slots=True)
class ChatAnswerView:
    conversation_id: str
    message_id: str
    text: str
    citations: list[PaperRow]
    sources: list[PaperRow]
    removed_citations: int
    replayed: bool


async def resolve_ask_papers(
    ctx: Context,
    *,
    question: str,
    scope: dict[str, Any] | None,
    conversation: str | None,
    idempotency_key: str | None = None,
) -> ChatAnswerView:
    """The whole answer at once, for clients that do not read streams (the site streams through /chat)."""
    asked = await question_of(ctx, question, scope, conversation, idempotency_key)
    service = ctx.chat
    if service is None:
        raise ChatFailure(unavailable())
    if ctx.operation_deadline is not None:
        # The operation's usual deadline is for reads; an answer takes the model's time.
        loop = asyncio.get_running_loop()
        ctx.operation_deadline.reschedule(loop.time() + service.answer_timeout_s + ANSWER_OVERHEAD_S)
    done: Done | None = None
    try:
        answer = await service.start(asked)
        async for event in answer.events():
            if isinstance(event, Done):
                done = event
    except ChatError as exc:
        raise ChatFailure(exc) from None
    assert done is not None
    ctx.loaders.prime_papers(answer.sources)
    return ChatAnswerView(
        encode_global_id(CONVERSATION, done.conversation_id),
        encode_global_id(MESSAGE, done.message_id),
        done.text,
        done.citations,
        answer.sources,
        done.removed_citations,
        done.replayed,
    )


async def resolve_delete_conversation(ctx: Context, token: str) -> str:
    viewer_id = signed_in(ctx)
    if not await delete_conversation(ctx.pool, conversation_id(token), viewer_id):
        raise NotFound("No such conversation.")
    return token


# -- viewer.conversations ----------------------------------------------------------------------------------


async def resolve_conversations(
    ctx: Context, viewer_id: str, *, first: int, after: str | None
) -> Connection[ConversationRow]:
    if not 1 <= first <= MAX_CONVERSATIONS_PAGE:
        raise BadUserInput(f"`first` must be between 1 and {MAX_CONVERSATIONS_PAGE}; got {first}.")
    request = page_request(CONVERSATION_SORT, first=first, after=after, page=None)

    async def rows(conn: Conn, after: Clause | None, limit: int, offset: int) -> list[ConversationRow]:
        return await page_conversations(conn, viewer_id, limit=limit, after=after)

    async def count(conn: Conn) -> int:
        return await count_conversations(conn, viewer_id)

    # The total is counted only when asked for (its field's resolver awaits it).
    return await read_page(ctx, ListQuery(CONVERSATION_SORT, rows, count), request, want_total=False)


def _messages_loader(ctx: Context) -> DataLoader[int, list[MessageRow]]:
    async def load(ids: list[int]) -> list[list[MessageRow]]:
        async with ctx.pool.acquire() as conn:
            grouped = await fetch_messages_by_conversation_ids(conn, ids)
        return [grouped.get(i, []) for i in ids]

    return ctx.loaders.named("messages_by_conversation_id", lambda: DataLoader(load))


async def conversation_messages(ctx: Context, conversation: ConversationRow) -> list[MessageRow]:
    return await _messages_loader(ctx).load(conversation.id)


async def message_citations(ctx: Context, message: MessageRow) -> list[PaperRow]:
    rows = await ctx.loaders.paper_by_id.load_many(message.cited_paper_ids)
    return [r for r in rows if r is not None]
