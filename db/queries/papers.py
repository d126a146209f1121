"""Reads of papers and their authorships."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Literal, Protocol

import asyncpg

from db.connection import Conn
from db.filters import Clause, Fragment, Sort, compose
from db.keys import Keyed
from db.queries import category_lists, owner_listings
from db.queries.institutions import InstitutionRow
from db.queries.owners import count_of_owners, page_of_owners, read_pages
from db.queries.researchers import RESEARCHER_COLUMNS_R_, RESEARCHERS, ResearcherRow
from db.rows import CountedRows, RowShape, select_list

# A journal DOI (lower case), a Semantic Scholar paper id or corpus id, an OpenAlex work id.
PaperExternalIdKind = Literal["doi", "s2", "corpus", "openalex"]


@dataclass(slots=True)
class AuthorshipRow:
    paper_id: int
    position: int
    name: str
    researcher_id: int | None
    affiliation: str | None
    is_collaboration: bool
    # Filled by page-shaped reads; None means "not fetched", so readers fall back to a loader.
    prefetched_researcher: ResearcherRow | None = None
    prefetched_institutions: list[InstitutionRow] | None = None


AUTHORSHIPS = RowShape(AuthorshipRow)


@dataclass(slots=True)
class PaperRow:
    id: int
    arxiv_id: str
    version: int
    slug: str
    title: str
    abstract: str
    authors_text: str
    categories: list[str]
    primary_category: str
    published: datetime
    updated: datetime
    doi: str | None
    journal_ref: str | None
    comments: str | None
    cited_by_count: int | None
    author_count: int
    summary: str | None
    topics: list[str] | None
    paper_type: str | None
    research_field: str | None
    novelty: str | None
    significance_score: float | None
    analysed: bool
    modified_at: datetime
    analysed_at: datetime | None
    analysis_model: str | None
    withdrawn: bool
    license: str | None
    s2_paper_id: str | None
    s2_corpus_id: int | None
    openalex_id: str | None
    prefetched_authors: list[AuthorshipRow] | None = None
    # Or their answers already written as JSON (db/queries/written.py), each with the field node it answers.
    prefetched_authors_json: tuple[object, object] | None = None
    prefetched_versions_json: tuple[object, object] | None = None
    # The authors written by the statement that read the row: how (db/queries/written.py) and the JSON text.
    written_authors: tuple[object, str] | None = None


PAPERS = RowShape(PaperRow)


class WrittenAuthors(Protocol):
    """How a statement reading papers `p` also writes their authors (db/queries/written.AuthorsStatement)."""

    @property
    def lateral(self) -> str: ...
    @property
    def columns(self) -> str: ...
    def read(self, record: asyncpg.Record) -> str | None: ...


# Every field of a PaperRow, named as the field.
PAPER_COLUMNS = select_list("p", PAPERS.fields)


def paper_from_record(record: asyncpg.Record) -> PaperRow:
    """From a record with the columns of PAPER_COLUMNS, wherever they are."""
    return PAPERS.build(record)


SELECT_PAPERS_BY_IDS = Keyed.of(f"SELECT {PAPER_COLUMNS} FROM papers p WHERE p.id {{in_keys}}")
SELECT_PAPERS_BY_ARXIV_IDS = Keyed.of(f"SELECT {PAPER_COLUMNS} FROM papers p WHERE p.arxiv_id {{in_keys}}", "text")
SELECT_PAPERS_BY_SLUGS = Keyed.of(f"SELECT {PAPER_COLUMNS} FROM papers p WHERE p.slug {{in_keys}}", "text")
# A journal DOI may be shared by a paper and its duplicates: the oldest paper answers for it.
_SELECT_BY_EXTERNAL: dict[PaperExternalIdKind, str] = {
    "doi": f"SELECT {PAPER_COLUMNS} FROM papers p WHERE lower(p.doi) = $1::text ORDER BY p.id LIMIT 1",
    "s2": f"SELECT {PAPER_COLUMNS} FROM papers p WHERE p.s2_paper_id = $1::text",
    "corpus": f"SELECT {PAPER_COLUMNS} FROM papers p WHERE p.s2_corpus_id = $1::text::bigint",
    "openalex": f"SELECT {PAPER_COLUMNS} FROM papers p WHERE p.openalex_id = $1::text",
}
SELECT_VERSIONS = Keyed.of("""
SELECT v.paper_id, v.version, v.submitted_at, v.size_kb, v.source_type
FROM paper_versions v WHERE v.paper_id {in_keys}
ORDER BY v.paper_id, v.version
""")
SELECT_AUTHORSHIPS = Keyed.of("""
SELECT a.paper_id, a.position, a.name, a.researcher_id, a.affiliation, a.is_collaboration
FROM authorships a WHERE a.paper_id {in_keys}
ORDER BY a.paper_id, a.position
""")
# The researcher's columns are prefixed r_: both row types have `id` and `name`.
SELECT_AUTHORSHIPS_WITH_RESEARCHERS = Keyed.of(f"""
SELECT a.paper_id, a.position, a.name, a.researcher_id, a.affiliation, a.is_collaboration, {RESEARCHER_COLUMNS_R_}
FROM authorships a LEFT JOIN researchers r ON r.id = a.researcher_id
WHERE a.paper_id {{in_keys}}
ORDER BY a.paper_id, a.position
""")


async def fetch_papers_by_ids(conn: Conn, ids: Sequence[int]) -> list[PaperRow]:
    return PAPERS.build_all(await conn.fetch(*SELECT_PAPERS_BY_IDS.bind(ids)))


async def fetch_papers_by_arxiv_ids(conn: Conn, arxiv_ids: Sequence[str]) -> list[PaperRow]:
    return PAPERS.build_all(await conn.fetch(*SELECT_PAPERS_BY_ARXIV_IDS.bind(arxiv_ids)))


async def fetch_papers_by_slugs(conn: Conn, slugs: Sequence[str]) -> list[PaperRow]:
    return PAPERS.build_all(await conn.fetch(*SELECT_PAPERS_BY_SLUGS.bind(slugs)))


async def fetch_paper_by_external_id(conn: Conn, kind: PaperExternalIdKind, value: str) -> PaperRow | None:
    record = await conn.fetchrow(_SELECT_BY_EXTERNAL[kind], value)
    return paper_from_record(record) if record else None


@dataclass(frozen=True, slots=True)
class VersionRow:
    paper_id: int
    version: int
    submitted_at: datetime
    size_kb: int | None
    source_type: str | None


_VERSIONS = RowShape(VersionRow)


async def fetch_versions(conn: Conn, paper_ids: Sequence[int]) -> list[VersionRow]:
    """Every version of these papers, by paper then version number."""
    return _VERSIONS.build_all(await conn.fetch(*SELECT_VERSIONS.bind(paper_ids)))


async def fetch_authorships(
    conn: Conn, paper_ids: Sequence[int], *, with_researchers: bool = False
) -> list[AuthorshipRow]:
    """Authorships of these papers ordered by paper and position; optionally with their researchers (one object
    per researcher across the result: a co-author on many papers of a page is built once)."""
    if not with_researchers:
        return AUTHORSHIPS.build_all(await conn.fetch(*SELECT_AUTHORSHIPS.bind(paper_ids)))
    records = await conn.fetch(*SELECT_AUTHORSHIPS_WITH_RESEARCHERS.bind(paper_ids))
    if not records:
        return []
    authorship, researcher = AUTHORSHIPS.reader(records[0]), RESEARCHERS.reader(records[0], "r_")
    researchers: dict[int, ResearcherRow] = {}
    rows = []
    for r in records:
        row = authorship(r)
        rid = row.researcher_id
        if rid is not None:
            found = researchers.get(rid)
            row.prefetched_researcher = found if found is not None else researchers.setdefault(rid, researcher(r))
        rows.append(row)
    return rows


def page_statement(
    clauses: Sequence[Clause],
    sort: Sort,
    columns: str | None,
    joins: str,
    *,
    limit: int,
    offset: int,
    count: bool,
) -> tuple[str, list[object], bool]:
    """A page's statement, its arguments, and whether its rows hold the list's total (`listed_total`, asked for by
    `count`, read when the statement can). `columns` (None: PAPER_COLUMNS) and `joins` are over the page's papers
    `p`: the joins run for the page's rows only."""
    listed_columns = columns or PAPER_COLUMNS
    listed = category_lists.page_statement(
        clauses, sort, listed_columns, limit=limit, offset=offset, joins=joins, count=count
    )
    if listed is not None:
        return listed[0], listed[1], count
    where, args = compose(clauses)
    n = len(args)
    order = sort.order_by
    sql = f"SELECT {PAPER_COLUMNS} FROM papers p WHERE {where} ORDER BY {order} LIMIT ${n + 1} OFFSET ${n + 2}"
    # With more than the paper's columns, the page first: they are written for its rows only.
    page = sql if columns is None else f"SELECT {columns} FROM ({sql}) p {joins} ORDER BY {order}"
    return page, [*args, limit, offset], False


