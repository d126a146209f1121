"""The reader's feed read per follow (db/queries/feed.py over migration 0028's listings) against a plain query
over the follows, on a random world of readers with many follows, published dates full of ties, withdrawn
papers, and writes after the follows (authorships moved, affiliations dropped, papers withdrawn, re-dated and
deleted): every page, by cursor and by number, to the end, under each filter the feed takes."""

from __future__ import annotations

import random
from collections.abc import AsyncIterator, Sequence
from datetime import UTC, datetime
from typing import Any

import asyncpg
import pytest

from db.filters import OWNER_FILTERS, PAPER_FILTERS, PAPER_SORTS, Clause, compose
from db.migrate import migrate
from db.queries import owner_listings
from db.queries.owners import count_of_owners, page_of_owners
from db.queries.papers import PAPER_COLUMNS, count_papers_of_owners, page_papers_of_owners
from db.queries.papers import PAPERS as PAPERS_SHAPE
from resolvers.viewer import FEED_SORT, page_followed_papers

PAPERS = 1500
RESEARCHERS = 300
INSTITUTIONS = 25
CATEGORIES = ("cs.LG", "stat.ML", "hep-th", "math.AP")

# The feed as the follows define it: papers with an authorship by a followed researcher or an affiliation with a
# followed institution, newest first, ties by id.
REFERENCE = """
SELECT p.id FROM papers p
WHERE (p.id IN (SELECT a.paper_id FROM authorships a JOIN follows f ON f.researcher_id = a.researcher_id
                WHERE f.viewer_id = $1::text)
       OR p.id IN (SELECT ai.paper_id FROM authorship_institutions ai
                   JOIN institution_follows f ON f.institution_id = ai.institution_id WHERE f.viewer_id = $1::text))
  AND {where}
ORDER BY p.published DESC, p.id DESC"""


