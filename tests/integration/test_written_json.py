"""A paper's lists written as JSON by PostgreSQL (db/queries/written.py) answer exactly what rows answer.

The same documents run through graphql-core's executor (which reads rows) and the FastExecutor (which passes the
written JSON through), on data chosen to be awkward: quotes, backslashes, control characters and non-ASCII in
names, empty slugs, null countries and affiliations, several institutions in name order, unmatched authors,
collaborations, papers without authors, timestamps with and without microseconds or in another zone, an infinite
one, an id past a 32-bit integer, and a paper named every way `paper(id:)` accepts.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any

import asyncpg
import orjson
import pytest
from graphql import parse
from strawberry.schema.schema import StrawberryGraphQLCoreExecutionContext

from db.migrate import migrate
from db.paging import encode_global_id, paper_global_id
from db.pool import create_pool
from db.queries.written import GLOBAL_KEY_MAX_BYTES, AuthorsStatement, Shape, ShapeRefused, Value, global_id_sql
from resolvers.context import Context
from schema import build_schema
from settings import Settings
from tests.integration.graph_support import StatementCounter

AWKWARD = 'Quote " back\\slash \n\t\x01 Ünïcødé 北京 😀'
PAGE = """query($first: Int) { papers(first: $first, sort: OLDEST) { nodes { arxivId authors { %s } } } }"""
CATEGORY = """query($sort: PaperSort, $page: Int) {
  papers(filter: {category: "cs.LG"}, sort: $sort, first: 1, page: $page) {
    totalCount nodes { arxivId authors { %s } }
  }
}"""
CITED = "query { papers(first: 2, sort: MOST_CITED) { totalCount nodes { arxivId authors { %s } } } }"
EDGES = """query($first: Int) { papers(first: $first) { edges { node { authors { %s } } } } }"""
ONE = """query($id: String!) { paper(id: $id) { arxivId authors { %s } } }"""
PAPER = """query($id: String!) { paper(id: $id) { arxivId title authors { %s }
  versions { version submittedAt sizeKb sourceType __typename } } }"""
FULL = """position name affiliation isCollaboration __typename
  researcher { id databaseId slug name __typename }
  institutions { id databaseId slug rorId name country __typename }"""


@pytest.fixture(scope="module")
async def archive(make_database: Any) -> AsyncIterator[dict[str, Any]]:
    dsn = await make_database("authors_json")
    conn = await asyncpg.connect(dsn)
    try:
        await migrate(conn)
        inst = {}
        for ror, name, slug, country in [
            ("0161xgx34", "Zeta Institute", "zeta-institute", "CA"),
            ("042nb2s44", "alpha lab", "", None),
            ("057zh3y96", AWKWARD, "awkward", "JP"),
        ]:
            inst[ror] = await conn.fetchval(
                "INSERT INTO institutions (ror_id, name, name_slug, country) VALUES ($1, $2, $3, $4) RETURNING id",
                ror,
                name,
                slug,
                country,
            )
        plain = await conn.fetchval(
            "INSERT INTO researchers (name, name_slug) VALUES ('Ada Lovelace', 'ada') RETURNING id"
        )
        odd = await conn.fetchval("INSERT INTO researchers (name, name_slug) VALUES ($1, '') RETURNING id", AWKWARD)
        papers = []
        for i, authors in enumerate(
            [
                # (name, researcher, affiliation, collaboration, institutions)
                [
                    ("Ada L.", plain, None, False, ["0161xgx34", "042nb2s44", "057zh3y96"]),
                    (AWKWARD, odd, 'Dept. "of" \\ Things', False, ["057zh3y96"]),
                    ("Nobody Matched", None, None, False, []),
                    ("ATLAS Collaboration", None, None, True, ["0161xgx34"]),
                ],
                [],
                [("Ada L.", plain, "MIT", False, [])],
            ]
        ):
            pid = await conn.fetchval(
                """INSERT INTO papers (arxiv_id, version, slug, title, abstract, authors_text, categories,
                       primary_category, published, updated, author_count, matched_count)
                   VALUES ($1, 1, $1 || '-t', 'T', 'A', 'x', '{cs.LG}', 'cs.LG', $2, $2, $3, 0) RETURNING id""",
                f"2401.0000{i}",
                datetime(2024, 1, 1 + i, tzinfo=UTC),
                len(authors),
            )
            papers.append(pid)
            for position, (name, rid, affiliation, collab, rors) in enumerate(authors, start=1):
                await conn.execute(
                    """INSERT INTO authorships (paper_id, position, name, researcher_id, affiliation, is_collaboration)
                       VALUES ($1, $2, $3, $4, $5, $6)""",
                    pid,
                    position,
                    name,
                    rid,
                    affiliation,
                    collab,
                )
                for ror in rors:
                    await conn.execute(
                        "INSERT INTO authorship_institutions (paper_id, position, institution_id) VALUES ($1, $2, $3)",
                        pid,
                        position,
                        inst[ror],
                    )
        for pid, version, submitted, size, source in [
            (papers[0], 1, "2024-01-01 00:00:00+00", 120, "D"),
            (papers[0], 2, "2024-01-02 03:04:05.12+00", None, None),
            (papers[0], 3, "2024-01-03 03:04:05.000001+05", 0, "I"),
            (papers[1], 1, "infinity", 1, AWKWARD),
        ]:
            await conn.execute(
                """INSERT INTO paper_versions (paper_id, version, submitted_at, size_kb, source_type)
                   VALUES ($1, $2, $3::text::timestamptz, $4, $5)""",
                pid,
                version,
                submitted,
                size,
                source,
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
        result = await schemas[kind].execute(
            document, variable_values=variables, context_value=Context.create(pool, settings)
        )
        written = "Fragment" in repr(result.data)
        errors = sorted((e.message, str(e.path)) for e in result.errors or [])
        return orjson.loads(orjson.dumps(result.data)), errors, written

    async def raw(document: str, variables: dict[str, Any]) -> Any:
        """The FastExecutor's answer as it is sent (orjson.Fragments and all)."""
        result = await schemas["json"].execute(
            document, variable_values=variables, context_value=Context.create(pool, settings)
        )
        return result.data

    yield {"run": run, "raw": raw, "dsn": dsn, "papers": papers, "plain": plain, "odd": odd, "counter": counter}
    await pool.close()


