"""`wovepaper demo` run again over a database with applied corrections (its upserts match every author afresh):
every correction holds."""

from __future__ import annotations

from typing import Any

import asyncpg

from db.migrate import migrate
from db.queries.writes.corrections import CorrectionLimits, CorrectionRequest, decide_correction, submit_correction
from demo import load_demo

PAPERS, SEED = 300, 5


async def correct(conn: asyncpg.Connection, request: CorrectionRequest) -> int | None:
    """Asked by a reader who owns nothing, approved by an operator; the profile it made or kept, if any."""
    submitted = await submit_correction(conn, "reader-1", request, orcid=None, limits=CorrectionLimits(100, 100))
    assert submitted.correction is not None
    decided = await decide_correction(conn, submitted.correction.id, approve=True, operator="test")
    assert decided.correction.status == "APPLIED"
    return decided.correction.new_researcher_id


async def links(conn: asyncpg.Connection, paper_id: int) -> list[int | None]:
    return [
        r[0]
        for r in await conn.fetch(
            "SELECT researcher_id FROM authorships WHERE paper_id = $1 ORDER BY position", paper_id
        )
    ]


async def test_loading_the_demo_again_keeps_every_correction(make_database: Any) -> None:
    conn = await asyncpg.connect(await make_database("corrections_demo"))
    try:
        await migrate(conn)
        await load_demo(conn, papers=PAPERS, seed=SEED)
        # The busiest researcher: one paper is not theirs, two are another person's.
        busy = await conn.fetchrow("SELECT id, paper_count FROM researchers ORDER BY paper_count DESC, id LIMIT 1")
        theirs = [
            r[0]
            for r in await conn.fetch(
                "SELECT DISTINCT paper_id FROM authorships WHERE researcher_id = $1 ORDER BY 1 LIMIT 3", busy["id"]
            )
        ]
        not_mine, *split_off = theirs
        await correct(conn, CorrectionRequest("NOT_ME", "n", (busy["id"],), (not_mine,)))
        other = await correct(conn, CorrectionRequest("SPLIT", "s", (busy["id"],), tuple(split_off)))
        # An author the demo links to one researcher is another's (IS_ME).
        moved = await conn.fetchrow(
            """SELECT a.paper_id, a.position, a.name, a.researcher_id FROM authorships a
               WHERE a.researcher_id IS NOT NULL AND a.researcher_id <> $1 AND a.paper_id <> ALL($2::bigint[])
               ORDER BY a.paper_id, a.position LIMIT 1""",
            busy["id"],
            theirs,
        )
        claimant = await conn.fetchval(
            "SELECT id FROM researchers WHERE id NOT IN ($1, $2) AND paper_count > 0 ORDER BY id LIMIT 1",
            busy["id"],
            moved["researcher_id"],
        )
        await correct(
            conn, CorrectionRequest("IS_ME", "i", (claimant,), (moved["paper_id"],), moved["position"], moved["name"])
        )
        # Two profiles of one person (neither of the above).
        pair = [
            r[0]
            for r in await conn.fetch(
                "SELECT id FROM researchers WHERE id NOT IN ($1, $2, $3, $4) AND s2_author_id IS NOT NULL"
                " AND paper_count > 0 ORDER BY id LIMIT 2",
                busy["id"],
                other,
                claimant,
                moved["researcher_id"],
            )
        ]
        survivor = await correct(conn, CorrectionRequest("MERGE", "m", tuple(pair)))
        absorbed = (set(pair) - {survivor}).pop()
        absorbed_papers = [
            r[0]
            for r in await conn.fetch("SELECT DISTINCT paper_id FROM authorships WHERE researcher_id = $1", survivor)
        ]

        before = {pid: await links(conn, pid) for pid in {not_mine, *split_off, moved["paper_id"], *absorbed_papers}}
        researchers = await conn.fetchval("SELECT count(*) FROM researchers")

        report = await load_demo(conn, papers=PAPERS, seed=SEED)  # the upserts, over the existing rows
        assert report.papers == PAPERS

        assert {pid: await links(conn, pid) for pid in before} == before
        assert busy["id"] not in await links(conn, not_mine)
        for pid in split_off:
            assert other in await links(conn, pid) and busy["id"] not in await links(conn, pid)
        assert (await links(conn, moved["paper_id"]))[moved["position"] - 1] == claimant
        assert await conn.fetchval("SELECT count(*) FROM researchers") == researchers
        assert not await conn.fetchval("SELECT EXISTS (SELECT 1 FROM researchers WHERE id = $1)", absorbed)
        conflicts = await conn.fetchval("SELECT sum(conflicts) FROM corrections")
        assert conflicts >= 1 + len(split_off) + 1  # the demo put each link back once, and was kept from it
    finally:
        await conn.close()
