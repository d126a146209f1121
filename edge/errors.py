"""Answers the edge gives before GraphQL runs: a GraphQL-shaped error body with a stable code, in the media type
the request negotiated (edge/media.py; `application/json` by default), or, to a route that answers with a stream of
server-sent events (`/chat`), one `error` event `{"code", "message", ...}` as the route's own refusals are."""

from __future__ import annotations

from typing import Final

import orjson
from starlette.types import Send

JSON_TYPE: Final = b"application/json"
EVENT_STREAM: Final = b"text/event-stream"


class EdgeError(Exception):
    def __init__(
        self,
        status: int,
        code: str,
        message: str,
        *,
        headers: dict[str, str] | None = None,
        status_without_data: int | None = None,
        **extensions: object,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.headers = headers or {}
        # The status under `application/graphql-response+json`, where an answer without `data` is never a 2xx.
        self.status_without_data = status_without_data or status
        self.extensions = extensions

    def body(self) -> bytes:
        extensions = {"code": self.code, **self.extensions}
        return orjson.dumps({"errors": [{"message": self.message, "extensions": extensions}]})

    def event(self) -> bytes:
        """The error as one server-sent `error` event."""
        return b"event: error\ndata: " + orjson.dumps({"code": self.code, "message": self.message, **self.extensions})


async def send_error(send: Send, error: EdgeError, media: bytes = JSON_TYPE) -> None:
    """`media`: the answer's Content-Type, `edge.media.response_type` of the request, or EVENT_STREAM."""
    if media == EVENT_STREAM:
        body, status = error.event() + b"\n\n", error.status
    else:
        body = error.body()
        status = error.status if media == JSON_TYPE else error.status_without_data
    headers = [
        (b"content-type", media),
        (b"content-length", str(len(body)).encode()),
        (b"cache-control", b"no-store"),
        *((k.lower().encode(), v.encode()) for k, v in error.headers.items()),
    ]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
