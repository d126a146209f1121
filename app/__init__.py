"""The Starlette application: `uvicorn app:create_app --factory`."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import gc
import hashlib
import logging
import os
from collections.abc import AsyncIterator, Callable, Coroutine
from pathlib import Path
from typing import Any

import asyncpg
from redis.asyncio.cluster import RedisCluster
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp, Scope

import lifecycle
import semantic
from cdn.purge import BackgroundPurge, HttpPurge
from chat.service import ChatService
from db.cache.breaker import CircuitBreaker
from db.cache.client import REDIS_ERRORS, RedisClient, create_redis
from db.cache.store import CacheStore
from db.cache.strain import StrainReporter
from db.ingest_gauges import IngestProgressCollector
from db.migrate import Migration, pending_migrations
from db.pool import PoolExhausted, QueryLogger, ServingPool, create_pool, is_lost_connection
from db.queries.embeddings import has_embeddings
from db.replicas.routing import ReplicaSet
from edge.answers import Write
from edge.api_keys import ApiKeyAuthenticator
from edge.cacheable import cacheable_operations
from edge.front import Front
from edge.identity import BearerAuthenticator, KeyAuthenticator
from edge.jwt import JwtAuthenticator, build_bearer_authenticator
from edge.near import NearResponses
from edge.persisted import PersistedDocuments, build_manifest
from edge.protocol import HttpLimits
from edge.ratelimit import RateLimiter, RateLimitPolicy
from edge.request import RequestParser
from edge.response_cache import CdnPolicy, ResponseCache
from request_types.identity import parse_networks
from routes.chat_stream import chat_stream
from routes.feeds import feed_routes
from routes.graphql import GraphQLView
from routes.services import Services, services
from schema import Schema, build_schema
from settings import Settings, cors_origin_list, get_settings
from telemetry import logs, loop_lag
from telemetry import metrics as telemetry_metrics
from telemetry.tracing import instrument

OPERATIONS_DIR = Path(__file__).resolve().parents[1] / "frontend_contract" / "operations"
# The route that answers with server-sent events: the edge's refusals of it are `error` events too.
CHAT_PATH = "/chat"
RESPONSE_TTL_S = 600
READY_TIMEOUT_S = 2.0
# Allocations between two collections of the collector's youngest generation while the app serves (Python's: 700).
YOUNG_GENERATION_ALLOCATIONS = 10_000
# /readyz waits this long for a pooled connection; a pool that busy is checked on a connection of its own, so
# a saturated pool is not reported as a database that is down.
READY_POOL_WAIT_S = 0.5
# Response headers a browser page may read on a cross-origin call.
RATE_LIMIT_HEADERS = [
    "x-ratelimit-limit",
    "x-ratelimit-remaining",
    "x-ratelimit-used",
    "x-ratelimit-reset",
    "x-ratelimit-resource",
    "retry-after",
]
# What /readyz reports as "down" rather than a 500. InternalClientError: a pooled connection whose backend was
# just terminated (a server restart) until asyncpg notices.
POSTGRES_DOWN = (OSError, asyncpg.PostgresError, asyncpg.InterfaceError, asyncpg.InternalClientError, TimeoutError)


class Application(Starlette):
    """Starlette with the edge (edge/front.py) in front of its whole stack, its error middleware included: every
    response, a 500 too, leaves through the edge's one `send`, and an answer from memory passes no other layer.
    Middleware added to the application (tracing's) stays outermost, so it sees every request."""

    def __init__(self, *, front: Callable[[ASGIApp], ASGIApp], **kwargs: Any) -> None:
        self.front = front
        self.http_limits = HttpLimits()
        super().__init__(**kwargs)

    def answer_now(self, scope: Scope, body: bytes, write: Write) -> bool | Coroutine[Any, Any, None]:
        """A request the edge answers from memory without the ASGI exchange (`Front.answer_now`), offered by the
        server (edge/protocol.py); never when middleware wraps the edge (it would not see the request)."""
        stack = self.middleware_stack
        return isinstance(stack, Front) and stack.answer_now(scope, body, write)

    def build_middleware_stack(self) -> ASGIApp:
        added, self.user_middleware = self.user_middleware, []
        try:
            app = self.front(super().build_middleware_stack())
        finally:
            self.user_middleware = added
        for cls, args, kwargs in reversed(added):
            app = cls(app, *args, **kwargs)
        return app


def create_app(
    settings: Settings | None = None,
    *,
    schema: Schema | None = None,
    query_logger: QueryLogger | None = None,
    key_authenticator: KeyAuthenticator | None = None,
    bearer_authenticator: BearerAuthenticator | None = None,
) -> Starlette:
    """`schema` defaults to `build_schema(settings)`; `query_logger` sees every SQL statement (tests count them);
    the authenticators verify `X-Api-Key` (default: the `api_keys` table) and `Authorization: Bearer` (default:
    the JWT settings')."""
    settings = settings or get_settings()
    semantic.configure(backend=settings.embedding_backend, model_dir=settings.model_dir)
    if bearer_authenticator is None:
        bearer_authenticator = build_bearer_authenticator(
            secret=settings.jwt_secret.get_secret_value() if settings.jwt_secret else None,
            jwks_url=settings.jwks_url,
            jwks_file=settings.jwks_file,
            issuer=settings.jwt_issuer,
            audience=settings.jwt_audience,
            orcid_claim=settings.jwt_orcid_claim,
        )
    verifier = bearer_authenticator
    schema = schema or build_schema(settings)
    manifest = build_manifest(OPERATIONS_DIR)
    cacheable = cacheable_operations(manifest.values(), schema._schema)
    telemetry_metrics.set_operation_names(op.name for op in cacheable)
    # The GraphQL steps, in the order a request passes them after the edge's checks (edge/front.py): request parsing
    # -> persisted documents -> whole-response cache -> GraphQL. A repeated anonymous request is answered from the
    # cache's memory before them (`remembered` below).
    response_cache = ResponseCache(
        GraphQLView(schema, settings),
        operations=cacheable,
        schema=schema._schema,
        # A new schema never serves old entries.
        schema_version=hashlib.sha256(schema.as_str().encode()).hexdigest()[:12],
        ttl_s=min(settings.cache_ttl_s, RESPONSE_TTL_S),
        cdn=CdnPolicy(settings.cdn_max_age_s, settings.cdn_stale_while_revalidate_s),
    )
    graphql_endpoint = RequestParser(
        PersistedDocuments(
            response_cache,
            manifest={k.removeprefix("sha256:"): v for k, v in manifest.items()},
            mode=settings.trusted_documents,
        )
    )
    cors_origins = cors_origin_list(settings.cors_origins)

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[Services]:
        if not settings.database_url:
            raise RuntimeError("DATABASE_URL is not set")
        if not logging.getLogger().handlers:
            # A worker process started by uvicorn (`--workers N`, `uvicorn app:create_app --factory`): nobody set up
            # logging.
            logs.configure(settings.log_format)
        pool = await create_pool(
            settings.database_url,
            min_size=settings.pool_min_size,
            max_size=settings.pool_max_size,
            statement_timeout_ms=settings.statement_timeout_ms,
            acquire_timeout_s=settings.pool_acquire_timeout_s,
            query_logger=query_logger,
        )
        target = settings.redis
        redis = (
            create_redis(target, timeout_s=settings.redis_timeout_s, max_connections=settings.redis_max_connections)
            if target is not None
            else None
        )
        cache = CacheStore(
            redis,
            namespace=settings.cache_namespace,
            ttl_s=settings.cache_ttl_s,
            timeout_s=settings.redis_timeout_s,
            breaker=CircuitBreaker(
                failure_rate=settings.redis_breaker_failure_rate,
                min_calls=settings.redis_breaker_min_calls,
                window_calls=settings.redis_breaker_window_calls,
                window_s=settings.redis_breaker_window_s,
                reset_after_s=settings.redis_breaker_reset_s,
            ),
        )
        near = _near_responses(settings, redis)
        watcher = asyncio.create_task(near.watch()) if near is not None else None
        replicas = _replicas(settings, pool, cache, query_logger)
        health = asyncio.create_task(replicas.run()) if replicas is not None else None
        # The ingest waits while any process of the site is strained (db/cache/strain.py).
        strain = StrainReporter(cache, settings.cache_namespace, lambda: pool.waiting) if redis is not None else None
        lag = asyncio.create_task(loop_lag.watch(also=strain.sample if strain is not None else None))
        # Chat is the one place the API calls an upstream while answering: its own client and retry rules.
        chat = ChatService.open(
            pool,
            settings.llm,
            daily_messages=settings.chat_daily_messages,
            # Checked once: without pgvector every question would embed itself for nothing.
            semantic=settings.semantic_search and semantic.is_available() and await has_embeddings(pool),
        )
        restore_sigterm = lifecycle.install_drain(settings.shutdown_drain_s)
        preload = None
        if settings.semantic_search and settings.semantic_preload:
            # Loading the embedding model takes seconds: not on the first semantic request's time.
            preload = semantic.preload_in_background()
        rate_limiter = RateLimiter(cache if redis is not None else None)
        # What a correction changes leaves the CDN too (the ingest purges what it changes itself).
        purge = None
        if settings.purge_url:
            token = settings.purge_token.get_secret_value() if settings.purge_token is not None else None
            replayed = replicas.replayed_by_all if replicas is not None else None
            purge = BackgroundPurge(HttpPurge(settings.purge_url, token=token), replayed=replayed)
        # What is built by now (the schema, the modules) lives as long as the process: kept out of the collector's
        # full passes, which otherwise scan all of it and stall a request for tens of milliseconds. And the young
        # generation collected every 10,000 allocations rather than 700: a request's objects are freed by reference
        # counting (it leaves no cycle), so a collection that often only moves the requests in flight to the older
        # generations, whose passes then stall every request (bench/RESULTS.md, "Round 17": at 170 requests a second,
        # 32 full passes of 45 ms median in 103 s before, none after, and the p99 111 -> 96 ms).
        collector_thresholds = gc.get_threshold()
        gc.set_threshold(YOUNG_GENERATION_ALLOCATIONS, *collector_thresholds[1:])
        gc.freeze()
        try:
            yield {
                "settings": settings,
                "pool": pool,
                "redis": redis,
                "cache": cache,
                "near": near,
                "rate_limiter": rate_limiter,
                "chat": chat,
                "purge": purge,
                "replicas": replicas,
            }
        finally:
            gc.set_threshold(*collector_thresholds)
            restore_sigterm()
            lag.cancel()
            await asyncio.gather(lag, return_exceptions=True)
            if health is not None and replicas is not None:
                health.cancel()
                await asyncio.gather(health, return_exceptions=True)
                await replicas.aclose()
            if watcher is not None and near is not None:
                watcher.cancel()
                await asyncio.gather(watcher, return_exceptions=True)
                near.close()
            await chat.aclose()
            if purge is not None:
                await purge.aclose()
            await rate_limiter.aclose()
            await cache.aclose()
            try:
                # Connections still out (a request cut short by the grace period) are closed, not awaited.
                async with asyncio.timeout(READY_TIMEOUT_S):
                    await pool.close()
            except TimeoutError:
                pool.terminate()
            if isinstance(verifier, JwtAuthenticator):
                await verifier.aclose()
            # This worker's pool and breaker gauges leave the multi-worker sum (its counters stay counted).
            telemetry_metrics.fold_latencies()
            telemetry_metrics.mark_process_dead(os.getpid())
            if preload is not None:
                await asyncio.to_thread(preload.join)

    async def healthz(request: Request) -> JSONResponse:
        return JSONResponse({"status": "ok"})

    async def readyz(request: Request) -> JSONResponse:
        checks: dict[str, str] = {}
        if lifecycle.draining():
            return JSONResponse({"status": "draining", "checks": {"process": "shutting down"}}, status_code=503)
        ok = True
        try:
            # A probe must answer within its own timeout even when a server hangs instead of refusing.
            async with asyncio.timeout(READY_TIMEOUT_S):
                pending = await _pending_migrations(services(request.scope)["pool"])
            checks["postgres"] = "ok" if not pending else f"pending migrations: {len(pending)}"
            ok = not pending
        except POSTGRES_DOWN as exc:
            checks["postgres"] = f"down: {type(exc).__name__}"
            ok = False
        redis = services(request.scope)["redis"]
        if redis is None:
            checks["redis"] = "degraded: not configured"
        else:
            try:
                async with asyncio.timeout(READY_TIMEOUT_S):
                    await redis.ping()
                checks["redis"] = "ok"
            except (*REDIS_ERRORS, TimeoutError) as exc:
                checks["redis"] = f"degraded: {type(exc).__name__}"
        replicas = services(request.scope)["replicas"]
        if replicas is not None:
            # Reads go to the primary while no replica is usable: degraded, not down.
            usable = replicas.usable_count() > 0
            checks["replicas"] = ("ok: " if usable else "degraded: ") + replicas.describe()
        healthy = checks["redis"] == "ok" and not checks.get("replicas", "ok").startswith("degraded")
        status = "ok" if ok and healthy else ("degraded" if ok else "down")
        return JSONResponse({"status": status, "checks": checks}, status_code=200 if ok else 503)

    async def _pending_migrations(pool: ServingPool) -> list[Migration]:
        try:
            async with pool.acquire(timeout=READY_POOL_WAIT_S) as conn:
                return await pending_migrations(conn)
        except PoolExhausted:
            pass  # every connection is busy: that says nothing about the server, so ask it directly
        except POSTGRES_DOWN as exc:
            if not is_lost_connection(exc):
                raise
            # A pooled connection whose server restarted: the pool replaces it; ask on a fresh one now.
        assert settings.database_url is not None
        conn = await asyncpg.connect(settings.database_url, timeout=READY_TIMEOUT_S)
        try:
            return await pending_migrations(conn)
        finally:
            await conn.close()

    async def metrics(request: Request) -> Response:
        served = services(request.scope)
        served["cache"].report()
        telemetry_metrics.fold_latencies()
        served["pool"].report()
        await ingest_progress.refresh(served["pool"])
        text = await asyncio.to_thread(telemetry_metrics.generate_latest, [ingest_progress])
        return Response(text, media_type=telemetry_metrics.CONTENT_TYPE)

    ingest_progress = IngestProgressCollector()
    app = Application(
        routes=[
            # Matched in order: the busiest route first.
            Route("/graphql", graphql_endpoint, methods=["GET", "POST"]),
            Route("/healthz", healthz),
            Route("/readyz", readyz),
            Route("/metrics", metrics),
            *feed_routes(),
            Route(CHAT_PATH, chat_stream, methods=["POST"]),
        ],
        # The edge in front of Starlette's whole stack, its error middleware included.
        front=functools.partial(
            Front,
            graphql=graphql_endpoint,
            memory=response_cache,
            policy=RateLimitPolicy(
                enabled=settings.rate_limits == "on",
                anonymous_points_per_hour=settings.anon_points_per_hour,
                key_points_per_hour=settings.key_points_per_hour,
                failed_auth_per_hour=settings.failed_auth_per_hour,
            ),
            # The site's browser-side calls (co-author network, search as you type); preflights end here.
            cors={
                "allow_origins": cors_origins,
                "allow_credentials": "*" not in cors_origins,
                "allow_methods": ["GET", "POST"],
                "allow_headers": ["content-type", "authorization", "x-api-key", "idempotency-key"],
                "expose_headers": RATE_LIMIT_HEADERS,
                "max_age": 600,
            },
            max_body_bytes=settings.max_body_bytes,
            max_header_bytes=settings.max_header_bytes,
            body_timeout_s=settings.body_timeout_s,
            trusted_proxies=parse_networks(settings.trusted_proxies.split(",")),
            key_authenticator=key_authenticator or ApiKeyAuthenticator(),
            bearer_authenticator=bearer_authenticator,
            event_streams=[CHAT_PATH],
        ),
        lifespan=lifespan,
    )
    # Read by the server's protocol (edge/protocol.py) for each connection.
    app.http_limits = HttpLimits(settings.max_header_bytes, settings.header_timeout_s, settings.body_timeout_s)
    if settings.otel_enabled:
        instrument(app, service_name=settings.otel_service_name)
    return app


def _replicas(
    settings: Settings, primary: ServingPool, cache: CacheStore, query_logger: QueryLogger | None
) -> ReplicaSet | None:
    """The replicas queries read from (WOVEPAPER_DATABASE_REPLICA_URLS), each with a pool like the primary's."""
    dsns = settings.replica_dsns
    if not dsns:
        return None
    assert settings.database_url is not None

    async def open_pool(dsn: str, on_lost: Callable[[], None]) -> ServingPool:
        return await create_pool(
            dsn,
            min_size=settings.pool_min_size,
            max_size=settings.pool_max_size,
            statement_timeout_ms=settings.statement_timeout_ms,
            acquire_timeout_s=settings.pool_acquire_timeout_s,
            query_logger=query_logger,
            on_lost=on_lost,
            reports=False,
        )

    return ReplicaSet(
        primary,
        dsns,
        open_pool=open_pool,
        max_lag_s=settings.replica_max_lag_s,
        read_your_writes_s=settings.read_your_writes_s,
        cache=cache,
        primary_dsn=settings.database_url,
    )


def _near_responses(settings: Settings, redis: RedisClient | None) -> NearResponses | None:
    """The in-process tier of the response cache: only in front of Redis, whose invalidations keep it true."""
    target = settings.redis
    if target is None or not settings.near_cache_mb:
        return None
    return NearResponses(
        target,
        settings.cache_namespace,
        max_bytes=settings.near_cache_mb * 2**20,
        max_age_s=settings.near_cache_max_age_s,
        timeout_s=settings.redis_timeout_s,
        cluster=redis if isinstance(redis, RedisCluster) else None,
    )
