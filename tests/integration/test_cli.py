"""The `wovepaper` command: help on every command, and the `up` dev runner as `make run` starts it."""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import asyncpg
import httpx
import pytest
from typer.testing import CliRunner

import localservers
from cli import app

ROOT = Path(__file__).resolve().parents[2]
COMMANDS = ["serve", "migrate", "up", "ingest"]


def test_help_lists_every_command() -> None:
    result = CliRunner().invoke(app, ["--help"])
    assert result.exit_code == 0
    for name in COMMANDS:
        assert name in result.output


@pytest.mark.parametrize("command", [[c] for c in COMMANDS] + [["ingest", "arxiv"], ["ingest", "enrich"]])
def test_each_command_has_help(command: list[str]) -> None:
    result = CliRunner().invoke(app, [*command, "--help"])
    assert result.exit_code == 0, result.output
    assert "Usage:" in result.output


def test_console_script_is_installed() -> None:
    script = shutil.which("wovepaper", path=str(Path(sys.executable).parent))
    if script is None:
        pytest.skip("the project is not installed in this environment (`make test` installs it)")
    result = subprocess.run([script, "--help"], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0
    assert "migrate" in result.stdout


def test_migrate_without_a_reachable_database_says_so_and_fails() -> None:
    closed = f"postgresql://postgres@127.0.0.1:{localservers.free_port()}/postgres"
    result = CliRunner().invoke(app, ["migrate"], env={"DATABASE_URL": closed})
    assert result.exit_code == 1
    assert "error: cannot migrate the database at DATABASE_URL" in result.output


# --- `wovepaper up` -----------------------------------------------------------------------------------


def _env(**extra: str) -> dict[str, str]:
    env = {
        k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL") and not k.startswith("WOVEPAPER_")
    }
    # As everywhere in the tests: no embedding model loading (seconds of CPU) in every server started here.
    return env | {"WOVEPAPER_SEMANTIC_PRELOAD": "false"} | extra


def _start_up(port: int, env: dict[str, str], log: Path, *options: str) -> subprocess.Popen[bytes]:
    with log.open("wb") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "cli", "up", "--port", str(port), *(options or ["--no-demo"])],
            cwd=ROOT,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )


def _wait_ready(proc: subprocess.Popen[bytes], port: int, log: Path, timeout: float = 90) -> httpx.Response:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"`wovepaper up` exited with {proc.returncode}:\n{log.read_text()}")
        try:
            response = httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=2)
            if response.status_code == 200:
                return response
        except httpx.TransportError:
            pass
        time.sleep(0.1)
    proc.kill()
    pytest.fail(f"`wovepaper up` was not ready within {timeout} s:\n{log.read_text()}")


def _post_graphql(port: int, body: dict[str, str]) -> httpx.Response:
    return httpx.post(f"http://127.0.0.1:{port}/graphql", json=body, timeout=10)


def _stop(proc: subprocess.Popen[bytes], sig: signal.Signals, log: Path | None = None) -> int:
    proc.send_signal(sig)
    try:
        return proc.wait(30)
    except subprocess.TimeoutExpired:
        status = Path(f"/proc/{proc.pid}/status")
        signals = (
            [line for line in status.read_text().splitlines() if line.startswith("Sig")] if status.exists() else []
        )
        proc.kill()
        proc.wait()
        pytest.fail(
            f"`wovepaper up` did not stop within 30 s of {sig.name} ({signals}):\n{log.read_text() if log else ''}"
        )


def _processes_mentioning(text: str) -> list[str]:
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            args = cmdline.read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if text in args:
            found.append(args)
    return found


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
async def test_up_uses_the_given_servers_migrates_serves_and_stops_on_signal(
    make_database, redis_url: str, tmp_path: Path, sig: signal.Signals
) -> None:
    dsn = await make_database(f"up_{sig.name.lower()}")
    port = localservers.free_port()
    log = tmp_path / "up.log"
    proc = _start_up(port, _env(DATABASE_URL=dsn, REDIS_URL=redis_url, WOVEPAPER_LOCAL_DIR=str(tmp_path)), log)
    try:
        ready = _wait_ready(proc, port, log)
    finally:
        code = _stop(proc, sig)
    # A fresh database answers ready only once `up` has migrated it.
    assert ready.json() == {"status": "ok", "checks": {"postgres": "ok", "redis": "ok"}}
    assert code == 0, log.read_text()
    output = log.read_text()
    assert "started project-local" not in output
    assert f"http://127.0.0.1:{port}/graphql" in output
    assert output.rstrip().endswith("stopped")


def _with_password(dsn: str, password: str) -> str:
    scheme, _, rest = dsn.partition("://")
    authority, slash, tail = rest.partition("/")
    user, _, host = authority.rpartition("@")
    return f"{scheme}://{user or 'postgres'}:{password}@{host}{slash}{tail}"