async def both(archive: dict[str, Any], document: str, variables: dict[str, Any]) -> tuple[Any, Any, bool]:
    rows = await archive["run"]("rows", document, variables)
    written = await archive["run"]("json", document, variables)
    assert not rows[2], "graphql-core's executor never gets written JSON"
    return rows[:2], written[:2], written[2]


@pytest.mark.parametrize("document", [PAGE, ONE])
async def test_written_json_answers_what_rows_answer(archive: dict[str, Any], document: str) -> None:
    variables = {"first": 10} if document is PAGE else {"id": "2401.00000"}
    rows, written, was_written = await both(archive, document % FULL, variables)
    assert was_written
    assert written == rows
    data = written[0]
    paper = data["papers"]["nodes"][0] if document is PAGE else data["paper"]
    assert [a["name"] for a in paper["authors"]] == ["Ada L.", AWKWARD, "Nobody Matched", "ATLAS Collaboration"]
    # Institutions in name order (code point order in the project's databases), then id.
    assert [i["name"] for i in paper["authors"][0]["institutions"]] == [AWKWARD, "Zeta Institute", "alpha lab"]
    assert paper["authors"][1]["researcher"]["slug"] == str(archive["odd"])
    if document is PAGE:
        assert data["papers"]["nodes"][1]["authors"] == []