async def page_papers(
    conn: Conn,
    clauses: Sequence[Clause],
    sort: Sort,
    *,
    limit: int,
    offset: int = 0,
    authors: WrittenAuthors | None = None,
    count: bool = False,
) -> CountedRows[PaperRow]:
    """A page of papers. `authors`: their authors are written in the same statement, joined to the page's rows only,
    into each row's `written_authors` (with `authors`, which says in what shape). `count`: the list's total too,
    when the statement can read it with the page (a category's list, from its stored count): the rows' `total`."""
    joins = authors.lateral if authors is not None else ""
    columns = f"{PAPER_COLUMNS}, {authors.columns}" if authors is not None else None
    sql, args, counted = page_statement(clauses, sort, columns, joins, limit=limit, offset=offset, count=count)
    records = await conn.fetch(sql, *args)
    rows = CountedRows(PAPERS.build_all(records), records[0]["listed_total"] if counted and records else None)
    if authors is not None:
        for row, record in zip(rows, records, strict=True):
            text = authors.read(record)
            row.written_authors = (authors, text) if text is not None else None
    return rows


async def page_papers_scanning(
    conn: Conn,
    *,
    matches: Clause,
    scan: Clause,
    collect: Clause,
    clauses: Sequence[Clause],
    sort: Sort,
    limit: int,
    offset: int = 0,
) -> list[PaperRow]:
    """A page of the papers that `scan` (a test per paper) and `collect` (the same set as ids) both describe, in one
    statement, read the cheaper way. `matches` estimates how many papers match (M, reading no row of `papers`).

    With T papers in all and R rows wanted (limit + offset), walking papers in the sort's order finds R matches
    after about R*T/M papers, and collecting costs M primary-key fetches: equal at M = sqrt(R*T). Above that the
    walk is tried first, over at most 4*R*T/M papers (four times what it should need, at least 4*R): matches
    bunched in the past (a researcher who stopped publishing) must not make it read the whole archive. When it
    finds fewer than R, the collected set answers instead. `clauses` (filters, a cursor) apply to both. (The
    estimate's OFFSET 0 keeps PostgreSQL from computing M once for each place it is used.)
    """
    want = limit + offset
    where_matches, args = compose([matches], offset=1)
    where_scan, more = compose([scan], offset=1 + len(args))
    args += more
    where_collect, more = compose([collect], offset=1 + len(args))
    args += more
    where, more = compose(clauses, offset=1 + len(args))
    args += more
    n = len(args) + 2  # after $1 (the rows wanted) and the clauses' parameters
    order = sort.order_by
    sql = f"""
WITH estimate AS MATERIALIZED (
    SELECT e.m * e.m > e.t * $1::int AS walk, greatest(ceil(4 * $1::int * e.t / greatest(e.m, 1)), 4 * $1::int) AS cap
    FROM (SELECT ({where_matches})::float8 AS m,
                 (SELECT greatest(c.reltuples, 1) FROM pg_class c WHERE c.oid = 'papers'::regclass)::float8 AS t
          OFFSET 0) e
), walked AS MATERIALIZED (
    SELECT * FROM (SELECT {PAPER_COLUMNS} FROM papers p WHERE (SELECT walk FROM estimate) AND {where}
                   ORDER BY {order} LIMIT (SELECT cap FROM estimate)::bigint) p
    WHERE {where_scan} ORDER BY {order} LIMIT $1::int
)
SELECT * FROM (
    SELECT * FROM walked WHERE (SELECT count(*) FROM walked) = $1::int
    UNION ALL
    (SELECT {PAPER_COLUMNS} FROM papers p WHERE (SELECT count(*) FROM walked) < $1::int AND {where_collect} AND {where}
     ORDER BY {order} LIMIT $1::int)
) p ORDER BY {order} LIMIT ${n} OFFSET ${n + 1}"""
    return PAPERS.build_all(await conn.fetch(sql, want, *args, limit, offset))


