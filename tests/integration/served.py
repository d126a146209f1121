"""`wovepaper serve` as a real process on a free port, for tests that need a real server (and its event loop)."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

import localservices

ROOT = Path(__file__).resolve().parents[2]


def _serve_command() -> list[str]:
    # The console script when the project is installed (as `make test` does), else the same entry point.
    script = shutil.which("wovepaper", path=str(Path(sys.executable).parent))
    return [script] if script else [sys.executable, "-m", "cli"]


@contextlib.contextmanager
def serve_process(env_vars: dict[str, str], log: Path, *, must_exit_cleanly: bool = True) -> Iterator[str]:
    """The base URL of a server started with these variables (and no other WOVEPAPER_*); stopped on exit,
    killed when it does not stop (a worker stuck in a synchronous loop cannot)."""
    port = localservices.free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("WOVEPAPER_")}
    # As everywhere in the tests: no embedding model loading (seconds of CPU) in the server.
    env |= {"WOVEPAPER_SEMANTIC_PRELOAD": "false", **env_vars}
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [*_serve_command(), "serve", "--host", "127.0.0.1", "--port", str(port)],
            cwd=ROOT,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            if proc.poll() is not None:
                pytest.fail(f"`wovepaper serve` exited with {proc.returncode}:\n{log.read_text()}")
            try:
                if httpx.get(f"{base}/healthz", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                pytest.fail(f"`wovepaper serve` did not answer within 60 s:\n{log.read_text()}")
            time.sleep(0.1)
        yield base
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            must_exit_cleanly = False
    if must_exit_cleanly:
        assert proc.returncode == 0, log.read_text()
