"""bench/truth.py: the traffic benchmark's verdict on whether the answers it received were true when given.

The ingest benchmark's "0 wrong answers" is only worth what this check catches: an answer older than a change
committed well before it was asked for is wrong, the latest state is right, and what cannot be judged is not
counted as right.
"""

from __future__ import annotations

from datetime import timedelta

import asyncpg

from bench import truth
from bench.site_mix import Seen
from db.migrate import migrate
from demo import load_demo


async def test_stale_answers_are_wrong_current_ones_right_and_the_undecidable_unchecked(make_database) -> None:
    dsn = await make_database("bench_truth")
    conn = await asyncpg.connect(dsn)
    try:
        await migrate(conn)
        await load_demo(conn, papers=200, seed=7)
        paper = await conn.fetchrow("SELECT arxiv_id, modified_at FROM papers ORDER BY id LIMIT 1")
        changed = paper["modified_at"]
        before = (changed - timedelta(hours=1)).isoformat()
        now = changed.isoformat()
        when = changed.timestamp()
        seen = [
            Seen("PaperPage", "paper", paper["arxiv_id"], now, when + 100, False),  # the latest state
            Seen("PaperPage", "paper", paper["arxiv_id"], before, when + 10, False),  # stale, asked 10 s after
            Seen("Crawler", "paper", paper["arxiv_id"], before, when + 10, True),  # a 304 confirming a stale copy
            Seen("PaperPage", "paper", paper["arxiv_id"], before, when + 1, False),  # within the grace
            Seen("PaperPage", "paper", paper["arxiv_id"], before, when - 60, False),  # asked before the change
            Seen("PaperPage", "paper", "9999.99999", now, when, False),  # not in the database
        ]
        newest = await conn.fetch(
            "SELECT arxiv_id, published FROM papers WHERE NOT withdrawn ORDER BY published DESC LIMIT 24"
        )
        latest_ids = [r["arxiv_id"] for r in newest]
        oldest = newest[-1]["published"].isoformat()
        far_later = (await conn.fetchval("SELECT max(modified_at) FROM papers")).timestamp() + 60
        latest = [
            (far_later, latest_ids, oldest),  # complete
            (far_later, latest_ids[1:], oldest),  # the newest paper missing
        ]
        verdicts = await truth.check(conn, seen, latest, grace_s=5.0, allowance_s=0.0)
    finally:
        await conn.close()
    page = verdicts["PaperPage"]
    assert (page.checked, page.wrong, page.unchecked) == (2, 1, 3)
    assert "answered the state of" in page.examples[0] and page.basis in ("commit time", "modified_at + 0 s")
    crawler = verdicts["Crawler"]
    assert (crawler.checked, crawler.wrong) == (1, 1) and "a 304 confirmed" in crawler.examples[0]
    latest_verdict = verdicts["LatestPapers"]
    assert (latest_verdict.checked, latest_verdict.wrong) == (2, 1)
