"""The asyncpg pool: one per process, opened by the app's lifespan or a CLI command.

Serving adds three rules to asyncpg's pool (`ServingPool`):
- a request holds at most `max_per_request` connections at once (its further acquires wait for its own), so one
  expensive request cannot take the whole pool from the others;
- waiting for a free connection takes at most `acquire_timeout_s`, then `PoolExhausted` (answered OVERLOADED);
- a connection that failed with a lost-connection error is closed, never handed to the next caller.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
from collections.abc import AsyncIterator, Callable, Generator
from dataclasses import dataclass, field
from datetime import date, datetime
from types import TracebackType
from typing import Any, Final

import asyncpg
import orjson

from request_types.stats import RequestStats
from telemetry.metrics import POOL_CONNECTIONS, POOL_WAITERS

QueryLogger = Callable[[Any], None]

# Errors that mean the connection (or the server behind it) is gone, not that the statement was wrong: a
# restart or failover (57P01 admin shutdown, 57P02 crash, 57P03 starting up), pg_terminate_backend, a
# refused or reset socket. InternalClientError: asyncpg hands out an idle connection whose backend's FATAL
# message has arrived but whose close has not been read yet; the next statement then fails with "cannot
# switch to state 12; another operation (2) is in progress" (the protocol is still consuming that error).
LOST_CONNECTION: Final = (
    asyncpg.ConnectionDoesNotExistError,
    asyncpg.PostgresConnectionError,
    asyncpg.AdminShutdownError,
    asyncpg.CrashShutdownError,
    asyncpg.CannotConnectNowError,
    asyncpg.InternalClientError,
    ConnectionError,
    OSError,
)
_CLOSED_MESSAGES: Final = ("connection is closed", "released back to the pool", "pool is closing")
# How stale the pool gauges may get between scrapes.
REPORT_EVERY_S: Final = 0.25


def is_recovery_conflict(exc: BaseException) -> bool:
    """Whether a replica cancelled the statement because replaying the primary's WAL needed what it held (its
    answer on another server, or a moment later, will do)."""
    return isinstance(exc, asyncpg.SerializationError) and "conflict with recovery" in str(exc)


class PoolExhausted(Exception):
    """No connection became free within the acquire timeout: the process is overloaded."""


def is_lost_connection(exc: BaseException) -> bool:
    """Whether `exc` says the database connection was lost (retrying on a new one may succeed)."""
    if isinstance(exc, LOST_CONNECTION):
        return True
    return isinstance(exc, asyncpg.InterfaceError) and any(m in str(exc) for m in _CLOSED_MESSAGES)


@dataclass(slots=True)
class ConnectionBudget:
    """What one request may hold: `slots` connections at once; nested acquires of a task that already holds one
    do not wait for a slot (they would wait for themselves). Carries the request's figures (`stats`) to where
    they are counted."""

    slots: asyncio.Semaphore
    stats: RequestStats = field(default_factory=RequestStats)
    holders: dict[asyncio.Task[Any], int] = field(default_factory=dict)
    # How far the replica the request reads from had replayed the primary's WAL when it was chosen (None: the
    # primary): what it reads may fill a cache only when no invalidation of it came later (db/cache/positions.py).
    replayed: int | None = None


_budget: contextvars.ContextVar[ConnectionBudget | None] = contextvars.ContextVar(
    "wovepaper_connection_budget", default=None
)


class connection_budget:  # noqa: N801 (used as a function: `with connection_budget(n) as budget`)
    """Everything awaited inside (and every task started inside) shares one budget of connections, and counts its
    statements and cache answers into the budget's `stats`. A class rather than a generator-based context manager:
    it runs once per request."""

    __slots__ = ("budget", "token")

    def __init__(self, max_connections: int) -> None:
        self.budget = ConnectionBudget(asyncio.Semaphore(max_connections), RequestStats())

    def __enter__(self) -> ConnectionBudget:
        self.token = _budget.set(self.budget)
        return self.budget

    def __exit__(self, *exc: object) -> None:
        _budget.reset(self.token)


def current_connection_budget() -> ConnectionBudget | None:
    return _budget.get()


class ServingPool(asyncpg.Pool):
    __slots__ = ("acquire_timeout_s", "on_lost", "reports", "_waiting", "_out", "_reported_at", "_report_due")

    def __init__(
        self,
        *args: Any,
        acquire_timeout_s: float,
        on_lost: Callable[[], None] | None = None,
        reports: bool = True,
        **kwargs: Any,
    ) -> None:
        super().__init__(*args, **kwargs)
        self.acquire_timeout_s = acquire_timeout_s
        # Told at once when a connection is lost or cannot be made (a replica's pool: it leaves the rotation).
        self.on_lost = on_lost
        # Whether this pool sets the pool gauges (the primary's does; replicas' have their own metrics).
        self.reports = reports
        self._waiting = 0
        self._out: set[int] = set()
        self._reported_at = -REPORT_EVERY_S
        self._report_due: asyncio.TimerHandle | None = None

    def acquire(self, *, timeout: float | None = None) -> _Acquire:  # type: ignore[override]
        return _Acquire(self, timeout if timeout is not None else self.acquire_timeout_s)

    @property
    def waiting(self) -> int:
        return self._waiting

    @property
    def in_use(self) -> int:
        return len(self._out)

    def report(self) -> None:
        """Set the pool's gauges now (a scrape does, and `_changed` at most every REPORT_EVERY_S)."""
        if not self.reports:
            return
        POOL_CONNECTIONS.labels("open").set(self.get_size())
        POOL_CONNECTIONS.labels("in_use").set(len(self._out))
        POOL_CONNECTIONS.labels("max").set(self.get_max_size())
        POOL_WAITERS.set(self._waiting)
        self._reported_at = asyncio.get_running_loop().time()

    def _changed(self) -> None:
        """Report the change, or once a little later: every acquire and release change the figures, and setting
        four gauges (a file write each with several workers) on each of a page's statements cost more than the
        statement's own bookkeeping."""
        if self._report_due is not None:
            return
        loop = asyncio.get_running_loop()
        wait = self._reported_at + REPORT_EVERY_S - loop.time()
        if wait <= 0:
            self.report()
        else:
            self._report_due = loop.call_later(wait, self._report_later)

    def _report_later(self) -> None:
        self._report_due = None
        self.report()

    async def _take(self, wait_s: float) -> Any:
        self._waiting += 1
        self._changed()
        try:
            conn = await asyncpg.Pool.acquire(self, timeout=wait_s)
        except TimeoutError:
            raise PoolExhausted(f"no database connection became free within {wait_s:g}s") from None
        except Exception as exc:
            if self.on_lost is not None and is_lost_connection(exc):
                self.on_lost()
            raise
        finally:
            self._waiting -= 1
        self._out.add(id(conn))
        self._changed()
        return conn

    async def release(self, connection: Any, *, timeout: float | None = None) -> None:  # noqa: ASYNC109 (asyncpg's signature)
        try:
            await super().release(connection, timeout=timeout)
        finally:
            self._out.discard(id(connection))
            self._changed()

    async def _give_back(self, conn: Any, failure: BaseException | None) -> None:
        if failure is not None and is_lost_connection(failure):
            if self.on_lost is not None:
                self.on_lost()
            # A connection closed under us was already handed back by asyncpg (its proxy then refuses calls).
            with contextlib.suppress(asyncpg.InterfaceError):
                if not conn.is_closed():
                    # It may still be reading the error of its dead backend: never lend it out again.
                    conn.terminate()
            # One lost connection usually means a restart or failover: the idle ones got the same FATAL and would
            # each fail once more. They are replaced on their next acquire instead.
            await self.expire_connections()
        await self.release(conn)


