"""Viewer feed benchmark: `viewer.feed` (and the personal RSS feed, the same statement) for readers following
many prolific researchers, a few quiet ones, or institutions.

    .venv/bin/python -m bench.viewer_feed --database-url postgresql://postgres@127.0.0.1:5432/wovepaper_bench_12
    .venv/bin/python -m bench.viewer_feed --database-url ... --calibrate   # where the two plans cross
    .venv/bin/python -m bench.viewer_feed --database-url ... --graphql     # the whole ViewerFeed operation

A population of 20,000 background readers (`--population`) is created once and kept, so that the follows tables
have statistics as on a site with readers. Readers measured, created for the run and deleted after it:
- prolific: the 1,000 researchers with most papers in the archive
- quiet: 20 researchers with 2 to 5 papers each
- institutions: the 5 institutions with most papers
- mixed: the 300 most prolific researchers and 2 of the biggest institutions
- `--follows R,I` (repeatable): R researchers with 3 papers or more and I institutions, the largest among them
(`--readers` picks which of the four above run, none with `--readers` alone).
For each: the first page (25 rows fetched for 24 shown, the statement the API runs:
resolvers.viewer.page_followed_papers, db/queries/feed.py) and a page 10 cursors deep, each beside the statement
the feed ran before migration 0028 (`_before`: walk or collect as the estimate says; the same rows, checked), and
the first page read by that statement each way whatever the estimate says (collect: the followed papers' ids,
then those papers; walk: newest papers first, kept when a followed author or institution is on them, the collected
set answering when the walk finds too few), each timed `--runs` times on a warm connection; median and p95 in ms,
and the way the estimate picked.
--calibrate: the same for families of readers following k researchers (prolific, modest, retired ones).
--graphql: ViewerFeed through the app in process, with its statement count.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import statistics
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import asyncpg
import httpx
import jwt

from db.filters import FEED_FILTERS, Clause, Fragment
from db.queries.papers import PaperRow, page_papers_scanning
from resolvers.viewer import FEED_SORT, page_followed_papers
from settings import Settings

ROOT = Path(__file__).resolve().parent.parent
ROWS = 25  # a page of 24 and the row that says there is a next one
SECRET = "bench-secret-of-at-least-thirty-two-bytes"
PREFIX = "bench-feed-"


def stats(samples: list[float]) -> dict[str, float]:
    s = sorted(samples)
    return {
        "p50_ms": round(statistics.median(s) * 1000, 2),
        "p95_ms": round(s[max(0, int(len(s) * 0.95) - 1)] * 1000, 2),
        "min_ms": round(s[0] * 1000, 2),
    }


async def timed(fn: Callable[[], Awaitable[Any]], runs: int) -> list[float]:
    await fn()  # prepared and cached before timing
    out = []
    for _ in range(runs):
        t0 = time.perf_counter()
        await fn()
        out.append(time.perf_counter() - t0)
    return out


async def make_reader(conn: asyncpg.Connection, name: str, researchers: str, institutions: str) -> str:
    """A reader following the researchers and institutions the two id queries return."""
    viewer = f"{PREFIX}{name}-{uuid.uuid4().hex[:6]}"
    async with conn.transaction():
        await conn.execute("INSERT INTO viewers (id) VALUES ($1)", viewer)
        await conn.execute(
            f"INSERT INTO follows (viewer_id, researcher_id) SELECT $1, id FROM ({researchers}) r", viewer
        )
        await conn.execute(
            f"INSERT INTO institution_follows (viewer_id, institution_id) SELECT $1, id FROM ({institutions}) i",
            viewer,
        )
    return viewer


POPULATION = "bench-pop-"


async def ensure_population(conn: asyncpg.Connection, readers: int) -> None:
    """Background readers following 1 to 30 random researchers each (a quarter also an institution), kept
    between runs: the follows tables' statistics as on a site with readers, which the plans depend on."""
    if await conn.fetchval("SELECT count(*) FROM viewers WHERE id LIKE $1", POPULATION + "%") >= readers:
        return
    async with conn.transaction():
        await conn.execute(
            "INSERT INTO viewers (id) SELECT $1 || g FROM generate_series(1, $2::int) g ON CONFLICT DO NOTHING",
            POPULATION,
            readers,
        )
        await conn.execute(
            """INSERT INTO follows (viewer_id, researcher_id, created_at)
               SELECT DISTINCT ON (v, r) $1 || v, r, now() - random() * interval '365 days'
               FROM (SELECT g AS v, 1 + floor(random() * (SELECT max(id) FROM researchers))::bigint AS r
                     FROM generate_series(1, $2::int) g, generate_series(1, (1 + floor(random() * 30))::int) k) s
               WHERE EXISTS (SELECT 1 FROM researchers WHERE id = s.r)
               ON CONFLICT DO NOTHING""",
            POPULATION,
            readers,
        )
        await conn.execute(
            """INSERT INTO institution_follows (viewer_id, institution_id)
               SELECT $1 || g, (SELECT id FROM institutions ORDER BY random() + g LIMIT 1)
               FROM generate_series(1, $2::int / 4) g ON CONFLICT DO NOTHING""",
            POPULATION,
            readers,
        )
    await conn.execute("ANALYZE viewers; ANALYZE follows; ANALYZE institution_follows")


