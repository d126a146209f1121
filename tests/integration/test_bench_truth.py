"""The traffic benchmark's check of what the response cache holds at the end of a run (bench/truth.py)."""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime, timedelta

import asyncpg
import redis.asyncio as redis

from bench.site_mix import Seen
from bench.truth import check, stale_entries
from db.migrate import migrate
from tests.integration.agg_data import insert_paper


async def test_an_entry_older_than_a_committed_write_is_stale(make_database, redis_url: str) -> None:
    dsn = await make_database("benchtruth")
    conn = await asyncpg.connect(dsn)
    client = redis.Redis.from_url(redis_url)
    try:
        await migrate(conn)
        await insert_paper(conn, "2401.00001", authors=["Ada"], primary="cs.LG", cited=1, year=2024)
        await insert_paper(conn, "2401.00002", authors=["Bob"], primary="cs.LG", cited=1, year=2024)
        now = await conn.fetchval("SELECT modified_at FROM papers WHERE arxiv_id = '2401.00001'")
        before = (now - timedelta(minutes=5)).isoformat()

        async def hold(digest: str, arxiv_id: str, modified_at: str) -> None:
            body = json.dumps({"data": {"paper": {"arxivId": arxiv_id, "modifiedAt": modified_at, "title": "T"}}})
            await client.set(f"ns:{{r:{digest[:2]}}}:response:s1:{digest}", b'{"cost":1}\n' + body.encode(), ex=600)

        await hold("aa01", "2401.00001", before)  # a write committed after it: stale once its grace is over
        latest = await conn.fetchval("SELECT modified_at FROM papers WHERE arxiv_id = '2401.00002'")
        await hold("bb02", "2401.00002", latest.isoformat())  # the latest state
        await client.set("ns:{r:cc}:response:s1:cc03", b'{"cost":1}\n{"data": {"papers": {"nodes": []}}}', ex=600)
        # A stale entry whose tag set Redis evicted: never served, so not held.
        body = json.dumps({"data": {"paper": {"arxivId": "2401.00001", "modifiedAt": before, "title": "T"}}})
        await client.set("ns:{r:dd}:response:s1:dd04", b'{"cost":1,"tags":["paper:2401.00001"]}\n' + body.encode())
        held, unlisted, stale, examples = await stale_entries(conn, redis_url, "ns", 600, grace_s=0, allowance_s=0)
        assert (held, unlisted, stale) == (2, 1, 1)
        assert examples[0].startswith(f"paper 2401.00001: the cache holds the state of {before}")
        # Within the grace the write's drop may still be on its way: not counted.
        assert (await stale_entries(conn, redis_url, "ns", 600, grace_s=60, allowance_s=0))[2] == 0
        assert datetime.now(UTC) - now < timedelta(seconds=60)
        # An answer older than a write committed long before it was asked for is wrong, and says how it was answered.
        asked = Seen("PaperPage", "paper", "2401.00001", before, time.time() + 100, False, "hit, request 7f00")
        verdict = (await check(conn, [asked], [], grace_s=5, allowance_s=30))["PaperPage"]
        assert (verdict.checked, verdict.wrong) == (1, 1)
        assert f"answered the state of {before} at" in verdict.examples[0]
        assert "(hit, request 7f00)" in verdict.examples[0]
    finally:
        await client.aclose()
        await conn.close()
