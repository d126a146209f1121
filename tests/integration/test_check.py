"""`wovepaper check`: a row per check, what is fine and what is not, the setting to fix, exit 1 on any failure.
Real PostgreSQL and Redis; the model endpoint and the JWK Set are loopback servers."""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis.asyncio as aioredis
from click.testing import Result
from typer.testing import CliRunner

import localservers
from cli import app
from tests.ingest.loopback import http_server
from tests.jwt_support import KeyPair, jwks

MODEL = "llama3.1:8b"


def _clean_env(**given: str) -> dict[str, str | None]:
    """Only the settings given: this machine's own (WOVEPAPER_*, DATABASE_URL, REDIS_URL) unset."""
    mine = [k for k in os.environ if k.startswith("WOVEPAPER_") or k in ("PROMETHEUS_MULTIPROC_DIR",)]
    env: dict[str, str | None] = {k: None for k in mine} | {"DATABASE_URL": None, "REDIS_URL": None}
    return env | dict(given)


async def _check(env: dict[str, str | None], *args: str) -> Result:
    return await asyncio.to_thread(CliRunner().invoke, app, ["check", *args], env=env)


def _rows(output: str) -> dict[str, tuple[str, str, str]]:
    """check name -> (status, setting, detail)."""
    rows = {}
    for line in output.splitlines()[1:]:
        parts = line.split(None, 3)
        if len(parts) == 4 and parts[0] in ("ok", "WARN", "FAIL", "skip"):
            rows[parts[1]] = (parts[0], parts[2], parts[3])
    return rows


@pytest.fixture
def upstream() -> Iterator[str]:
    """A model endpoint that knows one model and wants a key, and a JWK Set, on loopback."""
    keys = json.dumps(jwks(KeyPair("k1"))).encode()

    def answer(method: str, path: str, headers: dict[str, str], body: bytes) -> tuple[int, dict[str, str], bytes]:
        if path == "/v1/models":
            if headers.get("Authorization") != "Bearer right-key":
                return 401, {}, b'{"error": {"message": "bad key"}}'
            return 200, {"Content-Type": "application/json"}, json.dumps({"data": [{"id": MODEL}]}).encode()
        if path == "/jwks.json":
            return 200, {"Content-Type": "application/json"}, keys
        return 404, {}, b""

    with http_server(answer) as port:
        yield f"http://127.0.0.1:{port}"


async def test_everything_configured_and_fine_passes(
    database_url: str, redis_url: str, upstream: str, tmp_path: Path
) -> None:
    env = _clean_env(
        DATABASE_URL=database_url,
        REDIS_URL=redis_url,
        WOVEPAPER_LLM_API_URL=f"{upstream}/v1",
        WOVEPAPER_LLM_MODEL=MODEL,
        WOVEPAPER_LLM_API_KEY="right-key",
        WOVEPAPER_JWKS_URL=f"{upstream}/jwks.json",
        WOVEPAPER_SEMANTIC_SEARCH="false",
        PROMETHEUS_MULTIPROC_DIR=str(tmp_path / "metrics"),
    )
    result = await _check(env)
    assert result.exit_code == 0, result.output
    rows = _rows(result.output)
    assert [name for name in rows] == ["database", "migrations", "redis", "model", "jwks", "semantic", "metrics"]
    assert rows["database"][0] == "ok" and "(primary)" in rows["database"][2]
    assert rows["migrations"][0] == "ok" and rows["migrations"][2].startswith("all ")
    assert rows["redis"][0] == "ok" and "(primary)" in rows["redis"][2]
    assert rows["model"] == ("ok", "WOVEPAPER_LLM_MODEL", f"{MODEL} at {upstream}/v1")
    assert rows["jwks"] == ("ok", "WOVEPAPER_JWKS_URL", f"1 signing key(s) from {upstream}/jwks.json")
    assert rows["semantic"][0] == "skip"
    assert rows["metrics"][0] == "ok"
    assert result.output.splitlines()[-1] == "check: all 6 passed, 1 not configured"


async def test_each_failure_names_its_setting_and_exits_1(make_database: object, upstream: str, tmp_path: Path) -> None:
    unmigrated: str = await make_database("check_pending")  # type: ignore[operator]
    closed_redis = f"redis://127.0.0.1:{localservers.free_port()}/0"
    read_only = tmp_path / "read-only"
    read_only.write_text("a file, not a directory")
    env = _clean_env(
        DATABASE_URL=unmigrated,
        REDIS_URL=closed_redis,
        WOVEPAPER_LLM_API_URL=f"{upstream}/v1",
        WOVEPAPER_LLM_MODEL=MODEL,
        WOVEPAPER_LLM_API_KEY="wrong-key",
        WOVEPAPER_JWKS_URL=f"{upstream}/missing.json",
        WOVEPAPER_SEMANTIC_SEARCH="false",
        PROMETHEUS_MULTIPROC_DIR=str(read_only),
    )
    result = await _check(env)
    assert result.exit_code == 1, result.output
    rows = _rows(result.output)
    assert rows["database"][0] == "ok"
    status, setting, detail = rows["migrations"]
    assert (status, setting) == ("FAIL", "DATABASE_URL") and "pending" in detail and "wovepaper migrate" in detail
    assert rows["redis"][:2] == ("FAIL", "REDIS_URL") and "cannot reach" in rows["redis"][2]
    assert rows["model"][:2] == ("FAIL", "WOVEPAPER_LLM_API_KEY") and "HTTP 401" in rows["model"][2]
    assert rows["jwks"][:2] == ("FAIL", "WOVEPAPER_JWKS_URL") and "HTTP 404" in rows["jwks"][2]
    assert rows["metrics"][:2] == ("FAIL", "PROMETHEUS_MULTIPROC_DIR")
    assert result.output.splitlines()[-1] == (
        "check: 5 failed; fix DATABASE_URL, REDIS_URL, WOVEPAPER_LLM_API_KEY, WOVEPAPER_JWKS_URL, "
        "PROMETHEUS_MULTIPROC_DIR"
    )


