"""What corrections cost: the pins' trigger on the ingest's link writes, the figures' refresh that leaves a NOT_ME
paper out of a source's works list, and a correction applied at once.

    .venv/bin/python -m bench.corrections --database-url postgresql://postgres@127.0.0.1:5432/wovepaper_bench_corr

The database is the caller's (empty or holding the demo data set): it is migrated and, without papers, the demo data
set is loaded (`--papers`, default 20,000). Every measured write runs in a transaction that is rolled back, so the
data stays as it was; each pair of variants is alternated, round after round, and their medians compared.

1. Links: an enrichment-shaped write moving N authorships to other researchers, with the pins' trigger and with it
   disabled inside the transaction; with no pins at all, then with 1,000 pins on other papers (none applies).
2. Figures: the refresh of the 200 researchers with most works, with the pins' clause and as the statement was.
3. A NOT_ME applied at once by the owner of the heaviest profile (record, lock, pin, links, figures), and the same
   request when it waits for an operator.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import time
from collections.abc import Awaitable, Callable
from typing import Any

import asyncpg

from db.migrate import migrate
from db.queries import figures
from db.queries.writes.corrections import CorrectionLimits, CorrectionRequest, submit_correction
from demo import load_demo

MOVE_LINKS = """
UPDATE authorships a SET researcher_id = s.other
FROM (SELECT paper_id, position, researcher_id,
             lead(researcher_id) OVER (ORDER BY paper_id, position) AS other
      FROM authorships WHERE researcher_id IS NOT NULL ORDER BY paper_id, position LIMIT $1) s
WHERE a.paper_id = s.paper_id AND a.position = s.position AND s.other IS NOT NULL AND s.other <> s.researcher_id
"""
PINS_ELSEWHERE = """
INSERT INTO viewers (id) VALUES ('bench-reader');
WITH c AS (
    INSERT INTO corrections (viewer_id, kind, status, fingerprint, researcher_ids)
    VALUES ('bench-reader', 'NOT_ME', 'APPLIED', 'bench', '{}') RETURNING id
)
INSERT INTO authorship_pins (paper_id, researcher_id, mine, correction_id)
SELECT a.paper_id, a.researcher_id, false, c.id
FROM (SELECT DISTINCT ON (paper_id) paper_id, researcher_id FROM authorships
      WHERE researcher_id IS NOT NULL ORDER BY paper_id DESC, position LIMIT $1) a, c
"""
DISABLE = "ALTER TABLE authorships DISABLE TRIGGER authorships_keep_corrections_update"
_REFRESH = figures.REFRESH_RESEARCHER_FIGURES
# The figures' clause that leaves out a source's listing of a paper pinned off the researcher (to time without it).
PINS_CLAUSE = _REFRESH[_REFRESH.index("    -- A source listing a paper") : _REFRESH.index("\n),\n-- What a DOI is")]


def summary(samples: list[float]) -> dict[str, float]:
    s = sorted(samples)
    return {"median_ms": round(statistics.median(s) * 1000, 2), "min_ms": round(s[0] * 1000, 2), "n": len(s)}


async def rolled_back(conn: asyncpg.Connection, setup: str | None, work: Callable[[], Awaitable[Any]]) -> float:
    tx = conn.transaction()
    await tx.start()
    try:
        if setup is not None:
            await conn.execute(setup)
        started = time.perf_counter()
        await work()
        return time.perf_counter() - started
    finally:
        await tx.rollback()


async def alternate(
    conn: asyncpg.Connection, rounds: int, variants: dict[str, tuple[str | None, Callable[[], Awaitable[Any]]]]
) -> dict[str, dict[str, float]]:
    times: dict[str, list[float]] = {name: [] for name in variants}
    for _ in range(rounds):
        for name, (setup, work) in variants.items():
            times[name].append(await rolled_back(conn, setup, work))
    return {name: summary(samples) for name, samples in times.items()}


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--database-url", required=True)
    parser.add_argument("--papers", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--links", type=int, default=20_000)
    args = parser.parse_args()
    conn = await asyncpg.connect(args.database_url)
    try:
        await migrate(conn)
        if not await conn.fetchval("SELECT EXISTS (SELECT 1 FROM papers)"):
            await load_demo(conn, papers=args.papers)
        await conn.execute("ANALYZE")
        results: dict[str, Any] = {"papers": await conn.fetchval("SELECT count(*) FROM papers")}

        async def move() -> None:
            await conn.execute(MOVE_LINKS, args.links)

        async def move_without_trigger() -> None:
            await conn.execute(DISABLE)
            await conn.execute(MOVE_LINKS, args.links)

        pins = PINS_ELSEWHERE.replace("$1", "1000")
        results["links"] = await alternate(
            conn,
            args.rounds,
            {
                "trigger, no pins": (None, move),
                "no trigger": (None, move_without_trigger),
                "trigger, 1,000 pins elsewhere": (pins, move),
            },
        )

        heavy = [
            r[0]
            for r in await conn.fetch(
                "SELECT researcher_id FROM researcher_works GROUP BY 1 ORDER BY count(*) DESC, 1 LIMIT 200"
            )
        ]
        before = figures.REFRESH_RESEARCHER_FIGURES.replace(PINS_CLAUSE, "")
        some = figures._SOME_RESEARCHERS  # the ids clause the refresh itself uses

        async def refresh_now() -> None:
            await conn.fetch(figures.REFRESH_RESEARCHER_FIGURES.format(ids=some), heavy)

        async def refresh_before() -> None:
            await conn.fetch(before.format(ids=some), heavy)

        # Changed figures are written: make every refresh write the same rows (all stale), then time it.
        stale = "UPDATE researchers SET h_index = -1 WHERE id IN (" + ",".join(map(str, heavy)) + ")"
        results["figures_200_heaviest"] = await alternate(
            conn, args.rounds, {"with the pins' clause": (stale, refresh_now), "as before": (stale, refresh_before)}
        )

        busiest = await conn.fetchrow("SELECT id, paper_count FROM researchers ORDER BY paper_count DESC, id LIMIT 1")
        paper = await conn.fetchval(
            "SELECT paper_id FROM authorships WHERE researcher_id = $1 ORDER BY paper_id LIMIT 1", busiest["id"]
        )
        owned = f"""
            INSERT INTO viewers (id) VALUES ('bench-owner'), ('bench-stranger');
            WITH c AS (INSERT INTO corrections (viewer_id, kind, status, fingerprint, researcher_ids)
                       VALUES ('bench-owner', 'CLAIM', 'APPLIED', 'CLAIM', '{{{busiest["id"]}}}') RETURNING id)
            INSERT INTO researcher_owners (researcher_id, viewer_id, correction_id)
            SELECT {busiest["id"]}, 'bench-owner', id FROM c;
        """
        request = CorrectionRequest("NOT_ME", "bench", (busiest["id"],), (paper,))
        limits = CorrectionLimits(20, 50)

        async def not_me(viewer: str) -> None:
            done = await submit_correction(conn, viewer, request, orcid=None, limits=limits)
            assert done.correction is not None

        results["not_me"] = {"researcher_papers": busiest["paper_count"]} | await alternate(
            conn,
            args.rounds,
            {
                "applied at once (owner)": (owned, lambda: not_me("bench-owner")),
                "pending (not the owner)": (owned, lambda: not_me("bench-stranger")),
            },
        )
        print(json.dumps(results, indent=2))
    finally:
        await conn.close()


if __name__ == "__main__":
    asyncio.run(main())