NONE = "SELECT id FROM researchers WHERE false"
NO_INSTITUTIONS = "SELECT id FROM institutions WHERE false"
PROLIFIC = "SELECT id FROM researchers ORDER BY paper_count DESC, id LIMIT {k}"
READERS = {
    "prolific": (PROLIFIC.format(k=1000), NO_INSTITUTIONS),
    "quiet": ("SELECT id FROM researchers WHERE paper_count BETWEEN 2 AND 5 ORDER BY id LIMIT 20", NO_INSTITUTIONS),
    "institutions": (NONE, "SELECT id FROM institutions ORDER BY paper_count DESC, id LIMIT 5"),
    "mixed": (PROLIFIC.format(k=300), "SELECT id FROM institutions ORDER BY paper_count DESC, id LIMIT 2"),
}
# --follows R,I: a reader as the site's accumulate them, following R researchers with a few papers or more and I
# institutions, the largest among them (a fixed pseudo-random pick, the same on every run and database).
SOME_RESEARCHERS = "SELECT id FROM researchers WHERE paper_count >= 3 ORDER BY md5(id::text) LIMIT {k}"
SOME_INSTITUTIONS = """(SELECT id FROM institutions ORDER BY paper_count DESC, id LIMIT least({k}, 1))
    UNION (SELECT id FROM institutions WHERE paper_count > 0 ORDER BY md5(id::text) LIMIT greatest({k} - 1, 0))"""


def follow_mix(spec: str) -> tuple[str, tuple[str, str]]:
    researchers, institutions = (int(n) for n in spec.split(","))
    name = f"r{researchers}+i{institutions}"
    return name, (SOME_RESEARCHERS.format(k=researchers), SOME_INSTITUTIONS.format(k=institutions))


async def followed_papers(conn: asyncpg.Connection, viewer: str) -> tuple[int, int, bool]:
    """(M: the followed entities' stored paper counts summed, distinct papers, whether the walk is tried)."""
    m = await conn.fetchval(f"SELECT {FEED_FILTERS['followed_count'].sql}", viewer)
    distinct = await conn.fetchval(f"SELECT count(*) FROM papers p WHERE {FEED_FILTERS['followed'].sql}", viewer)
    return int(m), int(distinct), m * m > await archive_size(conn) * ROWS


async def archive_size(conn: asyncpg.Connection) -> float:
    return float(await conn.fetchval("SELECT greatest(reltuples, 1) FROM pg_class WHERE oid = 'papers'::regclass"))


async def forced(conn: asyncpg.Connection, viewer: str, plan: str) -> Callable[[], Awaitable[list[PaperRow]]]:
    """The page read one way whatever the estimate says: `collect` (M taken as 0) or `walk` (M taken as at least
    the threshold, so the walk is tried with the cap its real M gives, and the collected set answers when the walk
    finds too few)."""
    m, _, _ = await followed_papers(conn, viewer)
    threshold = (await archive_size(conn) * ROWS) ** 0.5
    estimate = "0" if plan == "collect" else repr(max(float(m), threshold * 1.01))
    return lambda: page_papers_scanning(
        conn,
        matches=Clause(Fragment(estimate, 0), ()),
        scan=Clause(FEED_FILTERS["followed_scan"], (viewer,)),
        collect=Clause(FEED_FILTERS["followed"], (viewer,)),
        clauses=[],
        sort=FEED_SORT,
        limit=ROWS,
    )