async def test_up_never_prints_a_given_password(make_database, tmp_path: Path) -> None:
    # The database is the user's (with a password), Redis is started here: the line for other shells is printed.
    password = "pw-7e1c9a3f5d"
    dsn = _with_password(await make_database("up_password"), password)
    port = localservers.free_port()
    log = tmp_path / "up.log"
    proc = _start_up(port, _env(DATABASE_URL=dsn, WOVEPAPER_LOCAL_DIR=str(tmp_path / "local")), log)
    try:
        _wait_ready(proc, port, log)
    finally:
        code = _stop(proc, signal.SIGINT, log)
    output = log.read_text()
    assert code == 0, output
    assert "started project-local Redis" in output and "other shells: export REDIS_URL=" in output
    assert password not in output


def test_up_fails_fast_when_the_port_is_taken(tmp_path: Path) -> None:
    local = tmp_path / "local"
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        log = tmp_path / "up.log"
        proc = _start_up(port, _env(WOVEPAPER_LOCAL_DIR=str(local)), log)
        code = proc.wait(60)
    output = log.read_text()
    assert code == 1
    assert f"cannot listen on 127.0.0.1:{port}" in output
    assert "already in use" in output.lower()
    # Nothing was started for a run that cannot serve.
    assert "started project-local" not in output
    assert not local.exists()


def test_up_without_urls_runs_local_servers_survives_a_kill_and_stops_them(tmp_path: Path) -> None:
    local = tmp_path / "local"
    env = _env(WOVEPAPER_LOCAL_DIR=str(local))

    # First run: initializes PostgreSQL, starts Redis, migrates; then dies without any cleanup.
    port = localservers.free_port()
    first = _start_up(port, env, tmp_path / "first.log")
    try:
        ready = _wait_ready(first, port, tmp_path / "first.log")
    finally:
        first.kill()
        first.wait()
    assert ready.json()["checks"] == {"postgres": "ok", "redis": "ok"}
    assert "started project-local PostgreSQL" in (tmp_path / "first.log").read_text()
    assert (local / "pg" / "PG_VERSION").exists()
    deadline = time.monotonic() + 10
    while _processes_mentioning(f"{local}/redis") and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _processes_mentioning(f"{local}/redis"), "redis-server outlived the killed runner"

    # Second run: reuses the data (nothing left to migrate) and, on Ctrl-C, stops both servers.
    port = localservers.free_port()
    second = _start_up(port, env, tmp_path / "second.log")
    try:
        _wait_ready(second, port, tmp_path / "second.log")
    finally:
        code = _stop(second, signal.SIGINT)
    output = (tmp_path / "second.log").read_text()
    assert code == 0, output
    assert "migrate: applied 0 migration(s)" in output
    assert _processes_mentioning(str(local)) == []


async def test_up_loads_the_demo_data_into_an_empty_database_only(
    make_database, redis_url: str, tmp_path: Path
) -> None:
    dsn = await make_database("up_demo")
    env = _env(DATABASE_URL=dsn, REDIS_URL=redis_url)
    query = {"query": "{ papers(first: 1) { totalCount } }"}
    counts = []
    for run, size in enumerate(["200", "300"]):
        port = localservers.free_port()
        log = tmp_path / f"up{run}.log"
        proc = _start_up(port, env, log, "--demo-papers", size)
        try:
            _wait_ready(proc, port, log)
            response = _post_graphql(port, query)
        finally:
            assert _stop(proc, signal.SIGINT) == 0, log.read_text()
        assert response.status_code == 200, response.text
        counts.append(response.json()["data"]["papers"]["totalCount"])
    # The second run found papers and left them alone.
    assert counts == [200, 200]


async def test_ctrl_c_during_the_demo_load_leaves_no_partial_data(
    make_database, redis_url: str, tmp_path: Path
) -> None:
    dsn = await make_database("up_demo_interrupted")
    log = tmp_path / "up.log"
    proc = _start_up(localservers.free_port(), _env(DATABASE_URL=dsn, REDIS_URL=redis_url), log, "--demo")
    try:
        _wait_for_line(proc, log, "demo: ")
    finally:
        code = _stop(proc, signal.SIGINT, log)
    output = log.read_text()
    assert code == 0, output
    assert "the demo load was interrupted: the next run loads it again" in output
    assert output.rstrip().endswith("stopped")
    conn = await asyncpg.connect(dsn)
    try:
        assert await conn.fetchval("SELECT count(*) FROM papers") == 0
    finally:
        await conn.close()


def _wait_for_line(proc: subprocess.Popen[bytes], log: Path, text: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while text not in log.read_text():
        if proc.poll() is not None or time.monotonic() > deadline:
            pytest.fail(f"never saw {text!r}:\n{log.read_text()}")
        time.sleep(0.05)


async def test_sigterm_stops_an_ingest_stage_as_ctrl_c_does() -> None:
    """A container stopped (SIGTERM) cancels the ingest's run, which then tells the cache what it committed
    (tests/ingest/test_cache_invalidation.py) and exits 130, instead of dying wherever it was."""
    import threading

    from cli.ingest import STOPPED, _stage

    assert threading.current_thread() is threading.main_thread()  # where the loop can take signals
    started = asyncio.Event()

    async def run() -> Any:
        started.set()
        await asyncio.sleep(30)

    async def stop() -> None:
        await started.wait()
        os.kill(os.getpid(), signal.SIGTERM)

    stopping = asyncio.create_task(stop())
    assert await asyncio.wait_for(_stage("arxiv", run()), 10) == STOPPED
    await stopping
