"""The per-request context every resolver receives as `info.context`."""

from __future__ import annotations

import asyncio
import uuid
from dataclasses import dataclass, field
from typing import Any

import asyncpg
import strawberry
from starlette.requests import Request
from starlette.responses import Response

from chat.service import ChatService
from db.cache.client import RedisClient
from db.cache.invalidation import Purge
from db.pool import current_connection_budget
from db.queries.replication import committed_position
from db.replicas.routing import ReplicaSet, Target
from request_types.identity import ANONYMOUS_LOCAL, Identity
from request_types.rate import PointsCharge
from request_types.state import RequestState, found_state
from resolvers.loaders import Loaders
from settings import Settings


@dataclass(slots=True)
class Context:
    # Where the operation reads: the primary, or the replica `route()` chose for it.
    pool: asyncpg.Pool
    settings: Settings
    loaders: Loaders
    redis: RedisClient | None = None
    request: Request | None = None
    response: Response | None = None
    # The aggregate cache store, set by whoever wires the cache into the app; None when absent.
    cache: Any = None
    request_id: str = field(default_factory=lambda: uuid.uuid4().hex[:16])
    # Who asks (request_types/identity.py); in-process callers without an HTTP request are a local anonymous reader.
    identity: Identity = ANONYMOUS_LOCAL
    # Chat with the papers (None when the server has no language model).
    chat: ChatService | None = None
    # The operation's deadline, set by the view; a resolver that waits on the model moves it later.
    operation_deadline: asyncio.Timeout | None = None
    # The request's charge on its client's rate-limit points, made once the query's cost is known.
    rate_charge: PointsCharge | None = None
    # The request's state, made by the edge (request_types/state.py): None for in-process callers.
    state: RequestState | None = None
    # Tells the CDN which tags a write made stale (cdn/purge.py), when WOVEPAPER_PURGE_URL is set.
    purge: Purge | None = None
    # The measured cost of the running operation (schema/extensions.py sets it before execution).
    cost: Any = None
    # Whether the executor passes JSON written by PostgreSQL through to the answer (schema/fast_executor/ sets it):
    # resolvers may then fetch a selection's answer as JSON text instead of rows.
    passes_json: bool = False
    # Where writes go (the primary), and the replicas reads may go to (None: no replica configured).
    primary: asyncpg.Pool | None = None
    replicas: ReplicaSet | None = None
    # The primary's WAL position after this operation's write, when a resolver read it (read-your-writes).
    written_at: int | None = None
    # Set when a run that read from a replica failed and the operation runs again (`renew`).
    again_on_primary: bool = False

    def renew(self) -> None:
        """Fresh loaders, to run the operation again: the first run's cached failures must not answer it. A run
        that read from a replica runs again on the primary."""
        self.loaders.close()
        self.loaders = Loaders(self.pool)
        if self.primary is not None and self.pool is not self.primary:
            self.again_on_primary = True

    def close(self) -> None:
        """The request is answered: what it read is freed now rather than by the collector (`Loaders.close`)."""
        self.loaders.close()

    @property
    def write_pool(self) -> asyncpg.Pool:
        return self.primary if self.primary is not None else self.pool

    async def route(self, *, write: bool) -> None:
        """Choose the one server the operation reads from, before it runs (again, when it runs again)."""
        if self.replicas is None:
            return
        if self.again_on_primary and not write:
            self.use(self.replicas.primary_read())
        else:
            self.use(await self.replicas.target(write=write, writer=self.identity.writer))

    def use(self, target: Target) -> None:
        if target.pool is not self.pool:
            self.pool = target.pool
            self.loaders = Loaders(target.pool)
        budget = current_connection_budget()
        if budget is not None:
            budget.replayed = target.replayed
        state = self.state
        if state is not None:
            # For the response cache, which stores the answer after the operation (edge/response_cache.py), and the
            # request's log line.
            state.replayed = target.replayed
            state.db_target = target.label

    async def committed_position(self) -> int | None:
        """The primary's WAL position after this operation's write committed, with replicas configured (None without:
        nothing waits for it); also the writer's own (read-your-writes)."""
        if self.replicas is None:
            return None
        self.written_at = await committed_position(self.write_pool)
        return self.written_at

    async def record_write(self) -> None:
        """After a write committed: the writer's reads wait for a replica that has it."""
        writer = self.identity.writer
        if self.replicas is not None and writer is not None:
            await self.replicas.wrote(writer, self.write_pool, self.written_at)

    @classmethod
    def create(
        cls,
        pool: asyncpg.Pool,
        settings: Settings,
        *,
        redis: RedisClient | None = None,
        request: Request | None = None,
        response: Response | None = None,
        cache: Any = None,
        identity: Identity | None = None,
        chat: ChatService | None = None,
        purge: Purge | None = None,
        replicas: ReplicaSet | None = None,
    ) -> Context:
        """Who asks, their rate-limit charge and the request's id come from the request's state when the edge made
        one (`identity` otherwise)."""
        state = found_state(request.scope) if request is not None else None
        if state is not None and state.request_id:
            # The id the request's log line and X-Request-Id carry (telemetry/requests.py), also in masked errors:
            # given, so that no id of its own is drawn (a uuid4 a request).
            ctx = cls(pool, settings, Loaders(pool), redis, request, response, cache, state.request_id)
        else:
            ctx = cls(pool, settings, Loaders(pool), redis, request, response, cache)
        ctx.chat = chat
        ctx.purge = purge
        ctx.primary = pool
        ctx.replicas = replicas
        if state is not None:
            ctx.state = state
            ctx.rate_charge = state.rate_charge
            identity = state.identity or identity
        if identity is not None:
            ctx.identity = identity
        return ctx


# What every resolver receives: the context above, no root value.
Info = strawberry.Info[Context, None]
