"""An API server as a real process on a free port, for tests that talk to it over HTTP."""

from __future__ import annotations

import contextlib
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

import localservers

ROOT = Path(__file__).resolve().parent.parent


def wovepaper_command() -> list[str]:
    """The console script when the project is installed (as `make test` does), else the same entry point."""
    script = shutil.which("wovepaper", path=str(Path(sys.executable).parent))
    return [script] if script else [sys.executable, "-m", "cli"]


@dataclass
class ServerProcess:
    base: str
    process: subprocess.Popen[bytes]
    log: Path


@contextlib.contextmanager
def server_process(
    argv: list[str], env: dict[str, str], log: Path, *, timeout_s: float = 60
) -> Iterator[ServerProcess]:
    """Runs `argv` plus `--host 127.0.0.1 --port <free port>`, output to `log`; yields once /healthz answers and
    stops it with SIGINT (as Ctrl-C would) on the way out. A server that exits or stays silent fails the test."""
    port = localservers.free_port()
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [*argv, "--host", "127.0.0.1", "--port", str(port)],
            cwd=ROOT,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + timeout_s
        while True:
            if proc.poll() is not None:
                pytest.fail(f"{argv[0]} exited with {proc.returncode}:\n{log.read_text()}")
            try:
                if httpx.get(f"{base}/healthz", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                pytest.fail(f"{argv[0]} did not answer within {timeout_s:g} s:\n{log.read_text()}")
            time.sleep(0.1)
        yield ServerProcess(base, proc, log)
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
