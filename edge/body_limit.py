"""The first check at the edge: request bodies over the limit are refused before anything reads them."""

from __future__ import annotations

from starlette.types import Message, Receive, Scope, Send

from edge.errors import EdgeError, send_error


class TooLarge(Exception):
    """Raised by `limited()`'s receive once the body streamed past the limit."""


def declared_too_large(scope: Scope, max_bytes: int) -> bool:
    """A Content-Length over the limit: refused before a byte of the body is read."""
    for name, value in scope["headers"]:
        if name == b"content-length":
            try:
                return int(value) > max_bytes
            except ValueError:
                return False
    return False


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


async def reject(send: Send, max_bytes: int) -> None:
    await send_error(send, EdgeError(413, "PAYLOAD_TOO_LARGE", f"Request body larger than {max_bytes} bytes."))
