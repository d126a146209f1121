"""The app served in-process through its lifespan, with the lifespan's state (pool, cache) at hand."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

import httpx
from starlette.applications import Starlette
from starlette.types import Receive, Scope, Send

from app import create_app
from settings import Settings


@contextlib.asynccontextmanager
async def served(
    dsn: str, redis_url: str | None = None, *, application: Starlette | None = None, **overrides: Any
) -> AsyncIterator[tuple[httpx.AsyncClient, dict[str, Any]]]:
    """A client of `application` (by default `create_app` with these settings) and the lifespan's state."""
    application = application or create_app(Settings(DATABASE_URL=dsn, REDIS_URL=redis_url, **overrides))
    async with application.router.lifespan_context(application) as state:
        assert state is not None

        async def with_state(scope: Scope, receive: Receive, send: Send) -> None:
            await application({**scope, "state": dict(state)}, receive, send)

        transport = httpx.ASGITransport(app=with_state)
        async with httpx.AsyncClient(transport=transport, base_url="http://wovepaper.test", timeout=60) as client:
            yield client, dict(state)
