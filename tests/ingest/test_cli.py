"""`wovepaper ingest arxiv | enrich | all` as operators run them, against loopback upstreams."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import asyncpg
import httpx
import pytest
from typer.testing import CliRunner

from cli import app
from tests.fake_model import ANALYSIS_USAGE, analyst, fake_model_in_thread
from tests.ingest.conftest import FakeOAI
from tests.ingest.loopback import Loopback, serve
from tests.ingest.upstreams import FakeScholarly, enrich_archive_page


@pytest.fixture
def upstreams() -> Iterator[Loopback]:
    with serve(FakeOAI(first=enrich_archive_page()), FakeScholarly()) as loop:
        yield loop


async def _count(dsn: str, sql: str) -> int:
    c = await asyncpg.connect(dsn)
    try:
        return int(await c.fetchval(sql))
    finally:
        await c.close()


def test_ingest_arxiv_enrich_all(upstreams: Loopback, conn: asyncpg.Connection, ingest_dsn: str) -> None:
    oai, env = upstreams.oai, upstreams.env(ingest_dsn)
    runner = CliRunner()
    result = runner.invoke(app, ["ingest", "arxiv", "--from", "2001-01-01"], env=env)
    assert result.exit_code == 0, result.output
    assert "arxiv: seen 3, inserted 3, updated 0, skipped 0, failed 0, requests 2, retries 0" in result.output
    # --from before earliestDatestamp was clamped (the server would reject it).
    assert oai.requests[1]["from"] == "2005-09-16"

    result = runner.invoke(app, ["ingest", "enrich", "--limit", "1"], env=env)
    assert result.exit_code == 0, result.output
    assert "enrich: seen 1," in result.output
    assert asyncio.run(_count(ingest_dsn, "SELECT count(*) FROM papers WHERE enriched_at IS NULL")) == 2

    # `all`: arXiv from the checkpoint (nothing new: the page is served again and is unchanged), then the rest.
    result = runner.invoke(app, ["ingest", "all"], env=env)
    assert result.exit_code == 0, result.output
    assert "arxiv: seen 3, inserted 0, updated 0, skipped 3" in result.output
    assert "enrich: seen 2," in result.output
    assert asyncio.run(_count(ingest_dsn, "SELECT count(*) FROM papers WHERE enriched_at IS NULL")) == 0
    assert asyncio.run(_count(ingest_dsn, "SELECT count(*) FROM researchers")) > 0


def test_failed_upstream_exits_1(upstreams: Loopback, conn: asyncpg.Connection, ingest_dsn: str) -> None:
    oai, env = upstreams.oai, upstreams.env(ingest_dsn)
    oai.script[0] = httpx.Response(
        400, text="<html><body>Bad Request</body></html>", headers={"Content-Type": "text/html"}
    )
    result = CliRunner().invoke(app, ["ingest", "arxiv"], env=env)
    assert result.exit_code == 1
    assert "stopped early: arxiv: HTTP 400: an HTML page instead of data" in result.output


async def _sql(dsn: str, *statements: str) -> None:
    c = await asyncpg.connect(dsn)
    try:
        for statement in statements:
            await c.execute(statement)
    finally:
        await c.close()


def test_a_paper_set_aside_exits_1_with_the_count(
    upstreams: Loopback, conn: asyncpg.Connection, ingest_dsn: str, caplog: pytest.LogCaptureFixture
) -> None:
    env = upstreams.env(ingest_dsn)
    runner = CliRunner()
    assert runner.invoke(app, ["ingest", "arxiv"], env=env).exit_code == 0
    # A value PostgreSQL refuses in ChemCrow's writes, whatever it is.
    asyncio.run(
        _sql(
            ingest_dsn,
            "CREATE FUNCTION refuse() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN IF NEW.paper_id ="
            " (SELECT id FROM papers WHERE arxiv_id = '2304.05376') AND NEW.researcher_id IS NOT NULL THEN"
            " RAISE EXCEPTION 'bad value' USING ERRCODE = '22021'; END IF; RETURN NEW; END $$",
            "CREATE TRIGGER refuse BEFORE UPDATE ON authorships FOR EACH ROW EXECUTE FUNCTION refuse()",
        )
    )
    try:
        result = runner.invoke(app, ["ingest", "enrich"], env=env)
    finally:
        asyncio.run(_sql(ingest_dsn, "DROP FUNCTION refuse() CASCADE"))
    assert result.exit_code == 1, result.output
    assert "enrich: seen 3, inserted" in result.output and "failed 1," in result.output
    assert "paper 2304.05376 set aside, its enrichment is retried later: CharacterNotInRepertoireError: bad value" in (
        caplog.text
    )
    assert asyncio.run(_count(ingest_dsn, "SELECT count(*) FROM papers WHERE enriched_at IS NULL")) == 1


def test_a_lock_waited_on_too_long_stops_the_run_with_a_line(
    upstreams: Loopback, conn: asyncpg.Connection, ingest_dsn: str
) -> None:
    env = upstreams.env(ingest_dsn)
    runner = CliRunner()
    assert runner.invoke(app, ["ingest", "arxiv"], env=env).exit_code == 0

    async def enrich_while_locked() -> object:
        locker = await asyncpg.connect(ingest_dsn)
        try:
            await locker.execute("BEGIN")
            await locker.execute("LOCK TABLE researchers IN EXCLUSIVE MODE")
            return await asyncio.to_thread(
                runner.invoke, app, ["ingest", "enrich"], env=env | {"WOVEPAPER_INGEST_LOCK_TIMEOUT_MS": "300"}
            )
        finally:
            await locker.close()

    result = asyncio.run(enrich_while_locked())
    assert result.exit_code == 1, result.output  # type: ignore[attr-defined]
    assert "enrich: stopped: database: LockNotAvailableError: canceling statement due to lock timeout" in (
        result.output  # type: ignore[attr-defined]
    )
    assert asyncio.run(_count(ingest_dsn, "SELECT count(*) FROM papers WHERE enriched_at IS NULL")) == 3


LLM_UNSET = {"WOVEPAPER_LLM_API_URL": None, "WOVEPAPER_LLM_MODEL": None, "WOVEPAPER_LLM_API_KEY": None}


def test_ingest_analyse_without_a_model_names_the_settings_and_exits_2(
    conn: asyncpg.Connection, ingest_dsn: str
) -> None:
    result = CliRunner().invoke(app, ["ingest", "analyse"], env={"DATABASE_URL": ingest_dsn, **LLM_UNSET})
    assert result.exit_code == 2
    assert result.output.strip().splitlines() == [
        "error: the language model is not configured: set WOVEPAPER_LLM_API_URL and WOVEPAPER_LLM_MODEL "
        "(and WOVEPAPER_LLM_API_KEY when the endpoint needs a key)"
    ]


def test_ingest_analyse_and_all_with_and_without_a_model(
    upstreams: Loopback, conn: asyncpg.Connection, ingest_dsn: str
) -> None:
    env = upstreams.env(ingest_dsn)
    runner = CliRunner()
    result = runner.invoke(app, ["ingest", "all"], env={**env, **LLM_UNSET})
    assert result.exit_code == 0, result.output
    assert "analyse: skipped (no language model configured)" in result.output

    key = "sk-cli-5e4d3c2b1a"
    with fake_model_in_thread(analyst) as model:
        model_env = {
            **env,
            "WOVEPAPER_LLM_API_URL": model.base_url,
            "WOVEPAPER_LLM_MODEL": "fake-analyst",
            "WOVEPAPER_LLM_API_KEY": key,
            "WOVEPAPER_LLM_RPS": "1000",
        }
        result = runner.invoke(app, ["ingest", "analyse", "--limit", "2"], env=model_env)
        assert result.exit_code == 0, result.output
        tokens = 2 * sum(ANALYSIS_USAGE)
        assert (
            f"analyse: seen 2, inserted 0, updated 2, skipped 0, failed 0, requests 2, retries 0, tokens {tokens}"
            in (result.output)
        )
        # `all` analyses the rest as its last stage.
        result = runner.invoke(app, ["ingest", "all"], env=model_env)
        assert result.exit_code == 0, result.output
        assert "analyse: seen 1, inserted 0, updated 1" in result.output
    assert key not in result.output
    assert asyncio.run(_count(ingest_dsn, "SELECT count(*) FROM papers WHERE NOT analysed")) == 0


def test_every_batch_command_lowers_its_priority_first(
    upstreams: Loopback, conn: asyncpg.Connection, ingest_dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On a host the API shares, `ingest ...` and `embed` yield the cores: each sets WOVEPAPER_INGEST_NICE before it
    works (recorded here, not applied: the suite's own process keeps its priority)."""
    import os

    asked: list[int] = []
    monkeypatch.setattr(os, "getpriority", lambda which, who: 0)
    monkeypatch.setattr(os, "setpriority", lambda which, who, value: asked.append(value))
    env = {**upstreams.env(ingest_dsn), "WOVEPAPER_INGEST_NICE": "7"}
    runner = CliRunner()
    for argv in (["ingest", "arxiv", "--from", "2001-01-01"], ["ingest", "enrich"], ["ingest", "all"], ["embed"]):
        asked.clear()
        result = runner.invoke(app, argv, env=env)
        assert asked == [7], (argv, result.output)
