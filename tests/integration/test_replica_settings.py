"""`wovepaper serve` with replicas it cannot use: a DSN that does not parse, one that names no server, and the
primary named as a replica. It starts, serves from the primary, says which setting is wrong, and never prints a
password."""

from __future__ import annotations

import httpx

from tests.drills.scenarios import metric, until
from tests.server_process import start_api

SETTING = "WOVEPAPER_DATABASE_REPLICA_URLS"


async def test_serve_starts_with_unusable_replicas_and_says_why(database_url: str, tmp_path) -> None:
    nobody = "postgresql://reader:hunter2@127.0.0.1:1/wovepaper"
    replicas = f"{nobody}, postgresql://reader:hunter2@db:54x2/w, {database_url}"
    api = start_api({"DATABASE_URL": database_url, SETTING: replicas}, tmp_path / "api.log")
    try:
        async with httpx.AsyncClient(base_url=api.url, timeout=20) as client:

            async def checked() -> bool:
                return "0/3 usable" in (await client.get("/readyz")).json()["checks"].get("replicas", "")

            assert await until(checked, 30) is not None
            ready = await client.get("/readyz")
            assert ready.status_code == 200 and ready.json()["status"] == "degraded"
            answer = await client.post("/graphql", json={"query": "{ papers(first: 1) { totalCount } }"})
            assert answer.status_code == 200 and "errors" not in answer.json()
            assert await metric(client, 'wovepaper_db_replica_usable{replica="127.0.0.1:1/wovepaper"}') == 0
            assert await metric(client, 'wovepaper_db_replica_fallbacks_total{reason="unavailable"}') >= 1
            assert await metric(client, 'wovepaper_db_reads_total{target="primary"}') >= 1
    finally:
        api.stop()  # request lines are written out within 50 ms, and when the server stops
    log = api.log.read_text(errors="replace")
    assert f"{SETTING}: replica 2 of 3 does not parse (port '54x2' is not a port number)" in log
    assert f"{SETTING}: replica 127.0.0.1:1/wovepaper does not answer" in log
    assert "is not in recovery (a primary, or a promoted replica): refused as a replica" in log
    assert "hunter2" not in log
    assert '"path":"/graphql"' in log and '"db":"primary"' in log  # the request line names where it read