async def build_world(conn: asyncpg.Connection, rng: random.Random) -> None:
    await conn.executemany(
        "INSERT INTO researchers (id, name, name_slug) VALUES ($1, $2, $2)",
        [(i, f"r{i}") for i in range(1, RESEARCHERS + 1)],
    )
    await conn.executemany(
        "INSERT INTO institutions (id, ror_id, name, name_slug) VALUES ($1, $2, $3, $3)",
        [(i, f"0abcde{i:03d}"[:7] + f"{i % 100:02d}", f"inst{i}") for i in range(1, INSTITUTIONS + 1)],
    )
    # Forty distinct days for 1,500 papers: most pages cut through a tie.
    days = [datetime(2020, 1, 1, tzinfo=UTC).replace(day=1 + d % 28, month=1 + d // 28) for d in range(40)]
    papers = []
    for n in range(PAPERS):
        cats = rng.sample(CATEGORIES, rng.randint(1, 2))
        published = rng.choice(days)
        papers.append((f"2001.{n:05d}", f"p{n}", ",".join(cats), cats[0], published, rng.random() < 0.08))
    await conn.execute(
        "INSERT INTO papers (arxiv_id, slug, title, categories, primary_category, published, updated, withdrawn)"
        " SELECT a, s, s, string_to_array(c, ','), pc, d, d, w"
        " FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::timestamptz[], $6::boolean[])"
        " AS t(a, s, c, pc, d, w) ORDER BY a",
        *map(list, zip(*papers, strict=True)),
    )
    ids = [r[0] for r in await conn.fetch("SELECT id FROM papers ORDER BY id")]
    authorships, affiliations = [], []
    # A skewed world: a few researchers and institutions on many papers, most on few.
    for paper_id in ids:
        for position in range(1, rng.randint(1, 5) + 1):
            researcher = None if rng.random() < 0.15 else min(RESEARCHERS, int(rng.paretovariate(0.7)))
            authorships.append((paper_id, position, f"a{position}", researcher))
            for institution in {min(INSTITUTIONS, int(rng.paretovariate(0.8))) for _ in range(rng.randint(0, 2))}:
                affiliations.append((paper_id, position, institution))
    # One statement each (the listings' triggers run once a statement).
    await conn.execute(
        "INSERT INTO authorships (paper_id, position, name, researcher_id)"
        " SELECT * FROM unnest($1::bigint[], $2::int[], $3::text[], $4::bigint[])",
        *map(list, zip(*authorships, strict=True)),
    )
    await conn.execute(
        "INSERT INTO authorship_institutions (paper_id, position, institution_id)"
        " SELECT * FROM unnest($1::bigint[], $2::int[], $3::bigint[])",
        *map(list, zip(*affiliations, strict=True)),
    )


async def follow(
    conn: asyncpg.Connection, viewer: str, researchers: Sequence[int], institutions: Sequence[int]
) -> None:
    await conn.execute("INSERT INTO viewers (id) VALUES ($1)", viewer)
    await conn.executemany(
        "INSERT INTO follows (viewer_id, researcher_id) VALUES ($1, $2)", [(viewer, r) for r in researchers]
    )
    await conn.executemany(
        "INSERT INTO institution_follows (viewer_id, institution_id) VALUES ($1, $2)",
        [(viewer, i) for i in institutions],
    )


async def later_writes(conn: asyncpg.Connection, rng: random.Random) -> None:
    """Writes after the listings were filled, each kind the triggers must follow."""
    ids = [r[0] for r in await conn.fetch("SELECT id FROM papers ORDER BY id")]
    await conn.execute(
        "UPDATE authorships SET researcher_id = $2 WHERE paper_id = ANY ($1::bigint[]) AND position = 1",
        rng.sample(ids, 60),
        7,
    )
    await conn.execute(
        "UPDATE authorships SET researcher_id = NULL WHERE paper_id = ANY ($1::bigint[])", rng.sample(ids, 30)
    )
    await conn.execute(
        "UPDATE authorships SET name = name || '.' WHERE paper_id = ANY ($1::bigint[])", rng.sample(ids, 50)
    )
    await conn.execute("DELETE FROM authorship_institutions WHERE paper_id = ANY ($1::bigint[])", rng.sample(ids, 40))
    await conn.execute(
        "INSERT INTO authorship_institutions (paper_id, position, institution_id)"
        " SELECT paper_id, position, 1 FROM authorships WHERE paper_id = ANY ($1::bigint[])"
        " ON CONFLICT DO NOTHING",
        rng.sample(ids, 40),
    )
    await conn.execute("UPDATE papers SET withdrawn = NOT withdrawn WHERE id = ANY ($1::bigint[])", rng.sample(ids, 40))
    await conn.execute(
        "UPDATE papers SET published = published + interval '3 days' WHERE id = ANY ($1::bigint[])", rng.sample(ids, 40)
    )
    await conn.execute("DELETE FROM papers WHERE id = ANY ($1::bigint[])", rng.sample(ids, 25))


@pytest.fixture(scope="module")
async def world(make_database: Any) -> AsyncIterator[tuple[asyncpg.Connection, list[str]]]:
    dsn = await make_database("feed_listing")
    conn = await asyncpg.connect(dsn)
    try:
        await migrate(conn)
        rng = random.Random(20261206)
        await build_world(conn, rng)
        everyone = list(range(1, RESEARCHERS + 1))
        await follow(conn, "many", rng.sample(everyone, 120), rng.sample(range(1, INSTITUTIONS + 1), 10))
        await follow(conn, "prolific", list(range(1, 40)), [1, 2, 3])
        await follow(conn, "researchers", rng.sample(everyone, 60), [])
        await follow(conn, "institutions", [], list(range(1, INSTITUTIONS + 1)))
        await follow(conn, "nobody", [], [])
        await later_writes(conn, rng)
        yield conn, ["many", "prolific", "researchers", "institutions", "nobody"]
    finally:
        await conn.close()


async def test_the_listings_are_what_a_rebuild_makes_after_every_kind_of_write(
    world: tuple[asyncpg.Connection, list[str]],
) -> None:
    conn, _ = world
    listing = "SELECT {0}, published, paper_id, withdrawn FROM {1} ORDER BY 1, 2, 3"
    before = [
        await conn.fetch(listing.format(*t))
        for t in (("researcher_id", "researcher_papers"), ("institution_id", "institution_papers"))
    ]
    async with conn.transaction():
        await conn.execute("SELECT wp_rebuild_feed_listing()")
        after = [
            await conn.fetch(listing.format(*t))
            for t in (("researcher_id", "researcher_papers"), ("institution_id", "institution_papers"))
        ]
        assert [list(map(tuple, b)) for b in before] == [list(map(tuple, a)) for a in after]
        assert before[0] and before[1]


FILTERS = {
    "none": [],
    "not_withdrawn": [Clause(PAPER_FILTERS["not_withdrawn"], ())],
    "withdrawn": [Clause(PAPER_FILTERS["withdrawn"], ())],
    "category": [Clause(PAPER_FILTERS["not_withdrawn"], ()), Clause(PAPER_FILTERS["category"], ("stat.ML",))],
    "dates": [
        Clause(PAPER_FILTERS["published_from"], (datetime(2020, 1, 10, tzinfo=UTC),)),
        Clause(PAPER_FILTERS["published_before"], (datetime(2020, 2, 5, tzinfo=UTC),)),
    ],
    "institution": [Clause(PAPER_FILTERS["not_withdrawn"], ()), Clause(PAPER_FILTERS["institution"], (2,))],
    "nothing": [Clause(PAPER_FILTERS["nothing"], ())],
}


@pytest.mark.parametrize("filters", list(FILTERS))
async def test_every_page_is_the_reference_query_s_to_the_end(
    world: tuple[asyncpg.Connection, list[str]], filters: str
) -> None:
    conn, viewers = world
    clauses = FILTERS[filters]
    where, args = compose(clauses, offset=1)
    for viewer in viewers:
        expected = [r[0] for r in await conn.fetch(REFERENCE.format(where=where), viewer, *args)]
        assert expected or viewer == "nobody" or filters in ("nothing", "institution", "withdrawn")
        # Pages of one only once: a page cut at every row, through every tie.
        for size in (1, 7, 25) if filters == "not_withdrawn" else (7, 25):
            by_cursor: list[int] = []
            after = None
            while True:
                rows = await page_followed_papers(conn, viewer, clauses, after, limit=size + 1)
                by_cursor += [r.id for r in rows[:size]]
                if len(rows) <= size:
                    break
                after = FEED_SORT.after_clause(FEED_SORT.cursor_key(rows[size - 1]))
            assert by_cursor == expected, (viewer, size)
            if size == 25:
                by_number: list[int] = []
                for offset in range(0, len(expected) + size, size):
                    by_number += [
                        r.id for r in await page_followed_papers(conn, viewer, clauses, None, limit=size, offset=offset)
                    ]
                assert by_number == expected, (viewer, size)


@pytest.mark.parametrize("sort", ["NEWEST", "OLDEST"])
@pytest.mark.parametrize("filters", ["none", "not_withdrawn", "withdrawn"])
async def test_owner_pages_from_the_listings_are_the_generic_statement_s(
    world: tuple[asyncpg.Connection, list[str]], sort: str, filters: str
) -> None:
    """A researcher's or an institution's papers by date (db/queries/owner_listings.py) page for page and count
    for count as the generic statements over the papers answer them."""
    conn, _ = world
    clauses = FILTERS[filters]
    for kind, owner_ids in (("researcher", [1, 7, 40, 299, 10_000]), ("institution", [1, 2, 5, 25, 10_000])):
        owner = OWNER_FILTERS[kind]
        assert owner_listings.page_statement(
            owner, owner_ids, clauses, PAPER_SORTS[sort], columns=PAPER_COLUMNS, limit=1, offset=0
        )
        generic_counts = await count_of_owners(conn, owner, owner_ids, clauses, source="papers p")
        assert await count_papers_of_owners(conn, owner, owner_ids, clauses) == generic_counts
        assert any(generic_counts.values())
        # Pages of one (a cut at every row, through every tie) for the default list; larger pages for the rest.
        for size in (1, 25) if (filters, sort) == ("not_withdrawn", "NEWEST") else (7, 25):
            for offset in range(0, max(generic_counts.values()) + size, size):
                listed = await page_papers_of_owners(
                    conn, owner, owner_ids, clauses, PAPER_SORTS[sort], limit=size, offset=offset
                )
                generic = await page_of_owners(
                    conn, PAPERS_SHAPE, owner, owner_ids, clauses, PAPER_SORTS[sort],
                    columns=PAPER_COLUMNS, source="papers p", limit=size, offset=offset,
                )  # fmt: skip
                assert listed == generic, (kind, size, offset)
