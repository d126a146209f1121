"""Time writes that touch a large institution: matches that link its authorships, then the figures' refresh.

    python -m bench.institution_writes --database-url postgresql://... [--rounds 10] [--matches 250]

WRITES to the database (use a throwaway copy). Each round is one transaction, as the enrichment writes one:
`apply_authorship_matches` over --matches authorships of papers of the institution with the most affiliation rows
(each given that institution, and every other round a second one too, so affiliations come and go), then
`refresh_figures` of what it touched, then commit. Prints each round's time and the median.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import time

import asyncpg

from db.queries.figures import MARK_MODIFIED, refresh_institution_figures, refresh_researcher_figures
from db.queries.writes.matches import apply_authorship_matches
from db.records import AuthorshipMatch, Touched

LARGEST = "SELECT institution_id FROM authorship_institutions GROUP BY 1 ORDER BY count(*) DESC LIMIT 1"
AUTHORSHIPS = """
SELECT p.arxiv_id, ai.position FROM authorship_institutions ai JOIN papers p ON p.id = ai.paper_id
WHERE ai.institution_id = $1 ORDER BY ai.paper_id, ai.position LIMIT $2
"""


async def run(dsn: str, rounds: int, matches: int, seed: int) -> None:
    conn = await asyncpg.connect(dsn)
    try:
        iid = await conn.fetchval(LARGEST)
        ror = await conn.fetchval("SELECT ror_id FROM institutions WHERE id = $1", iid)
        other = await conn.fetchval("SELECT ror_id FROM institutions WHERE id <> $1 ORDER BY id LIMIT 1", iid)
        iids = {r["ror_id"]: r["id"] for r in await conn.fetch("SELECT id, ror_id FROM institutions")}
        pool = await conn.fetch(AUTHORSHIPS, iid, matches * 20)
        rng = random.Random(seed)
        took = []
        for k in range(rounds):
            picked = rng.sample(list(pool), min(matches, len(pool)))
            rors = [ror, other] if k % 2 == 0 else [ror]
            batch = [AuthorshipMatch(r["arxiv_id"], r["position"], None, rors) for r in picked]
            t = time.perf_counter()
            touched = Touched()
            async with conn.transaction():
                await apply_authorship_matches(conn, batch, {}, iids, touched=touched)
                t_match = time.perf_counter()
                # refresh_figures, step by step: the researchers' part is not the institutions'.
                await refresh_researcher_figures(conn, sorted(touched.researchers))
                t_researchers = time.perf_counter()
                await refresh_institution_figures(conn, sorted(touched.institutions))
                t_refresh = time.perf_counter()
                for table, ids in (
                    ("papers", touched.papers),
                    ("researchers", touched.researchers),
                    ("institutions", touched.institutions),
                ):
                    if ids:
                        await conn.execute(MARK_MODIFIED[table], sorted(ids))
            took.append((time.perf_counter() - t) * 1000)
            print(
                f"round {k}: {took[-1]:.0f} ms: matches {(t_match - t) * 1000:.0f}, researchers' refresh"
                f" {(t_researchers - t_match) * 1000:.0f},"
                f" institutions' refresh {(t_refresh - t_researchers) * 1000:.0f},"
                f" rest and commit {(time.perf_counter() - t_refresh) * 1000:.0f}"
                f" ({len(touched.institutions)} institutions, {len(touched.researchers)} researchers touched)"
            )
        print(f"institution {iid}: median {statistics.median(took):.0f} ms per transaction of {matches} matches")
    finally:
        await conn.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--database-url", required=True)
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--matches", type=int, default=250)
    parser.add_argument("--seed", type=int, default=7)
    a = parser.parse_args()
    asyncio.run(run(a.database_url, a.rounds, a.matches, a.seed))


if __name__ == "__main__":
    main()