@pytest.mark.parametrize(
    "named",
    [
        "2401.00000",
        "2401.00000v2",
        "arXiv:2401.00000",
        "2401.00000-t",
        "2401.00000-another-title",
        "2401.00001",
        "2401.09999",
        encode_global_id("Paper", 1),
        paper_global_id("2401.00000"),
    ],
)
async def test_a_paper_with_its_lists_in_one_statement(archive: dict[str, Any], named: str) -> None:
    rows, written, was_written = await both(archive, PAPER % FULL, {"id": named})
    assert written == rows
    paper = written[0]["paper"]
    if named == "2401.09999":
        assert paper is None
        return
    assert was_written
    if paper["arxivId"] == "2401.00000":
        assert [v["submittedAt"] for v in paper["versions"]] == [
            "2024-01-01T00:00:00+00:00",
            "2024-01-02T03:04:05.120000+00:00",
            "2024-01-02T22:04:05.000001+00:00",
        ]


@pytest.mark.parametrize("sort", ["NEWEST", "OLDEST", "MOST_CITED"])
async def test_a_category_page_writes_its_authors_in_its_own_statement(archive: dict[str, Any], sort: str) -> None:
    document = CATEGORY % FULL
    for page in (1, 2, 3, 4):
        rows, written, _ = await both(archive, document, {"sort": sort, "page": page})
        archive["counter"].reset()
        written = await archive["run"]("json", document, {"sort": sort, "page": page})
        assert written[2] == (page < 4) and written[:2] == rows
        assert len(written[0]["papers"]["nodes"]) == (1 if page < 4 else 0)
        assert written[0]["papers"]["totalCount"] == 3
        # By date, the page, its authors and the category's stored total in one statement; past the end no row
        # holds the total, and it is counted on its own. Sorted otherwise: the page with its authors, and the
        # count unless the page holds the list's last row (page 3 of 3).
        counted = page == 4 or (sort == "MOST_CITED" and page < 3)
        assert archive["counter"].count == (2 if counted else 1), archive["counter"].statements


async def test_a_cursor_page_of_a_category_reads_its_total_with_it(archive: dict[str, Any]) -> None:
    document = """query($after: String) { papers(filter: {category: "cs.LG"}, first: 1, after: $after) {
        totalCount pageInfo { endCursor } nodes { arxivId authors { name } } } }"""
    after, seen = None, []
    for _ in range(3):
        archive["counter"].reset()
        data, errors, was_written = await archive["run"]("json", document, {"after": after})
        assert not errors and was_written and data["papers"]["totalCount"] == 3
        assert archive["counter"].count == 1, archive["counter"].statements
        seen += [n["arxivId"] for n in data["papers"]["nodes"]]
        after = data["papers"]["pageInfo"]["endCursor"]
    assert sorted(seen) == ["2401.00000", "2401.00001", "2401.00002"]


async def test_any_page_writes_its_authors_in_its_own_statement(archive: dict[str, Any]) -> None:
    document = CITED % FULL
    rows, _, _ = await both(archive, document, {})
    archive["counter"].reset()
    written = await archive["run"]("json", document, {})
    assert written[2] and written[:2] == rows
    # The page with its authors written, then the count.
    assert archive["counter"].count == 2, archive["counter"].statements


async def test_papers_looked_up_together_share_one_statement(archive: dict[str, Any]) -> None:
    aliases = " ".join(f'p{i}: paper(id: "2401.0000{i}") {{ arxivId authors {{ name }} }}' for i in range(3))
    # The same paper again, by its slug and by its arXiv id (another selection of the same statement).
    again = 'again: paper(id: "2401.00000-t") { arxivId authors { name } }'
    again += ' twice: paper(id: "2401.00000") { authors { name } }'
    document = f'query {{ {aliases} {again} missing: paper(id: "2401.09999") {{ arxivId authors {{ name }} }} }}'
    rows = await archive["run"]("rows", document, {})
    archive["counter"].reset()
    written = await archive["run"]("json", document, {})
    assert written[2] and written[:2] == rows[:2]
    assert written[0]["missing"] is None and written[0]["p2"]["authors"] == [{"name": "Ada L."}]
    assert written[0]["again"] == written[0]["p0"] and written[0]["twice"]["authors"] == written[0]["p0"]["authors"]
    # The slug look-up and the arXiv id look-ups: one statement each, whatever the number of aliases.
    assert archive["counter"].count == 2, archive["counter"].statements


