"""The language-model client shared by the analysis stage of the ingest and by chat.

It knows no GraphQL, no ingest and no web layer: callers pass it messages and read answers.
"""

from __future__ import annotations

from llm.client import ModelClient, StreamEnd, StreamEvent, TextPart
from llm.errors import (
    AnswerBrokeOff,
    MalformedModelResponse,
    ModelError,
    ModelNotConfigured,
    ModelRateLimited,
    ModelRequestFailed,
    ModelTimeout,
)
from llm.wire import ChatMessage, Completion, Usage, json_schema_format

__all__ = [
    "AnswerBrokeOff",
    "ChatMessage",
    "Completion",
    "MalformedModelResponse",
    "ModelClient",
    "ModelError",
    "ModelNotConfigured",
    "ModelRateLimited",
    "ModelRequestFailed",
    "ModelTimeout",
    "StreamEnd",
    "StreamEvent",
    "TextPart",
    "Usage",
    "json_schema_format",
]
