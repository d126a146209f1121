"""The fault drills in the suite: short phases, loopback only, each well under a minute. Their assertions are
about answers (right data, or a coded and retryable 503), never about how fast they came; bench/drills.py runs
the same drills longer and prints the numbers."""

from __future__ import annotations

import signal

import pytest

from tests.drills.scenarios import load_small_demo, postgres_drill, redis_drill, shutdown_drill

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
async def drill_db(make_database) -> str:
    dsn = await make_database("drill")
    await load_small_demo(dsn)
    return dsn


async def test_redis_frozen_killed_and_restarted_under_load(drill_db, tmp_path) -> None:
    result = await redis_drill(drill_db, tmp_path, phase_s=2.0, concurrency=6, reset_s=1.0)
    print(result.summary, result.facts)
    assert not result.bad, result.bad[:5]  # every request answered with the right data, whatever Redis did
    assert set(result.summary) >= {"redis up", "redis frozen", "redis back", "redis killed", "redis restarted"}
    assert all(s["requests"] > 0 for s in result.summary.values())
    facts = result.facts
    assert facts["cache_back_after_s"] is not None  # the cache serves again after SIGCONT
    assert facts["cache_back_after_restart_s"] is not None
    assert facts["invalidation_deferred"] and facts["invalidation_delivered"]
    assert facts["name_after_invalidation"] == facts["stale_name_before"] + " (renamed)"


async def test_postgres_restarted_stopped_and_terminated_under_load(tmp_path) -> None:
    result = await postgres_drill(tmp_path, phase_s=2.0, concurrency=6)
    print(result.summary, result.facts)
    assert not result.bad, result.bad[:5]  # data or SERVICE_UNAVAILABLE/OVERLOADED 503 with Retry-After
    facts = result.facts
    assert facts["readyz_down_while_stopped"]
    assert facts["ready_after_restart_s"] is not None and facts["ready_after_start_s"] is not None
    assert facts["ready_at_end"]
    assert facts["internal_errors_logged"] == 0
    assert result.summary["after terminations"]["outcomes"].get("ok", 0) > 0


async def test_sigterm_drains_then_finishes_in_flight_requests(drill_db, tmp_path) -> None:
    result = await shutdown_drill(drill_db, tmp_path, drain_s=1.5, grace_s=10.0)
    print(result.summary, result.facts)
    assert not result.bad, result.bad[:5]  # before and during the drain, every request answered
    facts = result.facts
    assert facts["readyz_draining_after_s"] is not None
    assert facts["graphql_while_draining"] == 200
    # uvicorn re-raises the SIGTERM it handled once it has shut down: killed by it, after a clean shutdown.
    assert facts["exit_code"] in (0, -signal.SIGTERM) and facts["shutdown_complete"]
    assert facts["exited_after_s"] is not None
    assert facts["exited_after_s"] <= 1.5 + 10.0 + 5
