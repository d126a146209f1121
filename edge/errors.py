"""Answers the edge gives before GraphQL runs: a GraphQL-shaped error body with a stable code."""

from __future__ import annotations

import orjson
from starlette.types import Send


class EdgeError(Exception):
    def __init__(
        self, status: int, code: str, message: str, *, headers: dict[str, str] | None = None, **extensions: object
    ) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.headers = headers or {}
        self.extensions = extensions

    def body(self) -> bytes:
        extensions = {"code": self.code, **self.extensions}
        return orjson.dumps({"errors": [{"message": self.message, "extensions": extensions}]})


async def send_error(send: Send, error: EdgeError) -> None:
    body = error.body()
    headers = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode()),
        (b"cache-control", b"no-store"),
        *((k.lower().encode(), v.encode()) for k, v in error.headers.items()),
    ]
    await send({"type": "http.response.start", "status": error.status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
