"""What an operator sees: X-Request-Id (echoed, and in masked errors), one JSON log line per request, metrics
summed over `serve --workers N`, and OpenTelemetry spans when switched on."""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import logging
from collections.abc import Iterator
from datetime import datetime
from typing import Any

import httpx
import pytest
from starlette.routing import Route

from app import create_app
from settings import Settings
from telemetry import logs
from telemetry.logs import JsonFormatter
from telemetry.metrics import FOLD_AFTER_S
from tests.integration.agg_data import handmade_database
from tests.integration.inprocess import served
from tests.server_process import start_api

QUERY = "query Names { researchers(first: 2) { nodes { id name } } }"
# Fields of a request line that differ between two requests.
VARYING = frozenset({"time", "duration_ms", "sql_ms", "request_id"})


async def test_request_id_is_echoed_or_made(database_url) -> None:
    async with served(database_url) as (client, _):
        given = await client.post("/graphql", json={"query": QUERY}, headers={"X-Request-Id": "edge-7f3a.1"})
        assert given.headers["x-request-id"] == "edge-7f3a.1"
        made = await client.post("/graphql", json={"query": QUERY})
        assert len(made.headers["x-request-id"]) == 16
        # An id that could forge log lines or headers is replaced.
        forged = await client.post("/graphql", json={"query": QUERY}, headers={"X-Request-Id": 'a" b\\n{}' * 20})
        assert forged.headers["x-request-id"] != 'a" b\\n{}' * 20 and len(forged.headers["x-request-id"]) == 16


async def test_one_json_line_per_request_with_its_operation_and_statements(database_url, caplog) -> None:
    async with served(database_url) as (client, _):
        with caplog.at_level(logging.INFO, logger="wovepaper.request"):
            response = await client.post("/graphql", json={"query": QUERY}, headers={"X-Request-Id": "req-1"})
            await client.get("/healthz")  # probes are not logged
    assert response.status_code == 200
    records = [r for r in caplog.records if r.name == "wovepaper.request"]
    assert len(records) == 1
    line = json.loads(JsonFormatter().format(records[0]))
    assert line["request_id"] == "req-1" and line["operation"] == "Names" and line["status"] == 200
    assert line["statements"] >= 1 and line["duration_ms"] > 0 and line["level"] == "info"


async def test_a_500_leaves_through_the_edge_with_its_request_id_and_line(database_url, caplog) -> None:
    """A bug below the edge: Starlette's error response still gets the edge's headers, and the request its line."""
    application = create_app(Settings(DATABASE_URL=database_url))

    async def broken(request: Any) -> Any:
        raise RuntimeError("a bug")

    application.router.routes.append(Route("/broken", broken))
    async with application.router.lifespan_context(application) as state:

        async def with_state(scope: Any, receive: Any, send: Any) -> None:
            await application({**scope, "state": dict(state or {})}, receive, send)

        transport = httpx.ASGITransport(app=with_state, raise_app_exceptions=False)
        async with httpx.AsyncClient(transport=transport, base_url="http://wovepaper.test") as client:
            with caplog.at_level(logging.INFO, logger="wovepaper.request"):
                response = await client.get("/broken", headers={"X-Request-Id": "bug-1"})
    assert response.status_code == 500 and response.headers["x-request-id"] == "bug-1"
    assert "a bug" not in response.text
    (line,) = [r for r in caplog.records if r.name == "wovepaper.request"]
    assert line.request_id == "bug-1" and line.status == 500  # type: ignore[attr-defined]


@contextlib.contextmanager
def json_logging_to(stream: io.TextIOWrapper) -> Iterator[None]:
    """`wovepaper serve`'s logging (telemetry.logs.configure("json")) with its handler writing to `stream`."""
    root = logging.getLogger()
    saved = (list(root.handlers), root.level, logs._json_handler)
    logs.configure("json")
    root.handlers[0].stream = stream  # type: ignore[attr-defined]
    try:
        yield
    finally:
        root.handlers[:] = saved[0]
        root.setLevel(saved[1])
        logs._json_handler = saved[2]


