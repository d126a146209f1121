"""Compose's PostgreSQL scripts, run as processes as the PostgreSQL image runs them: deploy/postgres/primary-init.sh
on a freshly initialised primary (password authentication over TCP, as in the image), then
deploy/postgres/replica-start.sh on an empty data directory, which must come up as a hot standby that streams the
primary's writes through its slot."""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import asyncpg
import pytest

from localservers.ports import free_port
from tests.drills.servers import _bin_dir, _user

DEPLOY = Path(__file__).resolve().parents[2] / "deploy" / "postgres"
PASSWORDS = {"wovepaper": "b5a69788796a5b4c", "replicator": "0f1e2d3c4b5a6978"}
# Generous: a loaded machine; a replica that takes this long has failed.
WAIT_S = 90


@dataclass
class Cluster:
    root: Path
    primary_port: int
    replica_port: int
    env: dict[str, str]

    def dsn(self, port: int) -> str:
        return f"postgresql://wovepaper:{PASSWORDS['wovepaper']}@127.0.0.1:{port}/postgres"


def _as_server_user() -> dict[str, object]:
    user = _user()
    return {"user": user.pw_uid, "group": user.pw_gid} if user is not None else {}


def _run(args: list[str], env: dict[str, str], cwd: Path) -> None:
    result = subprocess.run(args, env=env, cwd=cwd, capture_output=True, text=True, timeout=120, **_as_server_user())  # type: ignore[call-overload]
    assert result.returncode == 0, f"{args[0]}: {result.stdout}\n{result.stderr}"


@pytest.fixture
def cluster() -> Iterator[Cluster]:
    root = Path(tempfile.mkdtemp(prefix="wovepaper-compose-pg-"))
    user = _user()
    if user is not None:
        os.chown(root, user.pw_uid, user.pw_gid)
    bin_dir = _bin_dir()
    primary_port, replica_port = free_port(), free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("PG")}
    env |= {"PATH": f"{bin_dir}:{env['PATH']}", "LC_ALL": "C.UTF-8"}
    primary = root / "primary"
    # As the image initialises it: a superuser named by POSTGRES_USER, trust over the socket, passwords over TCP.
    _run(
        ["initdb", "-D", str(primary), "-U", "wovepaper", "--auth-local=trust", "--auth-host=scram-sha-256",
         "--encoding=UTF8"],
        env,
        root,
    )  # fmt: skip
    # Where the servers listen; the replica's copy of this file (its base backup) has it too, and its port from PGPORT.
    with (primary / "postgresql.conf").open("a") as conf:
        conf.write(f"listen_addresses = '127.0.0.1'\nunix_socket_directories = '{root}'\nfsync = off\n")
    log = str(root / "primary.log")
    _run(["pg_ctl", "-D", str(primary), "-o", f"-p {primary_port}", "-l", log, "-w", "start"], env, root)
    try:
        yield Cluster(root, primary_port, replica_port, env)
    finally:
        subprocess.run(
            [str(bin_dir / "pg_ctl"), "-D", str(primary), "-m", "immediate", "-w", "stop"],
            env=env,
            capture_output=True,
            timeout=60,
            **_as_server_user(),  # type: ignore[call-overload]
        )
        shutil.rmtree(root, ignore_errors=True)


def _start(args: list[str], env: dict[str, str], root: Path) -> subprocess.Popen[bytes]:
    with (root / "replica.log").open("ab") as log:
        return subprocess.Popen(args, env=env, cwd=root, stdout=log, stderr=log, **_as_server_user())  # type: ignore[call-overload]


async def _connect_when_up(dsn: str) -> asyncpg.Connection:
    deadline = time.monotonic() + WAIT_S
    while True:
        try:
            return await asyncpg.connect(dsn, timeout=5)
        except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError, TimeoutError):
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.2)


async def test_the_replica_script_makes_a_streaming_hot_standby_of_the_primary(cluster: Cluster) -> None:
    root, env = cluster.root, cluster.env
    # The image's init step: POSTGRES_USER and POSTGRES_DB set, the server on its socket.
    init = env | {
        "POSTGRES_USER": "wovepaper",
        "POSTGRES_DB": "postgres",
        "PGDATA": str(root / "primary"),
        "PGHOST": str(root),
        "PGPORT": str(cluster.primary_port),
        "REPLICATION_PASSWORD": PASSWORDS["replicator"],
    }
    _run(["sh", str(DEPLOY / "primary-init.sh")], init, root)
    _run(["pg_ctl", "-D", str(root / "primary"), "reload"], env, root)
    primary = await asyncpg.connect(f"postgresql://wovepaper@/postgres?host={root}&port={cluster.primary_port}")
    try:
        await primary.execute(f"ALTER ROLE wovepaper PASSWORD '{PASSWORDS['wovepaper']}'")
        await primary.execute("CREATE TABLE written (id int PRIMARY KEY, note text)")

        replica_env = env | {
            "PGDATA": str(root / "replica"),
            "PGPORT": str(cluster.replica_port),
            "PRIMARY_HOST": "127.0.0.1",
            "PRIMARY_PORT": str(cluster.primary_port),
            "REPLICATION_PASSWORD": PASSWORDS["replicator"],
        }
        replica = _start(["sh", str(DEPLOY / "replica-start.sh")], replica_env, root)
        try:
            standby = await _connect_when_up(cluster.dsn(cluster.replica_port))
            try:
                assert await standby.fetchval("SELECT pg_is_in_recovery()") is True
                # What the primary writes reaches the standby, through the slot the init script made.
                await primary.execute("INSERT INTO written VALUES (1, 'after the base backup')")
                deadline = time.monotonic() + WAIT_S
                while await standby.fetchval(
                    "SELECT to_regclass('written') IS NULL OR NOT EXISTS (SELECT FROM written)"
                ):
                    assert time.monotonic() < deadline, (root / "replica.log").read_text()
                    await asyncio.sleep(0.1)
                assert await standby.fetchval("SELECT note FROM written WHERE id = 1") == "after the base backup"
                with pytest.raises(asyncpg.ReadOnlySQLTransactionError):
                    await standby.execute("INSERT INTO written VALUES (2, 'on the standby')")
            finally:
                await standby.close()
            slot = await primary.fetchrow(
                "SELECT slot_type, active FROM pg_replication_slots WHERE slot_name = 'replica_1'"
            )
            assert slot is not None and slot["slot_type"] == "physical" and slot["active"] is True
            state = await primary.fetchval("SELECT state FROM pg_stat_replication WHERE usename = 'replicator'")
            assert state == "streaming"
        finally:
            replica.send_signal(signal.SIGINT)
            try:
                replica.wait(60)
            except subprocess.TimeoutExpired:
                replica.kill()
    finally:
        await primary.close()