async def deep_cursor(conn: asyncpg.Connection, viewer: str, pages: int) -> Clause | None:
    after = None
    for _ in range(pages):
        rows = await page_followed_papers(conn, viewer, [], after, limit=ROWS)
        if len(rows) < ROWS:
            return None
        after = FEED_SORT.after_clause(FEED_SORT.cursor_key(rows[ROWS - 2]))
    return after


def walk_or_collect(conn: asyncpg.Connection, viewer: str, after: Clause | None) -> Awaitable[list[PaperRow]]:
    """The statement the feed ran before migration 0028's listings: walk or collect, as the estimate says."""
    return page_papers_scanning(
        conn,
        matches=Clause(FEED_FILTERS["followed_count"], (viewer,)),
        scan=Clause(FEED_FILTERS["followed_scan"], (viewer,)),
        collect=Clause(FEED_FILTERS["followed"], (viewer,)),
        clauses=[after] if after is not None else [],
        sort=FEED_SORT,
        limit=ROWS,
    )


async def measure_reader(conn: asyncpg.Connection, name: str, viewer: str, runs: int) -> dict[str, Any]:
    m, distinct, scans = await followed_papers(conn, viewer)
    follows = await conn.fetchval(
        "SELECT (SELECT count(*) FROM follows WHERE viewer_id = $1) + "
        "(SELECT count(*) FROM institution_follows WHERE viewer_id = $1)",
        viewer,
    )
    out: dict[str, Any] = {"reader": name, "follows": follows, "M": m, "papers": distinct}
    out["plan_before"] = "walk" if scans else "collect"
    out["first_page"] = stats(await timed(lambda: page_followed_papers(conn, viewer, [], None, limit=ROWS), runs))
    out["first_page_before"] = stats(await timed(lambda: walk_or_collect(conn, viewer, None), runs))
    first = await page_followed_papers(conn, viewer, [], None, limit=ROWS)
    assert [r.id for r in first] == [r.id for r in await walk_or_collect(conn, viewer, None)]
    after = await deep_cursor(conn, viewer, 9)
    if after is not None:
        out["page_10"] = stats(await timed(lambda: page_followed_papers(conn, viewer, [], after, limit=ROWS), runs))
        out["page_10_before"] = stats(await timed(lambda: walk_or_collect(conn, viewer, after), runs))
        assert [r.id for r in await page_followed_papers(conn, viewer, [], after, limit=ROWS)] == [
            r.id for r in await walk_or_collect(conn, viewer, after)
        ]
    for plan in ("collect", "walk"):
        out[f"forced_{plan}"] = stats(await timed(await forced(conn, viewer, plan), max(3, runs // 5)))
    return out


# Families of readers for --calibrate, by how many researchers they follow (k): the most prolific; researchers
# with 5 to 20 papers (M grows slowly with k); and researchers who stopped publishing before 2005, the case the
# scan likes least (their papers are many but none is recent).
CALIBRATION = {
    "prolific": (PROLIFIC, (1, 10, 100, 1000)),
    "modest": (
        "SELECT id FROM researchers WHERE paper_count BETWEEN 5 AND 20 ORDER BY id LIMIT {k}",
        (1, 10, 50, 200, 1000),
    ),
    "retired": (
        """SELECT r.id FROM researchers r WHERE r.paper_count >= 3 AND NOT EXISTS (
               SELECT 1 FROM authorships a JOIN papers p ON p.id = a.paper_id
               WHERE a.researcher_id = r.id AND p.published >= '2005-01-01')
           ORDER BY r.paper_count DESC, r.id LIMIT {k}""",
        (10, 100, 1000),
    ),
}


async def calibrate(conn: asyncpg.Connection, runs: int) -> list[dict[str, Any]]:
    rows = []
    for family, (query, ks) in CALIBRATION.items():
        for k in ks:
            viewer = await make_reader(conn, f"{family}{k}", query.format(k=k), NO_INSTITUTIONS)
            try:
                m, distinct, scans = await followed_papers(conn, viewer)
                row: dict[str, Any] = {"family": family, "k": k, "M": m, "papers": distinct}
                row["plan"] = "walk" if scans else "collect"
                for plan in ("collect", "walk"):
                    row[plan] = stats(await timed(await forced(conn, viewer, plan), runs))["p50_ms"]
                rows.append(row)
                print(row, flush=True)
            finally:
                await conn.execute("DELETE FROM viewers WHERE id = $1", viewer)
    return rows


@contextlib.asynccontextmanager
async def in_process_api(database_url: str) -> AsyncIterator[tuple[httpx.AsyncClient, list[str]]]:
    from app import create_app

    statements: list[str] = []
    app = create_app(
        Settings(DATABASE_URL=database_url, jwt_secret=SECRET, semantic_preload=False, rate_limits="off"),
        query_logger=lambda record: statements.append(record.query),
    )
    async with app.router.lifespan_context(app) as state:

        async def with_state(scope: Any, receive: Any, send: Any) -> None:
            await app({**scope, "state": dict(state or {})}, receive, send)

        transport = httpx.ASGITransport(app=with_state)
        async with httpx.AsyncClient(transport=transport, base_url="http://bench") as client:
            yield client, statements


async def graphql_part(database_url: str, viewers: dict[str, str], runs: int) -> list[dict[str, Any]]:
    from edge.persisted import operation_documents

    document = operation_documents(ROOT / "frontend_contract" / "operations")["ViewerFeed"]
    out = []
    async with in_process_api(database_url) as (client, statements):
        for name, viewer in viewers.items():
            token = jwt.encode({"sub": viewer, "exp": int(time.time()) + 3600}, SECRET, algorithm="HS256")
            headers = {"authorization": f"Bearer {token}"}

            async def run(headers: dict[str, str] = headers) -> None:
                response = await client.post("/graphql", json={"query": document, "variables": {}}, headers=headers)
                assert response.status_code == 200 and "errors" not in response.json(), response.text

            samples = await timed(run, runs)
            statements.clear()
            await run()
            out.append({"reader": name, "operation": "ViewerFeed", "statements": len(statements), **stats(samples)})
            print(out[-1], flush=True)
    return out


async def main_async(args: argparse.Namespace) -> None:
    conn = await asyncpg.connect(args.database_url)
    try:
        await conn.execute(f"DELETE FROM viewers WHERE id LIKE '{PREFIX}%'")  # an interrupted run's readers
        await ensure_population(conn, args.population)
        papers = await conn.fetchval("SELECT count(*) FROM papers")
        follows = await conn.fetchval("SELECT count(*) FROM follows")
        print({"papers": papers, "follows": follows, "runs": args.runs}, flush=True)
        if args.calibrate:
            await calibrate(conn, args.runs)
            return
        readers = {name: READERS[name] for name in args.readers} if args.readers is not None else dict(READERS)
        readers.update(follow_mix(spec) for spec in args.follows)
        viewers = {name: await make_reader(conn, name, r, i) for name, (r, i) in readers.items()}
        try:
            for name, viewer in viewers.items():
                print(await measure_reader(conn, name, viewer, args.runs), flush=True)
            if args.graphql:
                await graphql_part(args.database_url, viewers, args.runs)
        finally:
            await conn.execute("DELETE FROM viewers WHERE id = any($1::text[])", list(viewers.values()))
    finally:
        await conn.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--database-url", required=True)
    parser.add_argument("--runs", type=int, default=50)
    parser.add_argument("--population", type=int, default=20_000, help="background readers (kept between runs)")
    parser.add_argument("--calibrate", action="store_true")
    parser.add_argument("--graphql", action="store_true")
    parser.add_argument("--readers", nargs="*", choices=list(READERS), help="of the fixed readers, only these")
    parser.add_argument(
        "--follows", action="append", default=[], metavar="R,I", help="also a reader of R researchers, I institutions"
    )
    asyncio.run(main_async(parser.parse_args()))


if __name__ == "__main__":
    main()