async def test_edges_of_a_connection_are_written_too(archive: dict[str, Any]) -> None:
    rows, written, was_written = await both(archive, EDGES % FULL, {"first": 10})
    assert was_written and written == rows


async def test_aliases_and_order_are_the_documents(archive: dict[str, Any]) -> None:
    selection = "z: name p: position who: researcher { n: name i: id } at: institutions { c: country r: rorId }"
    rows, written, was_written = await both(archive, PAGE % selection, {"first": 10})
    assert was_written and written == rows
    first = written[0]["papers"]["nodes"][0]["authors"][0]
    assert list(first) == ["z", "p", "who", "at"] and list(first["who"]) == ["n", "i"]


@pytest.mark.parametrize(
    "selection",
    [
        "name researcher { name hIndex }",  # a field with a resolver
        "name ... on Authorship { position }",  # a fragment
        "name position @include(if: true)",  # a directive
        "name researcher { name } r2: researcher { slug }",  # two researchers
    ],
)
async def test_other_selections_are_answered_from_rows(archive: dict[str, Any], selection: str) -> None:
    rows, written, was_written = await both(archive, PAGE % selection, {"first": 10})
    assert not was_written
    assert written == rows


async def test_two_author_selections_of_one_paper(archive: dict[str, Any]) -> None:
    document = """query($id: String!) { a: paper(id: $id) { authors { name } }
        b: paper(id: $id) { authors { position researcher { slug } } } }"""
    rows, written, _ = await both(archive, document, {"id": "2401.00000"})
    assert written == rows
    assert written[0]["b"]["authors"][0] == {
        "position": 1,
        "researcher": {"slug": rows[0]["b"]["authors"][0]["researcher"]["slug"]},
    }


async def test_an_id_past_32_bits_gives_graphql_s_error(archive: dict[str, Any]) -> None:
    conn = await asyncpg.connect(archive["dsn"])
    try:
        await conn.execute(
            "INSERT INTO researchers (id, name, name_slug) VALUES (2147483648, 'Big', 'big') ON CONFLICT DO NOTHING"
        )
        await conn.execute(
            "UPDATE authorships SET researcher_id = 2147483648 WHERE paper_id = $1 AND position = 1",
            archive["papers"][2],
        )
        rows, written, _ = await both(archive, ONE % "name researcher { databaseId }", {"id": "2401.00002"})
    finally:
        await conn.execute("UPDATE authorships SET researcher_id = NULL WHERE researcher_id = 2147483648")
        await conn.execute("DELETE FROM researchers WHERE id = 2147483648")
        await conn.close()
    assert written == rows
    assert rows[1] and "32-bit" in rows[1][0][0]


def test_only_names_are_written_into_the_statement() -> None:
    name = Value("column", "name")
    AuthorsStatement.of(Shape((("ok_Key1", name),)))
    for shape in [
        Shape((("a'b", name),)),
        Shape((('a"b', name),)),
        Shape((("k", Value("constant", "x' || pg_sleep(1) || '")),)),
        Shape((("k", Value("column", "abstract")),)),
    ]:
        with pytest.raises(ShapeRefused):
            AuthorsStatement.of(shape)


NODES = """query($sort: PaperSort) { papers(filter: {category: "cs.LG"}, sort: $sort, first: 10) {
  totalCount nodes { ...Card databaseId version abstract updated absUrl pdfUrl doi journalRef comments license withdrawn
    modifiedAt summary topics paperType researchField novelty significanceScore analysed analysedAt analysisModel
    t: __typename again: title id } } }
fragment Card on Paper { id arxivId slug title authorsText categories primaryCategory published citedByCount
  authors { %s } }"""
# Analysis values as awkward as the rows: a whole float, a real read as the double it is, one written with an
# exponent, none; a topic that needs escaping; times with microseconds.
ANALYSES = [
    (1.0, "THEORY", [AWKWARD, "b"], "2024-02-03 04:05:06.000007+00", 12),
    (0.7, "SURVEY", [], "2024-02-03 04:05:06+00", 0),
    (1e-05, None, None, None, None),
]


