"""One run per ingest stage: a second harvest, enrichment, `ingest all` or `embed` started while one runs stops at
once (exit 0) naming the run that holds the stage, or waits for it with --wait. Real processes against the
recorded upstream fixtures served on loopback."""

from __future__ import annotations

import asyncio
import os
import re
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import IO

import asyncpg
import pytest
from click.testing import Result
from typer.testing import CliRunner

from cli import app
from db.queries.ingest_locks import LOCK_CLASS
from ingest.locks import STAGES
from tests.ingest.killdrill import compare, drill_upstreams, snapshot
from tests.ingest.loopback import Loopback, serve

ROOT = Path(__file__).resolve().parents[2]
# Long enough for a loaded machine; a run that takes this long has hung.
RUN_TIMEOUT_S = 180


@pytest.fixture
def upstreams() -> Iterator[Loopback]:
    with serve(*drill_upstreams()) as loop:
        yield loop


def _env(loop: Loopback, dsn: str) -> dict[str, str]:
    """This machine's environment without any settings of its own, then the loopback upstreams and the database."""
    mine = ("DATABASE_URL", "REDIS_URL")
    env = {k: v for k, v in os.environ.items() if not k.startswith("WOVEPAPER_") and k not in mine}
    return env | loop.env(dsn)


def _start(argv: list[str], env: dict[str, str]) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "cli", *argv],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


async def _empty(conn: asyncpg.Connection) -> None:
    await conn.execute(
        "TRUNCATE papers, researchers, institutions, ingest_checkpoints, ingest_progress RESTART IDENTITY CASCADE"
    )


async def _hold(dsn: str, stage: str, name: str) -> asyncpg.Connection:
    """A session named `name` holding the stage's lock, as a run on another host would."""
    holder = await asyncpg.connect(dsn, server_settings={"application_name": name})
    assert await holder.fetchval("SELECT pg_try_advisory_lock($1::int, $2::int)", LOCK_CLASS, STAGES[stage])
    return holder