class _Acquire:
    __slots__ = ("_pool", "_timeout", "_conn", "_slot", "_task")

    def __init__(self, pool: ServingPool, timeout: float) -> None:
        self._pool = pool
        self._timeout = timeout
        self._conn: Any = None
        self._slot: asyncio.Semaphore | None = None
        self._task: asyncio.Task[Any] | None = None

    async def __aenter__(self) -> Any:
        budget = _budget.get()
        task = asyncio.current_task()
        if budget is not None and task is not None and not budget.holders.get(task):
            # Bounded by the operation's own timeout: these are the request's own connections it waits for.
            await budget.slots.acquire()
            self._slot = budget.slots
        try:
            self._conn = await self._pool._take(self._timeout)
        except BaseException:
            self._release_slot()
            raise
        if budget is not None and task is not None:
            budget.holders[task] = budget.holders.get(task, 0) + 1
            self._task = task
        return self._conn

    def __await__(self) -> Generator[Any, None, Any]:
        # `conn = await pool.acquire()` (then `await pool.release(conn)`): outside any request budget.
        return self._pool._take(self._timeout).__await__()

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        try:
            await self._pool._give_back(self._conn, exc)
        finally:
            budget = _budget.get()
            if budget is not None and self._task is not None:
                left = budget.holders.get(self._task, 1) - 1
                if left:
                    budget.holders[self._task] = left
                else:
                    budget.holders.pop(self._task, None)
            self._release_slot()

    def _release_slot(self) -> None:
        if self._slot is not None:
            self._slot.release()
            self._slot = None


