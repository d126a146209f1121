"""Rows are built from records by column name: a statement's column order, extra columns or a prefix never
shift a row's fields."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime

import asyncpg
import pytest

from db.queries.institutions import INSTITUTIONS, institution_from_record
from db.queries.papers import AUTHORSHIPS, PAPERS, PaperRow
from db.queries.researchers import RESEARCHERS, ResearcherRow, researcher_from_record
from db.rows import ShapeError

WHEN = datetime(2024, 5, 1, 12, 0, tzinfo=UTC)
RESEARCHER = ResearcherRow(
    id=7,
    name="Ada Lovelace",
    name_slug="ada-lovelace",
    s2_author_id="s2-7",
    openalex_id="A7",
    orcid=None,
    paper_count=3,
    h_index=2,
    i10_index=1,
    citation_count=40,
    works_count=5,
    modified_at=WHEN,
    follower_count=9,
    claimed=True,
)


def _select(values: dict[str, object], prefix: str = "") -> tuple[str, list[object]]:
    """A SELECT of literal parameters named `prefix + key`, in reversed field order."""
    names = list(reversed(values))
    cols = ", ".join(f"${i + 1}::{_cast(values[name])} AS {prefix}{name}" for i, name in enumerate(names))
    return f"SELECT 'noise' AS extra, {cols}", [values[n] for n in names]


def _cast(value: object) -> str:
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "bigint"
    return "timestamptz" if isinstance(value, datetime) else "text"


@pytest.fixture
async def conn(pg_admin_dsn: str) -> AsyncIterator[asyncpg.Connection]:
    connection = await asyncpg.connect(pg_admin_dsn)
    yield connection
    await connection.close()


async def _row(conn: asyncpg.Connection, sql: str, *args: object) -> asyncpg.Record:
    record = await conn.fetchrow(sql, *args)
    assert record is not None
    return record


def _fields(row: object, names: tuple[str, ...]) -> dict[str, object]:
    return {n: getattr(row, n) for n in names}


async def test_a_researcher_is_read_by_name_whatever_the_column_order(conn: asyncpg.Connection) -> None:
    values = _fields(RESEARCHER, RESEARCHERS.fields)
    sql, args = _select(values)
    record = await _row(conn, sql, *args)
    assert researcher_from_record(record) == RESEARCHER
    assert RESEARCHERS.build_all([record, record]) == [RESEARCHER, RESEARCHER]


async def test_a_prefix_tells_two_row_types_of_one_record_apart(conn: asyncpg.Connection) -> None:
    values = _fields(RESEARCHER, RESEARCHERS.fields)
    sql, args = _select(values, prefix="r_")
    n = len(args)
    sql += f", ${n + 1}::bigint AS paper_id, ${n + 2}::int AS position, ${n + 3}::text AS name"
    sql += f", ${n + 4}::bigint AS researcher_id, NULL::text AS affiliation, false AS is_collaboration"
    record = await _row(conn, sql, *args, 11, 2, "A. Lovelace", 7)
    assert researcher_from_record(record, "r_") == RESEARCHER
    authorship = AUTHORSHIPS.build(record)
    assert (authorship.paper_id, authorship.position, authorship.name, authorship.researcher_id) == (
        11,
        2,
        "A. Lovelace",
        7,
    )


async def test_a_missing_or_repeated_column_is_an_error_not_a_shifted_row(conn: asyncpg.Connection) -> None:
    values = _fields(RESEARCHER, RESEARCHERS.fields)
    del values["orcid"]
    sql, args = _select(values)
    record = await _row(conn, sql, *args)
    with pytest.raises(ShapeError, match="orcid"):
        researcher_from_record(record)
    twice = await _row(conn, "SELECT 1 AS id, 2 AS id")
    with pytest.raises(ShapeError, match="twice"):
        INSTITUTIONS.build(twice)
    with pytest.raises(ShapeError):
        institution_from_record(twice)


async def test_paper_statements_name_every_field(database_url: str) -> None:
    """The statements the API reads papers with return each PaperRow field under its own name."""
    conn = await asyncpg.connect(database_url)
    try:
        from db.queries.papers import PAPER_COLUMNS

        stmt = await conn.prepare(f"SELECT {PAPER_COLUMNS} FROM papers p LIMIT 0")
        names = [a.name for a in stmt.get_attributes()]
    finally:
        await conn.close()
    assert names == list(PAPERS.fields)
    assert "prefetched_authors" not in PAPERS.fields
    assert PaperRow.__name__ == PAPERS.cls.__name__
