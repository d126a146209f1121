"""Serving connections read `timestamptz` as text (db/pool.py): the same datetimes asyncpg's binary format gives,
whatever zone the server or database is set to, and parameters reach PostgreSQL as the same instants."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta, timezone

import asyncpg
import pytest

from db.pool import binary_times, create_pool

STORED = [
    "2026-11-26 23:48:13.611218+00",
    "2026-11-26 23:48:13.6112+00",
    "2026-01-01 00:00:00+00",
    "1999-12-31 23:59:59.999999-08",
    "2024-02-29 12:00:00.000001+05:30",
    "0001-01-01 00:00:00+00",
    "9999-12-31 23:59:59.999999+00",
    "infinity",
    "-infinity",
]


@pytest.fixture(scope="module")
async def zoned_db(make_database) -> str:
    dsn = await make_database("times")
    conn = await asyncpg.connect(dsn)
    try:
        # A database whose sessions default to another zone and another date style: the pool must not care.
        name = await conn.fetchval("SELECT current_database()")
        await conn.execute(f"ALTER DATABASE \"{name}\" SET timezone TO 'Asia/Kolkata'")
        await conn.execute(f"ALTER DATABASE \"{name}\" SET datestyle TO 'SQL, DMY'")
        await conn.execute("CREATE TABLE t (i int PRIMARY KEY, at timestamptz)")
        await conn.executemany("INSERT INTO t VALUES ($1, $2::text::timestamptz)", list(enumerate(STORED)))
    finally:
        await conn.close()
    return dsn


async def test_times_read_as_asyncpg_reads_them_in_binary(zoned_db: str) -> None:
    plain = await asyncpg.connect(zoned_db)
    pool = await create_pool(zoned_db, min_size=1, max_size=1)
    try:
        expected = [r["at"] for r in await plain.fetch("SELECT at FROM t ORDER BY i")]
        async with pool.acquire() as conn:
            got = [r["at"] for r in await conn.fetch("SELECT at FROM t ORDER BY i")]
            assert got == expected
            assert [v.tzinfo for v in got] == [v.tzinfo for v in expected]
            assert all(v.tzinfo is UTC for v in got[:-2])
            assert got[-2:] == [datetime.max, datetime.min]
            # Other types that hold times keep their own decoding.
            assert await conn.fetchval("SELECT '2024-05-06 07:08:09'::timestamp") == datetime(2024, 5, 6, 7, 8, 9)
            assert await conn.fetchval("SELECT '2024-05-06'::date") == date(2024, 5, 6)
    finally:
        await pool.close()
        await plain.close()


@pytest.mark.parametrize(
    "value",
    [
        datetime(2026, 11, 26, 23, 48, 13, 611218, tzinfo=UTC),
        datetime(2026, 11, 26, 23, 48, 13, tzinfo=timezone(timedelta(hours=-8))),
        datetime(2024, 2, 29, 12, 0, 0, 1, tzinfo=timezone(timedelta(hours=5, minutes=30))),
        datetime(2026, 5, 6, 7, 8, 9),
        datetime.max,
        datetime.min,
    ],
    ids=["utc", "pacific", "kolkata", "naive", "infinity", "-infinity"],
)
async def test_parameters_reach_postgresql_as_the_same_instant(zoned_db: str, value: datetime) -> None:
    plain = await asyncpg.connect(zoned_db, server_settings={"timezone": "UTC", "datestyle": "ISO"})
    pool = await create_pool(zoned_db, min_size=1, max_size=1)
    try:
        # A naive value means UTC, the serving sessions' zone (asyncpg's binary format would read the machine's).
        aware = (
            value.replace(tzinfo=UTC) if value.tzinfo is None and value not in (datetime.max, datetime.min) else value
        )
        expected = await plain.fetchval("SELECT ($1::timestamptz)::text", aware)
        async with pool.acquire() as conn:
            assert await conn.fetchval("SELECT ($1::timestamptz)::text", value) == expected
            # And comes back as the value sent (an aware value as the same instant).
            assert await conn.fetchval("SELECT $1::timestamptz", value) == aware
    finally:
        await pool.close()
        await plain.close()


async def test_a_serving_connection_copies_times_within_binary_times(zoned_db: str) -> None:
    pool = await create_pool(zoned_db, min_size=1, max_size=1)
    when = datetime(2026, 12, 5, 6, 7, 8, 9, tzinfo=UTC)
    try:
        async with pool.acquire() as conn:
            await conn.execute("CREATE TEMP TABLE copied (at timestamptz)")
            with pytest.raises(asyncpg.InternalClientError, match="binary format encoder"):
                await conn.copy_records_to_table("copied", records=[(when,)])
            async with binary_times(conn):
                await conn.copy_records_to_table("copied", records=[(when,)])
            # And the same values afterwards.
            assert await conn.fetchval("SELECT at FROM copied") == when
            assert await conn.fetchval("SELECT '2026-12-05 06:07:08.000009+00'::timestamptz") == when
            assert await conn.fetchval("SELECT 'infinity'::timestamptz") == datetime.max
    finally:
        await pool.close()
