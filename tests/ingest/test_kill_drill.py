"""Ingest killed: SIGKILL `wovepaper ingest arxiv` and `wovepaper ingest enrich` at random points, resume, and find
every row as an uninterrupted run wrote it. (A hundred kill points: bench/ingest_kill.py.)"""

from __future__ import annotations

import random
from pathlib import Path

import asyncpg

from tests.ingest.killdrill import Outcome, drill, summarize

SEED = 15
KILLS = 10


def test_ingest_killed_at_random_points_loses_duplicates_and_changes_nothing(
    conn: asyncpg.Connection, ingest_dsn: str, tmp_path: Path
) -> None:
    rng = random.Random(SEED)
    outcomes: list[Outcome] = []
    with drill(ingest_dsn, tmp_path) as d:
        d.record_reference()
        # The uninterrupted run wrote every table the drill compares.
        assert all(d.reference["enrich"][table] for table in ("papers", "researchers", "researcher_works"))
        assert all(d.reference["enrich"][table] for table in ("institutions", "ingest_progress"))
        # A kill point can come after the run has finished (a late request, a long delay): draw until there were
        # enough kills mid-run.
        points = d.kill_points(rng)
        while sum(o.killed for o in outcomes) < KILLS and len(outcomes) < 4 * KILLS:
            outcomes += d.kill_and_resume(next(points))
        log = d.tail()
    summary = summarize(outcomes)
    assert summary["killed_mid_run"] >= KILLS, summary
    assert set(summary["by_phase"]) == {"arxiv", "enrich"} and summary["while_writing"] >= 2, summary
    for o in outcomes:
        assert not o.diff, f"{o.point}: {o.diff.details[:10]}\n{log}"
    assert (summary["lost"], summary["duplicated"], summary["changed"]) == (0, 0, 0)
    assert summary["rows_compared"] > 0