async def test_the_request_line_is_the_formatters_line_and_needs_no_log_record(database_url) -> None:
    direct = io.TextIOWrapper(io.BytesIO(), line_buffering=True)
    through_records = io.TextIOWrapper(io.BytesIO(), line_buffering=True)
    made: list[str] = []
    factory = logging.getLogRecordFactory()

    def counting(*args: Any, **kwargs: Any) -> logging.LogRecord:
        record = factory(*args, **kwargs)
        made.append(record.name)
        return record

    logging.setLogRecordFactory(counting)
    try:
        async with served(database_url) as (client, _):
            with json_logging_to(direct):
                await client.post("/graphql", json={"query": QUERY}, headers={"X-Request-Id": "req-direct"})
            assert "wovepaper.request" not in made  # written straight to the stream
            with json_logging_to(through_records):
                # A second handler sees every record: the line then goes through logging, as any other.
                second = logging.StreamHandler(io.StringIO())
                logging.getLogger().addHandler(second)
                await client.post("/graphql", json={"query": QUERY}, headers={"X-Request-Id": "req-records"})
            assert "wovepaper.request" in made
    finally:
        logging.setLogRecordFactory(factory)
    (fast,) = _request_lines(direct)
    (slow,) = _request_lines(through_records)
    assert fast.keys() == slow.keys()
    assert {k: v for k, v in fast.items() if k not in VARYING} == {k: v for k, v in slow.items() if k not in VARYING}
    assert fast["request_id"] == "req-direct" and fast["message"] == "POST /graphql 200"
    assert fast["level"] == "info" and fast["operation"] == "Names" and fast["statements"] >= 1
    assert datetime.fromisoformat(fast["time"]).tzinfo is not None


async def test_request_lines_reach_the_file_within_the_flush_delay(database_url, tmp_path) -> None:
    path = tmp_path / "api.log"
    with path.open("w") as stream:
        async with served(database_url) as (client, _):
            with json_logging_to(stream):
                for i in range(3):
                    await client.post("/graphql", json={"query": QUERY}, headers={"X-Request-Id": f"file-{i}"})
                await asyncio.sleep(logs.FLUSH_AFTER_S * 4)
                lines = [json.loads(line) for line in path.read_text().splitlines()]
    ids = [line["request_id"] for line in lines if line["logger"] == "wovepaper.request"]
    assert ids == ["file-0", "file-1", "file-2"]


def _request_lines(stream: io.TextIOWrapper) -> list[dict[str, Any]]:
    lines = [json.loads(line) for line in stream.buffer.getvalue().splitlines()]  # type: ignore[attr-defined]
    return [line for line in lines if line["logger"] == "wovepaper.request"]


@pytest.mark.slow
async def test_metrics_of_several_workers_are_one_set(database_url, tmp_path) -> None:
    api = start_api({"DATABASE_URL": database_url}, tmp_path / "api.log", workers=2)
    try:
        async with httpx.AsyncClient(base_url=api.url, timeout=20) as client:
            await asyncio.gather(*(client.post("/graphql", json={"query": QUERY}) for _ in range(30)))
            # Each worker's latencies reach the shared files within FOLD_AFTER_S (at once for the one scraped).
            await asyncio.sleep(FOLD_AFTER_S * 1.5)
            counts = set()
            for _ in range(6):  # several scrapes, answered by either worker
                # Not one of the site's operations: counted under "other" (labels stay bounded).
                counts.add(_sample(await client.get("/metrics"), "other"))
                await asyncio.sleep(0.05)
        assert counts == {30.0}
    finally:
        api.stop()


def _sample(response: httpx.Response, operation: str) -> float:
    name = "wovepaper_request_duration_seconds_count"
    total = 0.0
    for line in response.text.splitlines():
        if line.startswith(name + "{") and f'operation="{operation}"' in line:
            total += float(line.rsplit(" ", 1)[1])
    return total


