"""The first check at the edge: request bodies over the limit are refused before anything reads them."""

from __future__ import annotations

from starlette.types import Message, Receive, Scope, Send

from edge.errors import JSON_TYPE, EdgeError, send_error
from edge.request import headers_of


class TooLarge(Exception):
    """Raised by `limited()`'s receive once the body streamed past the limit."""


def declared_length(scope: Scope) -> int | None:
    """The body's Content-Length; None when the request declares none it can be held to."""
    value = headers_of(scope).get(b"content-length")
    if value is None:
        return None
    try:
        length = int(value)
    except ValueError:
        return None
    return length if length >= 0 else None


def limited(receive: Receive, max_bytes: int) -> Receive:
    """`receive`, raising TooLarge once more than `max_bytes` of body arrived (a body without Content-Length)."""
    received = 0

    async def limited_receive() -> Message:
        nonlocal received
        message = await receive()
        if message["type"] == "http.request":
            received += len(message.get("body", b""))
            if received > max_bytes:
                raise TooLarge
        return message

    return limited_receive


async def reject(send: Send, max_bytes: int, media: bytes = JSON_TYPE) -> None:
    await send_error(send, EdgeError(413, "PAYLOAD_TOO_LARGE", f"Request body larger than {max_bytes} bytes."), media)