async def _analyse(archive: dict[str, Any], analyses: list[tuple[Any, ...]]) -> None:
    conn = await asyncpg.connect(archive["dsn"])
    try:
        for pid, (score, kind, topics, at, cited) in zip(archive["papers"], analyses, strict=True):
            await conn.execute(
                """UPDATE papers SET significance_score = $2, paper_type = $3, topics = $4::text[],
                       analysed_at = $5::text::timestamptz, cited_by_count = $6, summary = $7::text, doi = $7::text,
                       analysed = $4::text[] IS NOT NULL WHERE id = $1""",
                pid, score, kind, topics, at, cited, AWKWARD if kind else None,
            )  # fmt: skip
    finally:
        await conn.close()


@pytest.mark.parametrize("sort", ["NEWEST", "MOST_CITED"])
async def test_a_page_of_papers_is_written_whole(archive: dict[str, Any], sort: str) -> None:
    await _analyse(archive, ANALYSES)
    document = NODES % FULL
    rows, written, _ = await both(archive, document, {"sort": sort})
    assert written == rows
    nodes = (await archive["raw"](document, {"sort": sort}))["papers"]["nodes"]
    assert type(nodes) is orjson.Fragment, "the page's papers, written by PostgreSQL as one answer"
    papers = written[0]["papers"]["nodes"]
    # The document's order: the fragment's fields where it is spread, a name asked twice where it first is.
    assert len(papers) == 3 and list(papers[0])[:3] == ["id", "arxivId", "slug"]
    assert list(papers[0])[-2:] == ["t", "again"] and "id" not in list(papers[0])[1:]
    by_id = {p["arxivId"]: p for p in papers}
    assert by_id["2401.00000"]["significanceScore"] == 1.0
    assert by_id["2401.00000"]["analysedAt"].endswith(".000007+00:00")
    assert by_id["2401.00001"]["significanceScore"] == 0.699999988079071  # a real, read as the double it is
    # Whole floats keep their point, as the rows' answer writes them.
    assert b'"significanceScore":1.0,' in orjson.dumps(nodes)


@pytest.mark.parametrize(
    ("change", "error"),
    [
        ("topics = '{a,NULL}'", "non-nullable"),  # a null where the schema has none: GraphQL's error, from rows
        ("updated = 'infinity'", None),
    ],
)
async def test_a_row_that_cannot_be_written_reads_the_page_as_rows(
    archive: dict[str, Any], change: str, error: str | None
) -> None:
    conn = await asyncpg.connect(archive["dsn"])
    try:
        await conn.execute(f"UPDATE papers SET {change} WHERE id = $1", archive["papers"][1])
        document = NODES % "name"
        rows, written, _ = await both(archive, document, {"sort": "OLDEST"})
        assert written == rows
        assert error is None or (rows[1] and error in rows[1][0][0]), rows[1]
        nodes = (await archive["raw"](document, {"sort": "OLDEST"}))["papers"]["nodes"]
        assert type(nodes) is not orjson.Fragment
    finally:
        await conn.execute("UPDATE papers SET updated = published WHERE id = $1", archive["papers"][1])
        await conn.close()
        await _analyse(archive, ANALYSES)


@pytest.mark.parametrize(
    "selection",
    [
        "nodes { arxivId versions { version } }",  # a field written only for one paper
        "nodes { arxivId @include(if: true) }",  # a directive
        "nodes { arxivId ... on Node { id } }",  # a fragment on another type
        "nodes { arxivId } edges { node { title } }",  # edges read the rows
        "nodes { arxivId } n2: nodes { title }",  # two selections of the page
        "nodes { arxivId a: title a: slug }",  # one name for two fields: GraphQL's own error
    ],
)
async def test_other_pages_are_answered_from_rows(archive: dict[str, Any], selection: str) -> None:
    document = f"query {{ papers(sort: OLDEST, first: 10) {{ {selection} }} }}"
    rows, written, _ = await both(archive, document, {})
    assert written == rows
    data = await archive["raw"](document, {})
    assert data is None or type(data["papers"]["nodes"]) is not orjson.Fragment


