"""An API server as a real process on a free port, for tests, drills and benchmarks that talk to it over HTTP."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx

from localservers.ports import free_port

ROOT = Path(__file__).resolve().parent.parent


def wovepaper_command() -> list[str]:
    """The console script when the project is installed (as `make test` does), else the same entry point."""
    script = shutil.which("wovepaper", path=str(Path(sys.executable).parent))
    return [script] if script else [sys.executable, "-m", "cli"]


class ServerDidNotStart(RuntimeError):
    """The server exited, or did not answer /healthz in time; the message ends with its output."""


@dataclass
class ServerProcess:
    url: str
    process: subprocess.Popen[bytes]
    log: Path

    @classmethod
    def start(cls, argv: list[str], env: dict[str, str], log: Path, *, timeout_s: float = 60) -> ServerProcess:
        """Runs `argv` plus `--host 127.0.0.1 --port <free port>`, output to `log`; returns once /healthz answers."""
        port = free_port()
        with log.open("wb") as out:
            proc = subprocess.Popen(
                [*argv, "--host", "127.0.0.1", "--port", str(port)],
                cwd=ROOT,
                env=env,
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        server = cls(f"http://127.0.0.1:{port}", proc, log)
        try:
            server._wait_healthy(argv[0], timeout_s)
        except BaseException:
            server.stop()
            raise
        return server

    def _wait_healthy(self, name: str, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while True:
            if self.process.poll() is not None:
                raise ServerDidNotStart(f"{name} exited with {self.process.returncode}:\n{self.output()}")
            try:
                if httpx.get(f"{self.url}/healthz", timeout=2).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                raise ServerDidNotStart(f"{name} did not answer within {timeout_s:g} s:\n{self.output()}")
            time.sleep(0.1)

    def output(self) -> str:
        return self.log.read_text(errors="replace")[-20_000:]

    def stop(self) -> None:
        """SIGINT, as Ctrl-C would; killed if it has not stopped within 30 s."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
            try:
                self.process.wait(30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


@contextlib.contextmanager
def server_process(
    argv: list[str], env: dict[str, str], log: Path, *, timeout_s: float = 60
) -> Iterator[ServerProcess]:
    """`ServerProcess.start`, stopped on the way out."""
    server = ServerProcess.start(argv, env, log, timeout_s=timeout_s)
    try:
        yield server
    finally:
        server.stop()


def start_api(env: dict[str, str], log: Path, *, workers: int = 1) -> ServerProcess:
    """`wovepaper serve` with this process's environment plus `env`; steady load from one address is no test of
    the rate limit (off unless `env` sets it), and no embedding model loads (seconds of CPU)."""
    full = {
        **os.environ,
        "WOVEPAPER_RATE_LIMITS": "off",
        **env,
        "WOVEPAPER_SEMANTIC_SEARCH": "false",
        "PYTHONUNBUFFERED": "1",
    }
    return ServerProcess.start([*wovepaper_command(), "serve", "--workers", str(workers)], full, log)