def _count_statement(record: Any) -> None:
    # Runs in the context of the task that ran the statement (asyncpg schedules it with call_soon).
    budget = _budget.get()
    if budget is not None:
        stats = budget.stats
        stats.statements += 1
        stats.sql_seconds += getattr(record, "elapsed", 0.0) or 0.0


# asyncpg's own `timestamptz` values for PostgreSQL's infinities (naive, as it decodes them).
_INFINITE: Final = {"infinity": datetime.max, "-infinity": datetime.min}


def timestamptz_from_text(text: str, parse: Callable[[str], datetime] = datetime.fromisoformat) -> datetime:
    """A `timestamptz` as PostgreSQL writes it for a UTC session with ISO dates ("2024-05-06 07:08:09.1+00"): the
    same datetime asyncpg decodes from the binary format (`timezone.utc`, microseconds exact), for a third of the
    instructions (asyncpg builds each one from a timedelta)."""
    try:
        return parse(text)
    except ValueError:
        infinite = _INFINITE.get(text)
        if infinite is None:
            raise
        return infinite


def timestamptz_to_text(value: datetime | date) -> str:
    """A parameter as text PostgreSQL reads back to the same instant (a naive value is UTC, the session's zone)."""
    if value == datetime.max:
        return "infinity"
    if value == datetime.min:
        return "-infinity"
    return value.isoformat()


# Serving connections read times in UTC, as text (see timestamptz_from_text); PostgreSQL then writes every
# `timestamptz` the one way the decoder reads. asyncpg's COPY takes binary codecs only: bulk writes go through the
# ingest's own connections (ingest/runner.connect), or a serving connection within `binary_times`.
TEXT_TIMES: Final = {"timezone": "UTC", "datestyle": "ISO, YMD"}


async def _read_times_as_text(conn: asyncpg.Connection) -> None:
    await conn.set_type_codec(
        "timestamptz", encoder=timestamptz_to_text, decoder=timestamptz_from_text, schema="pg_catalog", format="text"
    )


@contextlib.asynccontextmanager
async def binary_times(conn: asyncpg.Connection) -> AsyncIterator[asyncpg.Connection]:
    """A serving connection with asyncpg's own `timestamptz` codec for a while: COPY needs binary codecs."""
    await conn.reset_type_codec("timestamptz", schema="pg_catalog")
    try:
        yield conn
    finally:
        if not conn.is_closed():  # a broken connection is not lent again: nothing to restore
            await _read_times_as_text(conn)


async def _init_connection(conn: asyncpg.Connection, query_logger: QueryLogger | None) -> None:
    for name in ("json", "jsonb"):
        await conn.set_type_codec(
            name, encoder=lambda v: orjson.dumps(v).decode(), decoder=orjson.loads, schema="pg_catalog"
        )
    await _read_times_as_text(conn)
    conn.add_query_logger(_count_statement)
    if query_logger is not None:
        conn.add_query_logger(query_logger)


async def _keep_session(conn: asyncpg.Connection) -> None:
    return None


async def create_pool(
    dsn: str,
    *,
    min_size: int = 2,
    max_size: int = 10,
    statement_timeout_ms: int = 5000,
    acquire_timeout_s: float = 5.0,
    connect_timeout_s: float = 5.0,
    query_logger: QueryLogger | None = None,
    on_lost: Callable[[], None] | None = None,
    reports: bool = True,
) -> ServingPool:
    """Open a pool whose every connection carries the statement timeout.

    ``reset=_keep_session``: connections are used for reads and short transactions that always end,
    so asyncpg's per-release reset round trip (RESET ALL, UNLISTEN ...) buys nothing. asyncpg still
    rolls back a transaction left open. (``reset=None`` would mean asyncpg's default reset.)
    """

    async def init(conn: asyncpg.Connection) -> None:
        await _init_connection(conn, query_logger)

    pool = ServingPool(
        dsn,
        acquire_timeout_s=acquire_timeout_s,
        on_lost=on_lost,
        reports=reports,
        connection_class=asyncpg.Connection,
        record_class=asyncpg.Record,
        min_size=min_size,
        max_size=max_size,
        max_queries=50_000,
        loop=None,
        init=init,
        reset=_keep_session,
        max_inactive_connection_lifetime=300,
        command_timeout=statement_timeout_ms / 1000 + 1,
        # A server that accepts the socket but never answers (frozen, a half-open network) must not hold an
        # acquire for asyncpg's default 60 s.
        timeout=connect_timeout_s,
        server_settings={
            "statement_timeout": str(statement_timeout_ms),
            "idle_in_transaction_session_timeout": str(max(statement_timeout_ms * 2, 10_000)),
            "application_name": "wovepaper",
            **TEXT_TIMES,
        },
    )
    await pool
    pool.report()
    return pool