async def test_two_harvests_started_together_one_works_the_other_stops_at_once_naming_it(
    upstreams: Loopback, conn: asyncpg.Connection, ingest_dsn: str
) -> None:
    env = _env(upstreams, ingest_dsn)
    single = await asyncio.to_thread(
        subprocess.run,
        [sys.executable, "-m", "cli", "ingest", "arxiv"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT_S,
    )
    assert single.returncode == 0, single.stderr
    reference = await snapshot(ingest_dsn)
    assert reference["papers"] and reference["paper_versions"] and reference["ingest_checkpoints"]
    requests_alone = upstreams.requests
    await _empty(conn)

    # The run that takes the lock is held at its first upstream request until the other one has exited: whatever
    # the order they start in and however slowly, the second finds the first holding the harvest.
    gate = threading.Event()
    upstreams.on_request = lambda path: gate.wait(RUN_TIMEOUT_S)
    upstreams.requests = 0
    runs = [_start(["ingest", "arxiv"], env), _start(["ingest", "arxiv"], env)]
    try:
        stopped = await asyncio.to_thread(_first_to_exit, runs)
        working = next(run for run in runs if run is not stopped)
        out, err = await asyncio.to_thread(stopped.communicate, timeout=RUN_TIMEOUT_S)
    finally:
        gate.set()
    assert stopped.returncode == 0, err
    line = out.strip().splitlines()[-1]
    assert re.fullmatch(
        rf"arxiv: not run: another run holds the arxiv lock: wovepaper-ingest arxiv \S+:{working.pid} "
        r"\(PostgreSQL backend \d+, connected since \S+\)",
        line,
    ), line
    out, err = await asyncio.to_thread(working.communicate, timeout=RUN_TIMEOUT_S)
    assert working.returncode == 0, err
    assert "arxiv: seen" in out and "failed 0" in out

    # The rows are a single run's, and the run that stopped asked the upstream nothing.
    after = await snapshot(ingest_dsn)
    diff = compare(reference, after)
    assert not diff, diff.details
    assert {t: len(rows) for t, rows in after.items()} == {t: len(rows) for t, rows in reference.items()}
    assert upstreams.requests == requests_alone


def _first_to_exit(runs: list[subprocess.Popen[str]]) -> subprocess.Popen[str]:
    while True:
        for run in runs:
            try:
                run.wait(0.05)
            except subprocess.TimeoutExpired:
                continue
            return run


async def test_a_waiting_enrichment_runs_once_the_holder_lets_go(
    upstreams: Loopback, conn: asyncpg.Connection, ingest_dsn: str
) -> None:
    env = _env(upstreams, ingest_dsn)
    harvest = await asyncio.to_thread(
        CliRunner().invoke, app, ["ingest", "arxiv"], env=_runner_env(upstreams, ingest_dsn)
    )
    assert harvest.exit_code == 0, harvest.output

    holder = await _hold(ingest_dsn, "enrich", "wovepaper-ingest enrich ingest-7f9c:42")
    run = _start(["ingest", "enrich", "--wait"], env)
    try:
        assert run.stderr is not None
        # It says whom it waits for; until the holder lets go it enriches nothing.
        line = await asyncio.to_thread(_line_with, run.stderr, "waiting")
        assert line.startswith(
            "enrich: waiting for the run that holds the enrich lock: wovepaper-ingest enrich ingest-7f9c:42"
        ), line
        assert await conn.fetchval("SELECT count(*) FROM papers WHERE enriched_at IS NOT NULL") == 0
    finally:
        await holder.close()
    out, err = await asyncio.to_thread(run.communicate, timeout=RUN_TIMEOUT_S)
    assert run.returncode == 0, err
    assert "enrich: seen" in out
    assert await conn.fetchval("SELECT count(*) FROM papers WHERE enriched_at IS NOT NULL") > 0


def _runner_env(loop: Loopback, dsn: str) -> dict[str, str | None]:
    """For CliRunner: the loopback settings, and this machine's own settings unset."""
    unset: dict[str, str | None] = {k: None for k in os.environ if k.startswith("WOVEPAPER_")}
    return unset | {"REDIS_URL": None} | dict(loop.env(dsn))


def _line_with(stream: IO[str], word: str) -> str:
    for line in stream:
        if word in line:
            return line.strip()
    raise AssertionError(f"the run ended without a line saying {word!r}")


async def _invoke_held(dsn: str, stage: str, holder_name: str, argv: list[str], env: dict[str, str | None]) -> Result:
    holder = await _hold(dsn, stage, holder_name)
    try:
        return await asyncio.to_thread(CliRunner().invoke, app, argv, env=env)
    finally:
        await holder.close()


async def test_ingest_all_skips_a_stage_another_run_holds_and_a_second_all_stops_at_once(
    upstreams: Loopback, conn: asyncpg.Connection, ingest_dsn: str
) -> None:
    env = _runner_env(upstreams, ingest_dsn)
    result = await _invoke_held(ingest_dsn, "arxiv", "wovepaper-ingest arxiv other-host:7", ["ingest", "all"], env)
    assert result.exit_code == 0, result.output
    assert "arxiv: not run: another run holds the arxiv lock: wovepaper-ingest arxiv other-host:7" in result.output
    assert "enrich: seen 0," in result.output  # the stages it was not kept from still ran
    assert upstreams.requests == 0

    result = await _invoke_held(ingest_dsn, "all", "wovepaper-ingest all other-host:7", ["ingest", "all"], env)
    assert result.exit_code == 0, result.output
    assert result.output.startswith("all: not run: another run holds the all lock: wovepaper-ingest all other-host:7")
    assert "enrich:" not in result.output

    # Released, every stage runs again.
    result = await asyncio.to_thread(CliRunner().invoke, app, ["ingest", "all"], env=env)
    assert result.exit_code == 0, result.output
    assert "arxiv: seen" in result.output and upstreams.requests > 0


async def test_a_second_embed_stops_at_once_naming_the_first(conn: asyncpg.Connection, ingest_dsn: str) -> None:
    env: dict[str, str | None] = {"DATABASE_URL": ingest_dsn}
    result = await _invoke_held(ingest_dsn, "embed", "wovepaper-ingest embed other-host:9", ["embed"], env)
    assert result.exit_code == 0, result.output
    assert result.output.startswith(
        "embed: not run: another run holds the embed lock: wovepaper-ingest embed other-host:9"
    )