async def page_papers_of_owners(
    conn: Conn,
    owner: Fragment,
    owner_ids: Sequence[int],
    clauses: Sequence[Clause],
    sort: Sort,
    *,
    limit: int,
    offset: int = 0,
    count: bool = False,
) -> dict[int, CountedRows[PaperRow]]:
    """The same page of papers for each owner (a researcher's or an institution's papers), in one statement;
    `count`: with each owner's count where the owners' listings serve the page (else the pages' totals are None)."""
    listed = owner_listings.page_statement(
        owner, owner_ids, clauses, sort, columns=PAPER_COLUMNS, limit=limit, offset=offset, count=count
    )
    if listed is not None:
        return await read_pages(conn, PAPERS, owner_ids, *listed)
    return await page_of_owners(
        conn,
        PAPERS,
        owner,
        owner_ids,
        clauses,
        sort,
        columns=PAPER_COLUMNS,
        source="papers p",
        limit=limit,
        offset=offset,
        # The page chosen from migration 0026's covering index: an institution has up to 200k papers to sort.
        by_id=True,
    )


async def count_papers_of_owners(
    conn: Conn, owner: Fragment, owner_ids: Sequence[int], clauses: Sequence[Clause]
) -> dict[int, int]:
    listed = owner_listings.count_statement(owner, owner_ids, clauses)
    if listed is not None:
        return {record[0]: record[1] for record in await conn.fetch(listed[0], *listed[1])}
    return await count_of_owners(conn, owner, owner_ids, clauses, source="papers p")


async def count_papers(conn: Conn, clauses: Sequence[Clause]) -> int:
    listed = category_lists.count_statement(clauses)
    if listed is not None:
        listed_count: int = await conn.fetchval(listed[0], *listed[1])
        return listed_count
    where, args = compose(clauses)
    count: int = await conn.fetchval(f"SELECT count(*) FROM papers p WHERE {where}", *args)
    return count
