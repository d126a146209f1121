"""Graceful shutdown: on SIGTERM, first say "not ready", then stop.

A load balancer stops sending traffic to an instance once its readiness probe fails, which takes a probe
period or two. So on SIGTERM the process keeps serving for `drain_s` seconds while `/readyz` answers 503
(`draining`), and only then hands the signal to uvicorn, which stops accepting connections, lets in-flight
requests finish (at most its `timeout_graceful_shutdown`) and runs the lifespan shutdown. SIGINT (Ctrl-C)
stops at once, as before.
"""

from __future__ import annotations

import asyncio
import logging
import signal
import threading
from collections.abc import Callable
from types import FrameType
from typing import Any

log = logging.getLogger("wovepaper.lifecycle")

_draining = threading.Event()


def draining() -> bool:
    return _draining.is_set()


def install_drain(drain_s: float) -> Callable[[], None]:
    """Wrap the current SIGTERM handler (uvicorn's) so it runs `drain_s` seconds after the signal, with
    `draining()` true meanwhile. Returns the function that restores the previous handler. Does nothing
    outside the main thread (signals are delivered there only) or when `drain_s` is 0."""
    if drain_s <= 0 or threading.current_thread() is not threading.main_thread():
        return lambda: None
    loop = asyncio.get_running_loop()
    previous = signal.getsignal(signal.SIGTERM)

    def forward(sig: int, frame: FrameType | None) -> None:
        if callable(previous):
            previous(sig, frame)
        elif previous == signal.SIG_DFL:
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            signal.raise_signal(signal.SIGTERM)

    def on_term(sig: int, frame: FrameType | None) -> None:
        if _draining.is_set():
            forward(sig, frame)  # a second SIGTERM: stop now
            return
        _draining.set()
        log.info("SIGTERM: draining for %gs (readiness fails), then shutting down", drain_s)
        loop.call_soon_threadsafe(_later, loop, drain_s, forward, sig)

    signal.signal(signal.SIGTERM, on_term)

    def restore() -> None:
        if signal.getsignal(signal.SIGTERM) is on_term:
            signal.signal(signal.SIGTERM, previous)

    return restore


def _later(loop: asyncio.AbstractEventLoop, delay: float, forward: Callable[..., Any], sig: int) -> None:
    loop.call_later(delay, forward, sig, None)


def reset() -> None:
    """For tests that build several apps in one process."""
    _draining.clear()
