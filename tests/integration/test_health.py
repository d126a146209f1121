"""/healthz and /readyz through the real app, its lifespan, PostgreSQL and Redis."""

from __future__ import annotations

import asyncpg

import localservers
from app import create_app
from db.migrate import available_migrations, migrate
from settings import Settings
from tests.integration.graph_support import serving


def settings_for(database_url: str, redis_url: str) -> Settings:
    return Settings(DATABASE_URL=database_url, REDIS_URL=redis_url, redis_timeout_s=0.2)


async def test_ready_when_migrated_and_redis_answers(database_url: str, redis_url: str) -> None:
    async with serving(create_app(settings_for(database_url, redis_url))) as client:
        health = await client.get("/healthz")
        ready = await client.get("/readyz")
    assert health.status_code == 200
    assert health.json() == {"status": "ok"}
    assert ready.status_code == 200
    assert ready.json() == {"status": "ok", "checks": {"postgres": "ok", "redis": "ok"}}


async def test_redis_unreachable_is_degraded_and_the_api_still_answers(database_url: str) -> None:
    closed = f"redis://127.0.0.1:{localservers.free_port()}/0"
    async with serving(create_app(settings_for(database_url, closed))) as client:
        ready = await client.get("/readyz")
        health = await client.get("/healthz")
        graphql = await client.post("/graphql", json={"query": "{ __typename }"})
    assert graphql.status_code == 200
    assert graphql.json() == {"data": {"__typename": "Query"}}
    assert ready.status_code == 200
    body = ready.json()
    assert body["status"] == "degraded"
    assert body["checks"]["postgres"] == "ok"
    assert body["checks"]["redis"].startswith("degraded")
    assert health.status_code == 200


async def test_pending_migrations_are_not_ready_until_migrated(make_database, redis_url: str) -> None:
    dsn = await make_database("readyz_pending")
    app = create_app(settings_for(dsn, redis_url))
    async with serving(app) as client:
        before = await client.get("/readyz")
        conn = await asyncpg.connect(dsn)
        try:
            await migrate(conn)
        finally:
            await conn.close()
        after = await client.get("/readyz")
        health = await client.get("/healthz")
    assert before.status_code == 503
    assert before.json()["status"] == "down"
    assert before.json()["checks"]["postgres"] == f"pending migrations: {len(available_migrations())}"
    assert health.status_code == 200
    assert after.status_code == 200
    assert after.json()["status"] == "ok"


async def test_one_pending_migration_is_not_ready(make_database, redis_url: str) -> None:
    dsn = await make_database("readyz_one_pending")
    conn = await asyncpg.connect(dsn)
    try:
        await migrate(conn)
        last = available_migrations()[-1].version
        # As if the newest migration file had just been deployed and not yet applied.
        await conn.execute("DELETE FROM schema_migrations WHERE version = $1", last)
    finally:
        await conn.close()
    async with serving(create_app(settings_for(dsn, redis_url))) as client:
        ready = await client.get("/readyz")
    assert ready.status_code == 503
    assert ready.json()["checks"]["postgres"] == "pending migrations: 1"


async def test_postgres_refusing_connections_is_down_and_healthz_still_answers(
    make_database, pg_admin_dsn: str, redis_url: str
) -> None:
    dsn = await make_database("readyz_down")
    name = dsn.partition("?")[0].rsplit("/", 1)[1]
    conn = await asyncpg.connect(dsn)
    try:
        await migrate(conn)
    finally:
        await conn.close()
    settings = Settings(DATABASE_URL=dsn, REDIS_URL=redis_url, pool_min_size=1, redis_timeout_s=0.2)
    admin = await asyncpg.connect(pg_admin_dsn)
    try:
        async with serving(create_app(settings)) as client:
            assert (await client.get("/readyz")).status_code == 200
            # The database goes away under the running app: new connections refused, open ones cut.
            await admin.execute(f'ALTER DATABASE "{name}" ALLOW_CONNECTIONS false')
            await admin.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1", name)
            down = await client.get("/readyz")
            health = await client.get("/healthz")
            await admin.execute(f'ALTER DATABASE "{name}" ALLOW_CONNECTIONS true')
            back = await client.get("/readyz")
    finally:
        await admin.close()
    assert down.status_code == 503
    assert down.json()["status"] == "down"
    assert down.json()["checks"]["postgres"].startswith("down: ")
    assert health.status_code == 200
    assert back.status_code == 200