OWNED = """query($id: String!, $sort: PaperSort) { %s(id: $id) {
  papers(sort: $sort, first: 1) { totalCount nodes { ...Card } } } }
fragment Card on Paper { id title published authors { %s } }"""


@pytest.mark.parametrize(("owner", "sort"), [("researcher", "NEWEST"), ("institution", "OLDEST")])
async def test_an_owner_s_page_of_papers_is_written_whole(archive: dict[str, Any], owner: str, sort: str) -> None:
    document = OWNED % (owner, FULL)
    variables = {"id": str(archive["plain"]) if owner == "researcher" else "0161xgx34", "sort": sort}
    rows, written, _ = await both(archive, document, variables)
    assert written == rows
    assert written[0][owner]["papers"]["totalCount"] >= 1 and len(written[0][owner]["papers"]["nodes"]) == 1
    archive["counter"].reset()
    nodes = (await archive["raw"](document, variables))[owner]["papers"]["nodes"]
    assert type(nodes) is orjson.Fragment
    # The owner, and its page with the papers' authors and the owner's count: neither the authors nor the count
    # need a statement of their own.
    assert archive["counter"].count == 2, archive["counter"].statements


@pytest.mark.parametrize("key", ["1", "-9223372036854775808", "2401.00001", "math.AG/0601001", "x" * 44, "é" * 22])
async def test_global_ids_are_written_as_python_writes_them(archive: dict[str, Any], key: str) -> None:
    conn = await asyncpg.connect(archive["dsn"])
    try:
        for type_name in ("Paper", "Researcher", "Institution"):
            sql = f"SELECT {global_id_sql(type_name, '$1::text')}"
            assert await conn.fetchval(sql, key) == orjson.dumps(encode_global_id(type_name, key)).decode()
    finally:
        await conn.close()
    assert len(key.encode()) <= GLOBAL_KEY_MAX_BYTES


async def test_a_paper_whose_id_is_too_long_to_write_is_answered_from_rows(archive: dict[str, Any]) -> None:
    conn = await asyncpg.connect(archive["dsn"])
    long_id = "2401.00001" + "v" * GLOBAL_KEY_MAX_BYTES
    try:
        await conn.execute("UPDATE papers SET arxiv_id = $2 WHERE id = $1", archive["papers"][1], long_id)
        document = NODES % "name"
        rows, written, _ = await both(archive, document, {"sort": "OLDEST"})
        assert written == rows and long_id in [p["arxivId"] for p in rows[0]["papers"]["nodes"]]
        nodes = (await archive["raw"](document, {"sort": "OLDEST"}))["papers"]["nodes"]
        assert type(nodes) is not orjson.Fragment
    finally:
        await conn.execute("UPDATE papers SET arxiv_id = '2401.00001' WHERE id = $1", archive["papers"][1])
        await conn.close()


async def test_a_paper_of_many_fields_is_written_too(archive: dict[str, Any]) -> None:
    # More values than a PostgreSQL function takes arguments (100): the text is joined in parts.
    fields = " ".join(f"f{i}: title" for i in range(120))
    document = f"query {{ papers(sort: OLDEST, first: 10) {{ nodes {{ {fields} authors {{ name }} }} }} }}"
    rows, written, _ = await both(archive, document, {})
    assert written == rows and not rows[1] and list(written[0]["papers"]["nodes"][0])[-2:] == ["f119", "authors"]
    assert type((await archive["raw"](document, {}))["papers"]["nodes"]) is orjson.Fragment


def test_a_statement_leaves_with_its_document() -> None:
    import gc

    import resolvers.written as written

    document = parse("{ papers { nodes { title authors { name } } } }")
    nodes = document.definitions[0].selection_set.selections[0].selection_set.selections[0]  # type: ignore[attr-defined]
    authors = nodes.selection_set.selections[1]
    assert written.nodes_json(nodes, {}) is not None and written.authors_json(authors) is not None
    keys = id(nodes), id(authors)
    assert keys[0] in written._NODES and keys[1] in written._AUTHORS
    del document, nodes, authors
    gc.collect()
    assert keys[0] not in written._NODES and keys[1] not in written._AUTHORS
