"""The OpenAI chat-completions wire format, as hosted providers, vLLM, llama.cpp and Ollama speak it.

Pure functions: the request body, a completion, a streamed chunk, the server-sent-event framing of a stream
(`data: {chunk}` lines, blank-line separated, ended by `data: [DONE]`) and the one-line reading of an
error body. Nothing here does I/O.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import orjson

from llm.errors import AnswerBrokeOff, MalformedModelResponse

DONE = "[DONE]"


@dataclass(frozen=True, slots=True)
class ChatMessage:
    role: str  # system | user | assistant
    content: str

    def wire(self) -> dict[str, str]:
        return {"role": self.role, "content": self.content}


@dataclass(frozen=True, slots=True)
class Usage:
    """Tokens one request (or many, added up) cost; `estimated` when the server reported none."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    estimated: bool = False

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            self.prompt_tokens + other.prompt_tokens,
            self.completion_tokens + other.completion_tokens,
            self.estimated or other.estimated,
        )

    def as_json(self) -> dict[str, int | bool]:
        return {
            "promptTokens": self.prompt_tokens,
            "completionTokens": self.completion_tokens,
            "totalTokens": self.total_tokens,
            "estimated": self.estimated,
        }


@dataclass(frozen=True, slots=True)
class Completion:
    text: str
    finish_reason: str | None
    usage: Usage
    # Set when the model declined to answer in the requested structure (structured outputs' `refusal`).
    refusal: str | None = None


@dataclass(frozen=True, slots=True)
class Chunk:
    text: str
    finish_reason: str | None
    usage: Usage | None


def json_schema_format(name: str, schema: dict[str, Any], *, description: str | None = None) -> dict[str, Any]:
    """`response_format` asking for JSON that follows `schema` (structured outputs, strict)."""
    spec: dict[str, Any] = {"name": name, "schema": schema, "strict": True}
    if description:
        spec["description"] = description
    return {"type": "json_schema", "json_schema": spec}


# The request's optional parts an endpoint may refuse, each with what to send instead.
ADAPTABLE = ("max_tokens", "temperature", "stream_options", "response_format")


@dataclass(slots=True)
class Dialect:
    """What the endpoint takes of the request's optional parts, learnt from its refusals. OpenAI's reasoning models
    (o-series, GPT-5 and later) refuse `max_tokens` ("Use 'max_completion_tokens' instead") and any `temperature`
    but the default; some servers refuse `stream_options`, or structured outputs (`response_format`: its schema then
    goes into the first message instead). Each is given up once, for the client's life."""

    limit_field: str = "max_tokens"
    temperature: bool = True
    stream_options: bool = True
    response_format: bool = True

    def give_up(self, param: str) -> bool:
        """Stop sending `param` as it was sent; False when that was done already (the refusal is the request's)."""
        if param == "max_tokens" and self.limit_field == "max_tokens":
            self.limit_field = "max_completion_tokens"
        elif param == "temperature" and self.temperature:
            self.temperature = False
        elif param == "stream_options" and self.stream_options:
            self.stream_options = False
        elif param == "response_format" and self.response_format:
            self.response_format = False
        else:
            return False
        return True


def refused_parameter(status: int, body: bytes) -> str | None:
    """The optional part a 400 refuses, from OpenAI's error object (`param`, or the message naming one)."""
    if status != 400:
        return None
    try:
        payload = orjson.loads(body)
    except orjson.JSONDecodeError:
        return None
    error = payload.get("error") if isinstance(payload, dict) else None
    if not isinstance(error, dict):
        error = payload if isinstance(payload, dict) else {}
    if (param := error.get("param")) in ADAPTABLE:
        return str(param)
    message = error.get("message")
    named = [p for p in ADAPTABLE if isinstance(message, str) and p in message]
    return named[0] if len(named) == 1 else None


def with_format_in_prompt(messages: Sequence[ChatMessage], response_format: dict[str, Any]) -> list[ChatMessage]:
    """The messages with what `response_format` asked for written into the first one (a system message, where
    there is one: some chat templates take a system message first only)."""
    spec = response_format.get("json_schema")
    if response_format.get("type") == "json_schema" and isinstance(spec, dict):
        schema = orjson.dumps(spec.get("schema", {})).decode()
        note = f"Answer with one JSON object, and nothing else, that follows this JSON Schema:\n{schema}"
    else:
        note = "Answer with one JSON object, and nothing else."
    first, *rest = messages
    return [ChatMessage(first.role, f"{first.content}\n\n{note}"), *rest]