async def test_an_unreachable_database_and_a_model_it_does_not_serve(upstream: str) -> None:
    closed = f"postgresql://wovepaper:s3cret@127.0.0.1:{localservers.free_port()}/wovepaper"
    env = _clean_env(
        DATABASE_URL=closed,
        WOVEPAPER_LLM_API_URL=f"{upstream}/v1",
        WOVEPAPER_LLM_MODEL="gpt-4o-mini",
        WOVEPAPER_LLM_API_KEY="right-key",
        WOVEPAPER_SEMANTIC_SEARCH="false",
    )
    result = await _check(env, "--only", "database", "--only", "model")
    assert result.exit_code == 1, result.output
    rows = _rows(result.output)
    assert set(rows) == {"database", "model"}
    assert rows["database"][:2] == ("FAIL", "DATABASE_URL")
    assert "cannot connect to postgresql://wovepaper:***@127.0.0.1" in rows["database"][2]
    assert "s3cret" not in result.output
    assert rows["model"] == ("FAIL", "WOVEPAPER_LLM_MODEL", f"{upstream}/v1 does not serve 'gpt-4o-mini'")


async def test_missing_and_malformed_settings_are_each_named() -> None:
    result = await _check(_clean_env(WOVEPAPER_POOL_MAX_SIZE="ten", WOVEPAPER_WORKERS="0"))
    assert result.exit_code == 1, result.output
    failed = [line.split(None, 3) for line in result.output.splitlines() if line.startswith("FAIL")]
    assert sorted((check, setting) for _, check, setting, _ in failed) == [
        ("settings", "WOVEPAPER_POOL_MAX_SIZE"),
        ("settings", "WOVEPAPER_WORKERS"),
    ]
    assert all(detail.startswith("malformed: ") for *_, detail in failed)
    assert "Traceback" not in result.output

    result = await _check(_clean_env(WOVEPAPER_SEMANTIC_SEARCH="false"), "--only", "database")
    assert result.exit_code == 1
    assert _rows(result.output)["database"] == (
        "FAIL",
        "DATABASE_URL",
        "not set: serve, migrate and the ingest need it",
    )


async def test_a_warning_is_shown_and_does_not_fail(database_url: str, tmp_path: Path) -> None:
    """No ONNX graphs yet where PyTorch can make them: the first semantic request would wait for the export."""
    env = _clean_env(DATABASE_URL=database_url, WOVEPAPER_MODEL_DIR=str(tmp_path / "no-graphs-here"))
    result = await _check(env, "--only", "semantic", "--only", "migrations")
    assert result.exit_code == 0, result.output
    status, setting, detail = _rows(result.output)["semantic"]
    assert (status, setting) == ("WARN", "WOVEPAPER_MODEL_DIR") and "exported on first use" in detail
    assert result.output.splitlines()[-1] == (
        "check: all 2 passed, 0 not configured; 1 warning(s): WOVEPAPER_MODEL_DIR"
    )
    assert not (tmp_path / "no-graphs-here").exists()  # checking exported nothing


async def test_an_unknown_check_name_is_refused() -> None:
    result = await _check(_clean_env(), "--only", "dns")
    assert result.exit_code == 2
    assert "no check named dns" in result.output


async def test_a_redis_that_does_not_bound_its_memory_is_a_warning(tmp_path: Path) -> None:
    """A Redis without `maxmemory` grows until the host kills it: named, as a warning that does not fail."""
    server = localservers.start_redis(tmp_path / "redis", port=localservers.free_port())
    try:
        env = _clean_env(REDIS_URL=server.url)
        client = aioredis.from_url(server.url)
        try:
            await client.config_set("maxmemory", "0")
        finally:
            await client.aclose()
        result = await _check(env, "--only", "redis")
    finally:
        server.stop()
    assert result.exit_code == 0, result.output
    rows = _rows(result.output)
    assert rows["redis"][0] == "ok"
    status, setting, detail = rows["redis-memory"]
    assert (status, setting) == ("WARN", "REDIS_URL") and "maxmemory" in detail
