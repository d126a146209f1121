"""The demo database served by `wovepaper serve` in its own process, for the fuzzing and abuse drills."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest

from tests.server_process import server_process, wovepaper_command


@pytest.fixture(scope="session")
def served_demo(demo_database_url: str, redis_url: str, cache_namespace: str, tmp_path_factory: Any) -> Iterator[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("WOVEPAPER_")}
    env |= {
        "DATABASE_URL": demo_database_url,
        "REDIS_URL": redis_url,
        "WOVEPAPER_CACHE_NAMESPACE": cache_namespace,
        "WOVEPAPER_SEMANTIC_PRELOAD": "false",
        # Hundreds of requests from one address: the drill is about answers, not the anonymous budget.
        "WOVEPAPER_RATE_LIMITS": "off",
    }
    log = tmp_path_factory.mktemp("served-demo") / "serve.log"
    with server_process([*wovepaper_command(), "serve"], env, log) as server:
        yield server.url
