"""The Starlette application: `uvicorn app:app`."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import TypedDict

import asyncpg
import redis.asyncio as aioredis
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from db.migrate import pending_migrations
from db.pool import create_pool
from settings import Settings, get_settings


class State(TypedDict):
    settings: Settings
    pool: asyncpg.Pool
    redis: aioredis.Redis | None


def create_app(settings: Settings | None = None) -> Starlette:
    settings = settings or get_settings()

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[State]:
        if not settings.database_url:
            raise RuntimeError("DATABASE_URL is not set")
        pool = await create_pool(
            settings.database_url,
            min_size=settings.pool_min_size,
            max_size=settings.pool_max_size,
            statement_timeout_ms=settings.statement_timeout_ms,
        )
        redis = (
            aioredis.Redis.from_url(
                settings.redis_url,
                socket_timeout=settings.redis_timeout_s,
                socket_connect_timeout=settings.redis_timeout_s,
                retry_on_timeout=False,
            )
            if settings.redis_url
            else None
        )
        try:
            yield {"settings": settings, "pool": pool, "redis": redis}
        finally:
            if redis is not None:
                await redis.aclose()
            await pool.close()

    async def healthz(request: Request) -> JSONResponse:
        return JSONResponse({"status": "ok"})

    async def readyz(request: Request) -> JSONResponse:
        checks: dict[str, str] = {}
        ok = True
        try:
            async with request.state.pool.acquire() as conn:
                pending = await pending_migrations(conn)
            checks["postgres"] = "ok" if not pending else f"pending migrations: {len(pending)}"
            ok = not pending
        except (OSError, asyncpg.PostgresError, TimeoutError) as exc:
            checks["postgres"] = f"down: {type(exc).__name__}"
            ok = False
        redis = request.state.redis
        if redis is None:
            checks["redis"] = "degraded: not configured"
        else:
            try:
                await redis.ping()
                checks["redis"] = "ok"
            except (OSError, aioredis.RedisError) as exc:
                checks["redis"] = f"degraded: {type(exc).__name__}"
        status = "ok" if ok and checks["redis"] == "ok" else ("degraded" if ok else "down")
        return JSONResponse({"status": status, "checks": checks}, status_code=200 if ok else 503)

    return Starlette(
        routes=[Route("/healthz", healthz), Route("/readyz", readyz)],
        lifespan=lifespan,
    )


def __getattr__(name: str) -> Starlette:
    # `uvicorn app:app` builds the app on first access, after the environment is read.
    if name == "app":
        return create_app()
    raise AttributeError(name)
