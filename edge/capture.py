"""A response held back whole, to add headers computed from its body before it is sent (edge/response_cache.py)."""

from __future__ import annotations

from starlette.types import Message, Send


def with_headers(send: Send, extra: list[tuple[bytes, bytes]]) -> Send:
    async def sending(message: Message) -> None:
        if message["type"] == "http.response.start":
            names = {k for k, _ in extra}
            kept = [(k, v) for k, v in message.get("headers", []) if k not in names]
            message = {**message, "headers": [*kept, *extra]}
        await send(message)

    return sending


class Capture:
    """Holds the whole response back, to add headers computed from its body before sending it."""

    def __init__(self) -> None:
        self.start: Message | None = None
        self.status = 0
        self._chunks: list[bytes] = []

    async def __call__(self, message: Message) -> None:
        if message["type"] == "http.response.start":
            self.start = message
            self.status = message["status"]
        elif message["type"] == "http.response.body":
            self._chunks.append(message.get("body", b""))

    def body(self) -> bytes:
        return b"".join(self._chunks)

    async def replay(self, send: Send) -> None:
        assert self.start is not None
        await send(self.start)
        await send({"type": "http.response.body", "body": self.body()})