def request_body(
    model: str,
    messages: Sequence[ChatMessage],
    *,
    max_tokens: int,
    temperature: float,
    stream: bool,
    response_format: dict[str, Any] | None = None,
    dialect: Dialect | None = None,
    reasoning_effort: str | None = None,
) -> dict[str, Any]:
    # `max_tokens` first: every OpenAI-compatible server reads it, and the dialect learns when one does not.
    dialect = dialect or Dialect()
    if response_format is not None and not dialect.response_format:
        messages, response_format = with_format_in_prompt(messages, response_format), None
    body: dict[str, Any] = {
        "model": model,
        "messages": [m.wire() for m in messages],
        dialect.limit_field: max_tokens,
        "stream": stream,
    }
    if dialect.temperature:
        body["temperature"] = temperature
    if stream and dialect.stream_options:
        body["stream_options"] = {"include_usage": True}
    if response_format is not None:
        body["response_format"] = response_format
    if reasoning_effort is not None:
        body["reasoning_effort"] = reasoning_effort
    return body


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0


def parse_usage(value: Any) -> Usage | None:
    if not isinstance(value, dict):
        return None
    return Usage(_int(value.get("prompt_tokens")), _int(value.get("completion_tokens")))


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # content parts: [{"type": "text", "text": ...}]
        return "".join(p.get("text", "") for p in content if isinstance(p, dict) and isinstance(p.get("text"), str))
    return ""


def parse_completion(payload: Any) -> Completion:
    """A `chat.completion` object; MalformedModelResponse when it is not one."""
    if not isinstance(payload, dict):
        raise MalformedModelResponse("the completion is not a JSON object")
    choices = payload.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        raise MalformedModelResponse("the completion has no choices")
    message = choices[0].get("message")
    if not isinstance(message, dict):
        raise MalformedModelResponse("the completion's choice has no message")
    refusal = message.get("refusal")
    finish = choices[0].get("finish_reason")
    return Completion(
        text=_text(message.get("content")),
        finish_reason=finish if isinstance(finish, str) else None,
        usage=parse_usage(payload.get("usage")) or Usage(estimated=True),
        refusal=refusal if isinstance(refusal, str) and refusal else None,
    )


def parse_chunk(data: str) -> Chunk:
    """One `data:` payload of a stream (a `chat.completion.chunk`). An error object in the stream is AnswerBrokeOff."""
    try:
        payload = orjson.loads(data)
    except orjson.JSONDecodeError:
        raise MalformedModelResponse("a streamed chunk is not JSON") from None
    if not isinstance(payload, dict):
        raise MalformedModelResponse("a streamed chunk is not a JSON object")
    if "error" in payload:
        raise AnswerBrokeOff(f"the model reported an error mid-answer: {error_message(payload)}")
    text = ""
    finish: str | None = None
    choices = payload.get("choices")
    if isinstance(choices, list) and choices and isinstance(choices[0], dict):
        delta = choices[0].get("delta")
        if isinstance(delta, dict):
            text = _text(delta.get("content"))
        reason = choices[0].get("finish_reason")
        finish = reason if isinstance(reason, str) else None
    return Chunk(text, finish, parse_usage(payload.get("usage")))


class EventDecoder:
    """Server-sent events, line by line: `feed()` returns an event's data when a blank line ends it."""

    def __init__(self) -> None:
        self._data: list[str] = []

    def feed(self, line: str) -> str | None:
        if not line:
            if not self._data:
                return None
            data, self._data = "\n".join(self._data), []
            return data
        if line.startswith(":"):
            return None  # a comment (keep-alive)
        name, _, value = line.partition(":")
        if name == "data":
            self._data.append(value[1:] if value.startswith(" ") else value)
        return None

    def flush(self) -> str | None:
        """What a stream that ended without a final blank line still held."""
        return self.feed("")


def error_message(payload: Any) -> str:
    """The message of an OpenAI-style error object (`{"error": {"message": ...}}`), on one line."""
    error = payload.get("error") if isinstance(payload, dict) else None
    message = error.get("message") if isinstance(error, dict) else error
    return " ".join(str(message).split())[:300] if message else "no message"


def describe_error_body(body: bytes, content_type: str) -> str:
    """One line saying what an unsuccessful answer held: the error's message, or what kind of page it was."""
    head = body.lstrip()[:15].lower()
    if "html" in content_type or head.startswith((b"<!doctype html", b"<html")):
        return "an HTML page instead of an API answer"
    try:
        return error_message(orjson.loads(body))
    except orjson.JSONDecodeError:
        text = " ".join(body.decode("utf-8", "replace").split())
        return text[:200] if text else "an empty body"
