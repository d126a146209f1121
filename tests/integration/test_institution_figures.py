"""Institutions' stored figures (migration 0027) equal their live definitions after any sequence of writes.

A small world takes random writes through the project's write functions (papers and their author lists, matches,
withdrawals, citations and researchers' figures, merges) and direct SQL (category and withdrawal edits, deletes of
papers, researchers, links and affiliations), several to a transaction; after each commit every institution's
stored figures are compared with the live computation. Then two transactions write affiliations of one institution
at once: both commit, and the counts are right.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncIterator
from datetime import UTC, datetime

import asyncpg
import pytest

from db.migrate import migrate
from db.queries.figures import refresh_figures
from db.queries.ingest_state import tombstone_papers
from db.queries.institution_figures import LIVE_STORED_COUNTS, check_institution_figures, rebuild
from db.queries.merges import merge_researchers
from db.queries.writes.citations import update_citations
from db.queries.writes.institutions import upsert_institutions
from db.queries.writes.matches import apply_authorship_matches
from db.queries.writes.papers import upsert_papers
from db.queries.writes.researchers import upsert_researchers
from db.records import (
    AuthorRecord,
    AuthorshipMatch,
    CitationRecord,
    InstitutionRecord,
    PaperRecord,
    ResearcherRecord,
    Touched,
)

T = datetime(2022, 5, 1, tzinfo=UTC)
RORS = ["05gq02987", "00f54p054", "01an7q238"]
CATEGORIES = ["hep-th", "hep-ph", "gr-qc", "math.AG", "cs.LG"]
NAMES = ["Ada One", "Bo Two", "Cy Three", "Di Four", "Ed Five", "Fa Six", "Gu Seven"]


class World:
    def __init__(self, conn: asyncpg.Connection, rng: random.Random) -> None:
        self.conn = conn
        self.rng = rng
        self.papers: dict[str, int] = {}  # arxiv id -> version written
        self.keys = [f"k{i}" for i in range(8)]
        self.rids: dict[str, int] = {}
        self.iids: dict[str, int] = {}
        self.next_paper = 0

    def record(self, arxiv_id: str, version: int) -> PaperRecord:
        rng = self.rng
        names = rng.sample(NAMES, rng.randint(1, 4))
        cats = rng.sample(CATEGORIES, rng.randint(1, 3))
        return PaperRecord(
            arxiv_id, version, f"P {arxiv_id}", "", cats, T, T, [AuthorRecord(i, n) for i, n in enumerate(names, 1)]
        )

    async def new_researchers(self) -> None:
        self.rids.update(
            await upsert_researchers(self.conn, [ResearcherRecord(f"R {k}", s2_author_id=k) for k in self.keys])
        )

    async def step(self, touched: Touched) -> str:
        rng, conn = self.rng, self.conn
        live = list(self.papers)
        op = rng.choice(
            [
                "new",
                "new",
                "reauthor",
                "match",
                "match",
                "match",
                "withdraw",
                "sql_cats",
                "sql_unwithdraw",
                "cite",
                "merge",
                "del_researcher",
                "del_paper",
                "del_span",
                "add_span",
                "del_aff",
                "unlink",
                "new_researchers",
            ]
        )
        if op == "new_researchers" and len(self.rids) < 16:
            self.keys += [f"k{len(self.keys) + i}" for i in range(2)]
            await self.new_researchers()
            return op
        if op == "new" or not live:
            arxiv_id = f"2201.{self.next_paper:05d}"
            self.next_paper += 1
            self.papers[arxiv_id] = 1
            await upsert_papers(conn, [self.record(arxiv_id, 1)], touched=touched)
            return "new"
        arxiv_id = rng.choice(live)
        pid = await conn.fetchval("SELECT id FROM papers WHERE arxiv_id = $1", arxiv_id)
        if op == "reauthor":
            self.papers[arxiv_id] += 1
            await upsert_papers(conn, [self.record(arxiv_id, self.papers[arxiv_id])], touched=touched)
        elif op == "match":
            n = await conn.fetchval("SELECT count(*) FROM authorships WHERE paper_id = $1", pid)
            if n:
                matches = [
                    AuthorshipMatch(
                        arxiv_id,
                        rng.randint(1, n),
                        rng.choice([*self.keys, None]),
                        rng.sample(RORS, rng.randint(0, 2)),
                    )
                    for _ in range(rng.randint(1, 3))
                ]
                await apply_authorship_matches(conn, matches, self.rids, self.iids, touched=touched)
        elif op == "withdraw":
            await tombstone_papers(conn, [arxiv_id])
        elif op == "sql_cats":
            cats = rng.sample(CATEGORIES, rng.randint(1, 3))
            if rng.random() < 0.2:
                cats = cats + cats[:1]  # a category listed twice counts twice, as FIELDS_OF counts it
            primary = rng.choice([*cats, "astro-ph"])  # a primary outside the list counts as no primary
            await conn.execute(
                "UPDATE papers SET categories = $2, primary_category = $3 WHERE id = $1", pid, cats, primary
            )
        elif op == "sql_unwithdraw":
            await conn.execute("UPDATE papers SET withdrawn = NOT withdrawn WHERE id = $1", pid)
        elif op == "cite":
            await update_citations(conn, [CitationRecord(arxiv_id, rng.randint(0, 40), "s2")], touched=touched)
            rows = await conn.fetch("SELECT researcher_id FROM authorships WHERE researcher_id IS NOT NULL")
            touched.researchers.update(r["researcher_id"] for r in rows)
            await refresh_figures(conn, touched)  # ranking keys move mid-transaction; the fold runs here too
        elif op == "merge" and len(self.rids) >= 2:
            a, b = rng.sample(sorted(self.rids.values()), 2)
            await merge_researchers(conn, a, b, touched)
            self.rids = {k: v for k, v in self.rids.items() if v != a}
        elif op == "del_researcher" and self.rids:
            victim = rng.choice(sorted(self.rids.values()))
            await conn.execute("DELETE FROM researchers WHERE id = $1", victim)
            self.rids = {k: v for k, v in self.rids.items() if v != victim}
        elif op == "del_paper":
            await conn.execute("DELETE FROM papers WHERE id = $1", pid)
            del self.papers[arxiv_id]
        elif op == "del_span":
            await conn.execute(
                "DELETE FROM researcher_institutions WHERE ctid = (SELECT ctid FROM researcher_institutions"
                " ORDER BY researcher_id, institution_id OFFSET $1 LIMIT 1)",
                rng.randint(0, 5),
            )
        elif op == "add_span" and self.rids:
            await conn.execute(
                "INSERT INTO researcher_institutions (researcher_id, institution_id) VALUES ($1, $2)"
                " ON CONFLICT DO NOTHING",
                rng.choice(sorted(self.rids.values())),
                rng.choice(sorted(self.iids.values())),
            )
        elif op == "del_aff":
            await conn.execute(
                "DELETE FROM authorship_institutions WHERE ctid = (SELECT ctid FROM authorship_institutions"
                " WHERE paper_id = $1 ORDER BY position LIMIT 1)",
                pid,
            )
        elif op == "unlink":
            await conn.execute("UPDATE authorships SET researcher_id = NULL WHERE paper_id = $1 AND position = 1", pid)
        return op


@pytest.fixture
async def world(make_database) -> AsyncIterator[tuple[asyncpg.Connection, str]]:
    dsn = await make_database(f"instfig_{random.randrange(10**9)}")
    conn = await asyncpg.connect(dsn)
    await migrate(conn)
    yield conn, dsn
    await conn.close()


async def _assert_true(conn: asyncpg.Connection, context: str) -> None:
    mismatches = await check_institution_figures(conn)
    assert mismatches == [], f"{context}: {mismatches[:3]}"


@pytest.mark.parametrize("seed", [1, 2, 3])
async def test_stored_figures_equal_live_ones_after_random_writes(
    world: tuple[asyncpg.Connection, str], seed: int
) -> None:
    conn, _ = world
    w = World(conn, random.Random(seed))
    async with conn.transaction():
        w.iids = await upsert_institutions(conn, [InstitutionRecord(r, f"I {r}") for r in RORS])
        await w.new_researchers()
    history: list[str] = []
    for round_ in range(40):
        touched = Touched()
        async with conn.transaction():
            for _ in range(w.rng.randint(1, 4)):
                history.append(await w.step(touched))
            if w.rng.random() < 0.7:
                await refresh_figures(conn, touched)
        await _assert_true(conn, f"seed {seed} round {round_} after {history[-4:]}")
        # The stored institution counts the write refreshed are what they always were.
        if touched.institutions:
            live = {r["id"]: (r["paper_count"], r["researcher_count"]) for r in await conn.fetch(LIVE_STORED_COUNTS)}
            async with conn.transaction():
                await refresh_figures(conn, Touched(institutions=set(w.iids.values())))
            stored = {
                r["id"]: (r["paper_count"], r["researcher_count"])
                for r in await conn.fetch("SELECT id, paper_count, researcher_count FROM institutions")
            }
            assert stored == live
    # A rolled-back transaction leaves nothing behind.
    try:
        async with conn.transaction():
            await w.step(Touched())
            await w.step(Touched())
            raise RuntimeError("roll back")
    except RuntimeError:
        pass
    await _assert_true(conn, "after a rollback")
    # The rebuild gives the same figures, and a TRUNCATE empties them.
    await rebuild(conn)
    await _assert_true(conn, "after the rebuild")
    await conn.execute("TRUNCATE papers CASCADE")
    await _assert_true(conn, "after a TRUNCATE")
    assert await conn.fetchval("SELECT count(*) FROM institution_paper_refs") == 0


async def test_two_transactions_writing_one_institution_both_commit(world: tuple[asyncpg.Connection, str]) -> None:
    conn, dsn = world
    async with conn.transaction():
        iids = await upsert_institutions(conn, [InstitutionRecord(RORS[0], "I")])
        rids = await upsert_researchers(conn, [ResearcherRecord(f"R {k}", s2_author_id=k) for k in ("a", "b")])
        await upsert_papers(
            conn,
            [
                PaperRecord(
                    f"2202.0000{k}",
                    1,
                    "P",
                    "",
                    ["hep-th", "gr-qc"],
                    T,
                    T,
                    [AuthorRecord(1, "R a"), AuthorRecord(2, "R b")],
                )
                for k in range(4)
            ],
        )
    first, second = await asyncpg.connect(dsn), await asyncpg.connect(dsn)
    try:
        t1, t2 = first.transaction(), second.transaction()
        await t1.start()
        await t2.start()
        # Both write the same institution's papers, fields and counts before either commits (different researchers:
        # their researcher_institutions rows are the write path's own, taken as it writes).
        await apply_authorship_matches(
            first,
            [AuthorshipMatch("2202.00000", 1, "a", [RORS[0]]), AuthorshipMatch("2202.00001", 1, "a", [RORS[0]])],
            rids,
            iids,
        )
        await apply_authorship_matches(
            second,
            [AuthorshipMatch("2202.00002", 2, "b", [RORS[0]]), AuthorshipMatch("2202.00003", 1, None, [RORS[0]])],
            rids,
            iids,
        )
        # Neither waits on the other until commit; both commit, whichever order they finish in.
        await asyncio.wait_for(asyncio.gather(t2.commit(), t1.commit()), timeout=20)
    finally:
        await first.close()
        await second.close()
    await _assert_true(conn, "after two concurrent writers")
    stats = await conn.fetchrow(
        "SELECT paper_count, member_count FROM institution_figures WHERE institution_id = $1", iids[RORS[0]]
    )
    assert (stats["paper_count"], stats["member_count"]) == (4, 2)
    fields = await conn.fetch(
        "SELECT category, papers, primary_papers FROM institution_fields WHERE institution_id = $1 ORDER BY category",
        iids[RORS[0]],
    )
    assert [tuple(r) for r in fields] == [("gr-qc", 4, 0), ("hep-th", 4, 4)]