async def test_opentelemetry_spans_for_requests_and_sql(database_url) -> None:
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from telemetry.tracing import instrument, tracer_provider, uninstrument

    exporter = InMemorySpanExporter()
    application = create_app(Settings(DATABASE_URL=database_url, REDIS_URL=None))
    instrument(application, service_name="wovepaper-test", provider=tracer_provider("wovepaper-test", exporter))
    try:
        async with served(database_url, application=application) as (client, _):
            response = await client.post("/graphql", json={"query": QUERY})
        assert response.status_code == 200
        spans = exporter.get_finished_spans()
        kinds = {s.kind.name for s in spans}
        assert "SERVER" in kinds  # the HTTP request
        assert any(s.attributes and s.attributes.get("db.system") == "postgresql" for s in spans)  # its SQL
        assert {s.resource.attributes["service.name"] for s in spans} == {"wovepaper-test"}
    finally:
        uninstrument()


def test_tracing_is_off_by_default() -> None:
    assert Settings().otel_enabled is False


async def test_ingest_progress_is_exported_from_the_database(make_database) -> None:
    import asyncpg

    from db.migrate import migrate

    dsn = await make_database("progress")
    conn = await asyncpg.connect(dsn)
    try:
        await migrate(conn)
        await conn.execute(
            "INSERT INTO ingest_checkpoints (source, state, updated_at) VALUES ('arxiv:all', $1::text::jsonb, now())",
            json.dumps({"token": None, "next_from": "2026-11-29", "pages": 42}),
        )
    finally:
        await conn.close()
    async with served(dsn) as (client, _):
        lines = (await client.get("/metrics")).text.splitlines()
    assert 'wovepaper_ingest_pages{source="arxiv:all"} 42.0' in lines
    assert 'wovepaper_ingest_running{source="arxiv:all"} 0.0' in lines
    assert any(line.startswith('wovepaper_ingest_lag_seconds{source="arxiv:all"}') for line in lines)
    assert any(line.startswith('wovepaper_ingest_last_success_timestamp_seconds{source="arxiv:all"}') for line in lines)
    assert "wovepaper_ingest_enrich_queue 0.0" in lines
    assert "wovepaper_corrections_pending 0.0" in lines and "wovepaper_correction_conflicts 0.0" in lines
    assert any(line.startswith('wovepaper_db_pool_connections{state="open"}') for line in lines)


# As the site's documents are written: a comment first, then the one operation (its name is not sent apart).
ARCHIVE_H_INDEX = """# the archive's h-index

query ArchiveHIndex($id: String!) { researcher(id: $id) { hIndexInArchive } }"""


async def test_the_request_line_carries_what_each_layer_learned(
    make_database, redis_url, cache_namespace, caplog
) -> None:
    """The edge (who asked, a refused credential), GraphQL (the operation, its errors' codes) and the data layer (SQL,
    the aggregate cache's answers) each fill the request's state; its one line reports them all."""
    dsn, ids = await handmade_database(make_database, "request_line")
    variables = {"id": str(ids["A"])}
    async with served(dsn, redis_url, cache_namespace=f"{cache_namespace}-line") as (client, _):
        with caplog.at_level(logging.INFO, logger="wovepaper.request"):
            for _ in range(2):
                answered = await client.post("/graphql", json={"query": ARCHIVE_H_INDEX, "variables": variables})
                assert answered.status_code == 200 and "errors" not in answered.json()
            await client.post("/graphql", json={"query": "query Bad { researcher(id: 12) { name } }"})
            await client.post("/graphql", json={"query": QUERY}, headers={"X-Api-Key": "wp_not_a_key"})
    first, second, bad, unknown = (
        json.loads(JsonFormatter().format(r)) for r in caplog.records if r.name == "wovepaper.request"
    )
    assert first["operation"] == second["operation"] == "ArchiveHIndex"
    # The researcher's figures are computed once, then read from Redis.
    assert first["cache_misses"] >= 1 and first["statements"] >= 2
    assert second["cache_hits"] >= 1 and second["cache_misses"] == 0 and second["statements"] < first["statements"]
    assert first["client"] == second["client"] == "127.0.0.1" and first["error_codes"] is None
    assert bad["operation"] == "Bad" and bad["error_codes"] == ["GRAPHQL_VALIDATION_FAILED"]
    assert unknown["status"] == 401 and unknown["error_codes"] == ["UNAUTHENTICATED"]
    assert unknown["client"] == "127.0.0.1" and unknown["statements"] == 0
