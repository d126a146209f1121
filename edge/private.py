"""Responses to a signed-in reader are theirs alone: `Cache-Control: private, no-store`, whatever was set before."""

from __future__ import annotations

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from edge.identity import Identity

PRIVATE = (b"cache-control", b"private, no-store")


class PrivateResponses:
    """After IdentityMiddleware: any response to a request with a verified bearer token is marked private."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        identity = scope.get("state", {}).get("identity") if scope["type"] == "http" else None
        if not isinstance(identity, Identity) or identity.viewer_id is None:
            await self.app(scope, receive, send)
            return

        async def private_send(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = [(k, v) for k, v in message.get("headers", []) if k.lower() != b"cache-control"]
                message = {**message, "headers": [*headers, PRIVATE]}
            await send(message)

        await self.app(scope, receive, private_send)
