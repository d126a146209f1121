"""Chat with the papers: `askPapers`, `deleteConversation` and the reader's conversations (`viewer.conversations`)."""

from __future__ import annotations

from datetime import datetime
from enum import Enum

import strawberry

from chat.retrieval import MAX_SCOPE_PAPERS
from chat.service import MAX_QUESTION_CHARS
from db.paging import encode_global_id
from db.queries.chat import ConversationRow, MessageRow
from db.queries.papers import PaperRow
from resolvers.chat import (
    CONVERSATION,
    MAX_CONVERSATIONS_PAGE,
    MAX_IDEMPOTENCY_KEY_CHARS,
    MESSAGE,
    ChatAnswerView,
    conversation_messages,
    message_citations,
    resolve_ask_papers,
    resolve_delete_conversation,
)
from resolvers.context import Info
from schema.pagination import PageInfo, total_count_field


@strawberry.type(description="A paper an answer was drawn from or cites.")
class ChatPaper:
    arxiv_id: str = strawberry.field(description="The arXiv id without version, as the answer cites it.")
    title: str
    slug: str = strawberry.field(description="URL slug of the paper's page (/papers/<slug>).")


@strawberry.type(description="An answer to a question about the papers.")
class ChatAnswer:
    conversation_id: strawberry.ID = strawberry.field(description="The conversation; pass it to ask a follow-up.")
    message_id: strawberry.ID = strawberry.field(description="This answer's message.")
    text: str = strawberry.field(
        description="The answer; it cites papers as [arXiv:ID], each one of `sources` (others are removed)."
    )
    citations: list[ChatPaper] = strawberry.field(
        description="The papers the answer cites, in order of first citation."
    )
    sources: list[ChatPaper] = strawberry.field(description="The papers retrieved from the archive for the question.")
    removed_citations: int = strawberry.field(
        description="Citations the model made of papers outside `sources`, removed from `text`."
    )
    replayed: bool = strawberry.field(
        description="Whether this answer was stored earlier and is sent again for a retried `idempotencyKey` "
        "(no new turn, no quota, no model)."
    )


@strawberry.input(description="What a question is about: exactly one field. Without a scope, the whole archive.")
class ChatScopeInput:
    paper: str | None = strawberry.field(default=None, description="A paper, by any id `paper(id:)` accepts.")
    researcher: str | None = strawberry.field(
        default=None, description="A researcher's papers, by any id `researcher(id:)` accepts."
    )
    institution: str | None = strawberry.field(
        default=None, description="An institution's papers, by any id `institution(id:)` accepts."
    )
    papers: list[str] | None = strawberry.field(
        default=None, description=f"A set of papers (the list on the reader's page), 1 to {MAX_SCOPE_PAPERS} ids."
    )


@strawberry.input
class AskPapersInput:
    question: str = strawberry.field(description=f"The question, at most {MAX_QUESTION_CHARS} characters.")
    scope: ChatScopeInput | None = strawberry.field(
        default=None, description="What the question is about; a follow-up without one keeps the conversation's."
    )
    conversation_id: strawberry.ID | None = strawberry.field(
        default=None, description="Continue this conversation (its recent turns go with the question)."
    )
    idempotency_key: str | None = strawberry.field(
        default=None,
        description=f"A key of the client's for this question (a new UUID per question, the same on each retry; 1 to "
        f"{MAX_IDEMPOTENCY_KEY_CHARS} printable ASCII characters). A retry with the same key within a day gets the "
        "stored answer (`replayed`) instead of asking again; while the first answer is still being written it is "
        "IDEMPOTENCY_KEY_IN_USE (retry after `extensions.retryAfterS`); the key with another question is "
        "IDEMPOTENCY_KEY_REUSED. An answer that failed or was stopped frees its key.",
    )


@strawberry.type
class DeleteConversationResult:
    conversation_id: strawberry.ID = strawberry.field(description="The conversation that was deleted.")


@strawberry.enum(description="Who wrote a message of a conversation.")
class ChatRole(Enum):
    USER = strawberry.enum_value("user", description="The reader's question.")
    ASSISTANT = strawberry.enum_value("assistant", description="The answer.")


def _message_id(root: MessageRow) -> strawberry.ID:
    return strawberry.ID(encode_global_id(MESSAGE, root.id))


def _role(root: MessageRow) -> ChatRole:
    return ChatRole(root.role)


async def _citations(root: MessageRow, info: Info) -> list[PaperRow]:
    return await message_citations(info.context, root)


@strawberry.type(description="A question or an answer.")
class ConversationMessage:
    id: strawberry.ID = strawberry.field(resolver=_message_id)
    role: ChatRole = strawberry.field(resolver=_role)
    text: str
    created_at: datetime
    citations: list[PaperRow] = strawberry.field(
        resolver=_citations,
        graphql_type=list[ChatPaper],
        description="The papers an answer cites (empty for questions).",
    )


def _conversation_id(root: ConversationRow) -> strawberry.ID:
    return strawberry.ID(encode_global_id(CONVERSATION, root.id))


async def _messages(root: ConversationRow, info: Info) -> list[MessageRow]:
    return await conversation_messages(info.context, root)


@strawberry.type(description="A conversation with the papers; only its reader sees it.")
class Conversation:
    id: strawberry.ID = strawberry.field(resolver=_conversation_id)
    title: str = strawberry.field(description="The first question, shortened.")
    created_at: datetime
    updated_at: datetime = strawberry.field(description="When the last question was answered.")
    messages: list[MessageRow] = strawberry.field(
        resolver=_messages, graphql_type=list[ConversationMessage], description="Oldest first."
    )


@strawberry.type
class ConversationEdge:
    cursor: str
    node: Conversation


@strawberry.type(
    description=f"A page of conversations, most recently active first; `first` 1 to {MAX_CONVERSATIONS_PAGE}."
)
class ConversationConnection:
    total_count: int = total_count_field()
    page_info: PageInfo
    edges: list[ConversationEdge]
    nodes: list[Conversation]


@strawberry.type
class ChatMutation:
    @strawberry.mutation(
        description="Ask a question about the papers (signed-in readers; UNAUTHENTICATED otherwise) and get the "
        "whole answer at once; `/chat` streams the same answer as it is written. Answered from papers retrieved "
        "from the archive within `scope`, citing them as [arXiv:ID]. Errors: BAD_USER_INPUT (an empty or too "
        "long question, a malformed scope), NOT_FOUND (a scope or conversation that does not exist), "
        "RATE_LIMITED (the reader's daily questions are spent; `extensions.resetAt`), CHAT_UNAVAILABLE (no "
        "language model on this server), MODEL_UNAVAILABLE (the model did not answer; try again), "
        "IDEMPOTENCY_KEY_IN_USE and IDEMPOTENCY_KEY_REUSED (see `idempotencyKey`).",
        graphql_type=ChatAnswer,
    )
    async def ask_papers(self, info: Info, input: AskPapersInput) -> ChatAnswerView:
        scope = None
        if input.scope is not None:
            scope = {
                "paper": input.scope.paper,
                "researcher": input.scope.researcher,
                "institution": input.scope.institution,
                "papers": input.scope.papers,
            }
        return await resolve_ask_papers(
            info.context,
            question=input.question,
            scope=scope,
            conversation=input.conversation_id,
            idempotency_key=input.idempotency_key,
        )

    @strawberry.mutation(description="Delete one of the reader's conversations and its messages.")
    async def delete_conversation(self, info: Info, id: strawberry.ID) -> DeleteConversationResult:
        deleted = await resolve_delete_conversation(info.context, id)
        return DeleteConversationResult(conversation_id=strawberry.ID(deleted))
