"""A page's papers written whole by PostgreSQL (db/queries/written.NodesStatement) answer exactly what rows answer.

Every field a paper's `nodes` selection may hold runs through graphql-core's executor (rows) and the FastExecutor
(the written page), on papers chosen to be awkward: quotes, control characters and non-ASCII in every text, nulls
in every nullable field, empty lists, timestamps with microseconds in another zone, scores integral and not. Then
each guard in turn: a value PostgreSQL would spell otherwise than the API (an id past 32 bits, an infinite time, a
list holding a NULL, a type outside the enum, a score below 1e-4) makes the page answer from rows, errors included.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any

import asyncpg
import orjson
import pytest
from orjson import Fragment
from strawberry.schema.schema import StrawberryGraphQLCoreExecutionContext

from db.migrate import migrate
from db.pool import create_pool
from db.queries.written import NodesStatement, Shape, Value
from resolvers.context import Context
from schema import build_schema
from settings import Settings
from tests.integration.graph_support import StatementCounter

AWKWARD = 'Quote " back\\slash \n\t\x01 Ünïcødé 北京 😀'
PAPER_FIELDS = """id databaseId arxivId version slug title abstract authorsText categories primaryCategory
  published updated absUrl pdfUrl doi journalRef comments license withdrawn modifiedAt citedByCount summary topics
  paperType researchField novelty significanceScore analysed analysedAt analysisModel __typename"""
AUTHORS = """authors { position name affiliation isCollaboration __typename
  researcher { id databaseId slug name } institutions { id databaseId slug rorId name country } }"""
FULL = f"{PAPER_FIELDS} {AUTHORS}"
PAGE = "query($first: Int) { papers(first: $first, sort: OLDEST) { totalCount nodes { %s } } }"
CATEGORY = """query($page: Int, $sort: PaperSort) {
  papers(filter: {category: "cs.LG"}, sort: $sort, first: 2, page: $page) { totalCount nodes { %s } }
}"""
LATER = """query($after: String) {
  papers(filter: {category: "cs.LG"}, first: 2, after: $after) { totalCount nodes { %s } }
}"""


@pytest.fixture(scope="module")
async def archive(make_database: Any) -> AsyncIterator[dict[str, Any]]:
    dsn = await make_database("nodes_json")
    conn = await asyncpg.connect(dsn)
    try:
        await migrate(conn)
        inst = await conn.fetchval(
            "INSERT INTO institutions (ror_id, name, name_slug, country) VALUES ('057zh3y96', $1, '', NULL)"
            " RETURNING id",
            AWKWARD,
        )
        person = await conn.fetchval("INSERT INTO researchers (name, name_slug) VALUES ($1, 'q') RETURNING id", AWKWARD)
        papers = []
        for i, extra in enumerate(
            [
                # Every text awkward, every analysis field set, times with microseconds in another zone.
                {
                    "title": AWKWARD,
                    "abstract": AWKWARD * 20,
                    "authors_text": AWKWARD,
                    "categories": ["cs.LG", "stat.ML", AWKWARD],
                    "doi": "10.1/x",
                    "journal_ref": AWKWARD,
                    "comments": AWKWARD,
                    "license": "http://creativecommons.org/licenses/by/4.0/",
                    "cited_by_count": 12,
                    "summary": AWKWARD,
                    "topics": ['a "quoted" topic', AWKWARD],
                    "paper_type": "SURVEY",
                    "research_field": AWKWARD,
                    "novelty": AWKWARD,
                    "significance_score": 0.7,
                    "analysed": True,
                    "analysed_at": "2024-02-03 04:05:06.000001+05",
                    "analysis_model": AWKWARD,
                    "updated": "2024-03-01 00:00:00.5+00",
                },
                # Nulls everywhere they may be.
                {},
                # Integral scores, empty lists.
                {"significance_score": 1.0, "topics": [], "categories": ["cs.LG"], "cited_by_count": 0},
                {"significance_score": 0.0, "topics": ["x"], "analysed_at": "2024-01-01 00:00:00+00"},
                {"significance_score": 0.25, "paper_type": "OTHER"},
            ]
        ):
            values = {
                "title": "T",
                "abstract": "",
                "authors_text": "",
                "categories": ["cs.LG"],
                "updated": f"2024-01-0{i + 1} 00:00:00+00",
                **extra,
            }
            columns = ", ".join(values)
            params = ", ".join(
                f"${n}::text::timestamptz" if c in ("updated", "analysed_at") else f"${n}"
                for n, c in enumerate(values, start=3)
            )
            pid = await conn.fetchval(
                f"""INSERT INTO papers (arxiv_id, slug, primary_category, published, {columns})
                    VALUES ($1, $1 || '-t', 'cs.LG', $2, {params}) RETURNING id""",
                f"2401.0000{i}" if i else "astro-ph/9901001",
                datetime(2024, 1, 1 + i, 3, 4, 5, 120 * i, tzinfo=UTC),
                *values.values(),
            )
            papers.append(pid)
        for position, (name, researcher) in enumerate([(AWKWARD, person), ("Nobody", None)], start=1):
            await conn.execute(
                "INSERT INTO authorships (paper_id, position, name, researcher_id, affiliation) VALUES ($1, $2, $3,"
                " $4, $5)",
                papers[0],
                position,
                name,
                researcher,
                AWKWARD if researcher else None,
            )
        await conn.execute(
            "INSERT INTO authorship_institutions (paper_id, position, institution_id) VALUES ($1, 1, $2)",
            papers[0],
            inst,
        )
    finally:
        await conn.close()
    settings = Settings(DATABASE_URL=dsn)
    counter = StatementCounter()
    pool = await create_pool(dsn, query_logger=counter)
    schemas = {
        "rows": build_schema(settings, extensions=[], execution_context_class=StrawberryGraphQLCoreExecutionContext),
        "json": build_schema(settings, extensions=[]),
    }

    async def run(kind: str, document: str, variables: dict[str, Any]) -> tuple[Any, list[Any], bool]:
        counter.reset()
        result = await schemas[kind].execute(
            document, variable_values=variables, context_value=Context.create(pool, settings)
        )
        papers = (result.data or {}).get("papers") or {}
        written = isinstance(papers.get("nodes"), Fragment)
        errors = sorted((e.message, str(e.path)) for e in result.errors or [])
        return orjson.loads(orjson.dumps(result.data)), errors, written

    yield {"run": run, "dsn": dsn, "papers": papers, "counter": counter}
    await pool.close()


async def both(archive: dict[str, Any], document: str, variables: dict[str, Any]) -> tuple[Any, Any, bool]:
    rows = await archive["run"]("rows", document, variables)
    written = await archive["run"]("json", document, variables)
    assert not rows[2], "graphql-core's executor never gets written JSON"
    return rows[:2], written[:2], written[2]


async def test_a_page_written_whole_answers_what_rows_answer(archive: dict[str, Any]) -> None:
    rows, written, was_written = await both(archive, PAGE % FULL, {"first": 10})
    assert was_written
    assert written == rows
    nodes = written[0]["papers"]["nodes"]
    assert [n["significanceScore"] for n in nodes] == [0.699999988079071, None, 1.0, 0.0, 0.25]
    assert nodes[0]["title"] == AWKWARD and nodes[0]["authors"][0]["institutions"][0]["name"] == AWKWARD
    assert nodes[0]["analysedAt"] == "2024-02-02T23:05:06.000001+00:00"
    assert nodes[0]["abstract"] == AWKWARD * 20  # long enough that base64 and to_json wrap nothing
    assert nodes[1]["topics"] is None and nodes[2]["topics"] == [] and nodes[1]["authors"] == []
    # The page and its count: the count is a statement of its own in a list that is not a category's.
    assert len(archive["counter"].statements) == 2


@pytest.mark.parametrize("sort", ["NEWEST", "OLDEST", "MOST_CITED"])
async def test_a_category_page_is_one_statement(archive: dict[str, Any], sort: str) -> None:
    for page in (1, 2, 3, 4):
        rows, written, was_written = await both(archive, CATEGORY % FULL, {"page": page, "sort": sort})
        assert written == rows and written[0]["papers"]["totalCount"] == 5
        assert was_written
        # By date, the page, its authors and its stored total come in one statement; past the end (page 4 of 3),
        # no row holds the total and it is counted on its own.
        by_date = sort != "MOST_CITED" and page < 4
        assert len(archive["counter"].statements) == (1 if by_date else 2)


async def test_cursor_pages_count_in_their_statement(archive: dict[str, Any]) -> None:
    after = None
    seen = []
    document = LATER.replace("nodes {", "pageInfo { endCursor } nodes {") % "arxivId title"
    for _ in range(3):
        rows, written, was_written = await both(archive, document, {"after": after})
        assert written == rows and was_written
        assert written[0]["papers"]["totalCount"] == 5 and len(archive["counter"].statements) == 1
        seen += [n["arxivId"] for n in written[0]["papers"]["nodes"]]
        after = written[0]["papers"]["pageInfo"]["endCursor"]
    assert len(seen) == len(set(seen)) == 5


@pytest.mark.parametrize(
    "selection",
    [
        "title versions { version }",  # a list with its own resolver
        "title externalIds { doi }",  # an object field
        "title similarPapers { title }",  # a field with arguments and a resolver
        "title authors { researcher { hIndex } }",  # a resolver below the authors
        "title ... on Paper { slug }",  # a fragment
        "title slug @include(if: true)",  # a directive
        "title t: title t: title",  # a response name twice (merged by GraphQL)
    ],
)
async def test_other_selections_are_answered_from_rows(archive: dict[str, Any], selection: str) -> None:
    rows, written, was_written = await both(archive, PAGE % selection, {"first": 10})
    assert not was_written
    assert written == rows


async def test_two_nodes_selections_and_edges_beside_them(archive: dict[str, Any]) -> None:
    twice = "query { papers(first: 3) { nodes { title } again: nodes { slug } } }"
    rows, written, was_written = await both(archive, twice, {})
    assert written == rows and not was_written
    beside = "query { papers(first: 3) { edges { cursor node { title } } nodes { title abstract } } }"
    rows, written, was_written = await both(archive, beside, {})
    assert written == rows and was_written


GUARDS = [
    # (what is changed, the UPDATE of the paper, the UPDATE that restores it)
    ("score below 1e-4", "significance_score = 0.0001", "significance_score = NULL"),  # 9.99...e-05 as a real
    ("NULL in topics", "topics = ARRAY['a', NULL]", "topics = NULL"),
    ("two-dimensional topics", "topics = ARRAY[ARRAY['a', 'b']]", "topics = NULL"),
    ("infinite publication", "published = 'infinity'", "published = '2024-01-02'"),
    ("infinite analysis time", "analysed_at = '-infinity'", "analysed_at = NULL"),
    ("type outside the enum", "paper_type = 'ESSAY'", "paper_type = NULL"),
]


@pytest.mark.parametrize(("what", "change", "restore"), GUARDS, ids=[g[0] for g in GUARDS])
async def test_a_value_not_written_alike_makes_the_page_read_rows(
    archive: dict[str, Any], what: str, change: str, restore: str
) -> None:
    conn = await asyncpg.connect(archive["dsn"])
    try:
        await conn.execute("ALTER TABLE papers DROP CONSTRAINT IF EXISTS papers_paper_type_check")
        await conn.execute(f"UPDATE papers SET {change} WHERE id = $1", archive["papers"][1])
        rows, written, was_written = await both(archive, PAGE % FULL, {"first": 10})
    finally:
        await conn.execute(f"UPDATE papers SET {restore} WHERE id = $1", archive["papers"][1])
        await conn.close()
    assert not was_written, what
    assert written == rows
    assert rows[0] is not None


async def test_an_id_past_32_bits_is_graphql_s_error(archive: dict[str, Any]) -> None:
    conn = await asyncpg.connect(archive["dsn"])
    try:
        big = await conn.fetchval(
            "INSERT INTO papers (id, arxiv_id, slug, title, categories, primary_category, published, updated)"
            " OVERRIDING SYSTEM VALUE VALUES (2147483648, '2402.00001', 'big', 'Big', '{cs.LG}', 'cs.LG', now(),"
            " now()) RETURNING id"
        )
        rows, written, was_written = await both(archive, PAGE % "databaseId title", {"first": 10})
        # Without databaseId the id is not written, and the page is.
        _, plain, plain_written = await both(archive, PAGE % "title", {"first": 10})
    finally:
        await conn.execute("DELETE FROM papers WHERE id = $1", big)
        await conn.close()
    assert written == rows and not was_written
    assert rows[1] and "32-bit" in rows[1][0][0]
    assert plain_written and "Big" in [n["title"] for n in plain[0]["papers"]["nodes"]]


async def test_scores_are_written_as_python_writes_them(archive: dict[str, Any]) -> None:
    statement = NodesStatement.of(Shape((("s", Value("column", "significance_score")),)))
    steps = [i / 100_000 for i in range(100_001)] + [1e-4, 1e-5, 0.5e-4, 0.0, 1.0]
    conn = await asyncpg.connect(archive["dsn"])
    try:
        records = await conn.fetch(
            f"SELECT p.significance_score, {statement.columns}"
            " FROM (SELECT unnest($1::real[]) AS significance_score) p",
            steps,
        )
    finally:
        await conn.close()
    written = 0
    for record in records:
        text = statement.read(record)
        if text is not None:
            written += 1
            assert text == orjson.dumps({"s": record["significance_score"]}).decode()
        else:
            assert record["significance_score"] < 1e-4
    assert written >= 100_000 - 10
