"""A paper's lists (its authors, its versions), or a page's papers whole, as JSON text that PostgreSQL writes, for
answers that pass it on without decoding it.

A page of 24 papers has about 190 authorships, their researchers and their institutions: read as rows, each becomes
a Python object and then a dict before it is encoded again. Written here, each paper's list arrives as one string.
What to write comes as a `Shape` (which JSON key holds which value, in order), so the text has exactly the keys
and order the caller asked for; values are written as the API's own encoding writes them (`to_json` for strings,
numbers and booleans bare, timestamps as Python's `isoformat`), and arrays and objects are joined without spaces.

The vocabulary of values is the rows' own (db/queries/papers.py, researchers.py, institutions.py): a column, a
global id, a slug, a constant string. Keys and constants must be GraphQL names (`[_A-Za-z][_0-9A-Za-z]*`): they
are written into the statement, so anything else is refused.

Each list is a LATERAL subquery over a paper `p`, so one statement can read a page's lists (`AuthorsStatement`),
a paper together with its lists (`PaperStatement`), or a page's papers each written as one object (`NodesStatement`).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Final

import asyncpg

from db.connection import Conn
from db.filters import Clause, Fragment, Sort
from db.keys import Keyed
from db.queries import owner_listings
from db.queries.papers import PAPER_COLUMNS, PaperRow, page_statement, paper_from_record
from db.rows import CountedRows

_NAME: Final = re.compile(r"[_A-Za-z][_0-9A-Za-z]*")
INT_MAX: Final = 2**31 - 1


def _timestamp(column: str) -> str:
    # Python's isoformat of an aware UTC datetime (what the API's DateTime writes): microseconds only when not 0.
    utc = f"({column} AT TIME ZONE 'UTC')"
    return f"""'"' || replace(to_char({utc}, 'YYYY-MM-DD"T"HH24:MI:SS.US'), '.000000', '') || '+00:00"'"""


def _slug(alias: str) -> str:
    # db/slugs.entity_slug
    slug = f"CASE WHEN {alias}.name_slug = '' THEN {alias}.id::text ELSE {alias}.id || '-' || {alias}.name_slug END"
    return f"to_json({slug})::text"


def global_id_sql(type_name: str, key: str) -> str:
    # db/paging.encode_global_id: urlsafe base64 of `Type:key` without padding, which needs no escaping in JSON.
    # PostgreSQL breaks base64 lines at 76 characters: keys are short enough (GLOBAL_KEY_MAX_BYTES) to have none.
    encoded = f"encode(convert_to('{type_name}:' || {key}, 'UTF8'), 'base64')"
    return f"""'"' || rtrim(replace(replace({encoded}, '+', '-'), '/', '_'), '=') || '"'"""


# The longest key a global id is written for: base64's line break comes after 57 bytes (even the last line's),
# `Type:` included. Ids are numbers (20 digits at most); an arXiv id longer than this (none is) is answered from rows.
GLOBAL_KEY_MAX_BYTES: Final = 56 - len("Institution:")


# A nullable column's value: its JSON, or null.
def _text(column: str) -> str:
    return f"coalesce(to_json({column})::text, 'null')"


def _float(column: str) -> str:
    # float8's shortest text is Python's repr but for whole numbers (1 for 1.0). A real is widened first: the API
    # reads it as the double it is (0.7 as 0.699999988079071).
    return f"coalesce(regexp_replace({column}::float8::text, '^(-?[0-9]+)$', '\\1.0'), 'null')"


def _bool(column: str) -> str:
    return f"CASE WHEN {column} THEN 'true' ELSE 'false' END"


def _texts(column: str) -> str:
    return f"coalesce(array_to_json({column})::text, 'null')"


# Values of an authorship (a), its researcher (r), an institution (i) and a version (v), as JSON text.
_AUTHORSHIP: Final = {
    "position": "a.position::text",
    "name": "to_json(a.name)::text",
    "affiliation": _text("a.affiliation"),
    "is_collaboration": _bool("a.is_collaboration"),
}
_RESEARCHER: Final = {
    "id": "r.id::text",
    "name": "to_json(r.name)::text",
    "slug": _slug("r"),
    "claimed": _bool("r.claimed"),
}
_INSTITUTION: Final = {
    "id": "i.id::text",
    "name": "to_json(i.name)::text",
    "slug": _slug("i"),
    "ror_id": "to_json(i.ror_id)::text",
    "country": _text("i.country"),
}
_VERSION: Final = {
    "version": "v.version::text",
    "submitted_at": _timestamp("v.submitted_at"),
    "size_kb": "coalesce(v.size_kb::text, 'null')",
    "source_type": _text("v.source_type"),
}


# Values of a paper (p), and the test each needs for the row to be written as the API would answer it (an id past
# a GraphQL Int, an infinite time, a NULL in a list of strings: rows answer those). The table's checks keep paper
# types within the enum and scores within 0 to 1 (no NaN).
_PAPER: Final = {
    "node_id": global_id_sql("Paper", "p.arxiv_id"),
    "id": "p.id::text",
    "arxiv_id": "to_json(p.arxiv_id)::text",
    "version": "p.version::text",
    "slug": "to_json(p.slug)::text",
    "title": "to_json(p.title)::text",
    "abstract": "to_json(p.abstract)::text",
    "authors_text": "to_json(p.authors_text)::text",
    "categories": _texts("p.categories"),
    "primary_category": "to_json(p.primary_category)::text",
    "published": _timestamp("p.published"),
    "updated": _timestamp("p.updated"),
    "abs_url": "to_json('https://arxiv.org/abs/' || p.arxiv_id)::text",  # db/ids.arxiv_abs_url
    "pdf_url": "to_json('https://arxiv.org/pdf/' || p.arxiv_id)::text",  # db/ids.arxiv_pdf_url
    "doi": _text("p.doi"),
    "journal_ref": _text("p.journal_ref"),
    "comments": _text("p.comments"),
    "license": _text("p.license"),
    "withdrawn": _bool("p.withdrawn"),
    "modified_at": _timestamp("p.modified_at"),
    "cited_by_count": "coalesce(p.cited_by_count::text, 'null')",
    "summary": _text("p.summary"),
    "topics": _texts("p.topics"),
    "paper_type": _text("p.paper_type"),
    "research_field": _text("p.research_field"),
    "novelty": _text("p.novelty"),
    "significance_score": _float("p.significance_score"),
    "analysed": _bool("p.analysed"),
    "analysed_at": f"CASE WHEN p.analysed_at IS NULL THEN 'null' ELSE {_timestamp('p.analysed_at')} END",
    "analysis_model": _text("p.analysis_model"),
}
_PAPER_GUARDS: Final = {
    "node_id": f"octet_length(p.arxiv_id) <= {GLOBAL_KEY_MAX_BYTES}",
    "id": f"p.id <= {INT_MAX}",
    "categories": "array_position(p.categories, NULL) IS NULL",
    "published": "isfinite(p.published)",
    "updated": "isfinite(p.updated)",
    "modified_at": "isfinite(p.modified_at)",
    "topics": "array_position(p.topics, NULL) IS NULL",
    "analysed_at": "(p.analysed_at IS NULL OR isfinite(p.analysed_at))",
}


@dataclass(frozen=True, slots=True)
class Value:
    """One JSON value: `column` of the row, `global_id` of the row (`arg`: the type it names, as
    db/paging.encode_global_id spells it), `constant` (`arg`), or the authorship's `researcher` / `institutions`
    (`shape`: what to write of each)."""

    kind: str
    arg: str = ""
    shape: Shape | None = None


@dataclass(frozen=True, slots=True)
class Shape:
    """An object's keys in order, each with its value."""

    fields: tuple[tuple[str, Value], ...]


class ShapeRefused(ValueError):
    """A shape names a value this module cannot write."""


def _object(shape: Shape, alias: str, columns: dict[str, str], nested: dict[str, str], *, joined: bool = False) -> str:
    parts: list[str] = []
    for i, (key, value) in enumerate(shape.fields):
        if not _NAME.fullmatch(key):
            raise ShapeRefused(f"key {key!r} is not a name")
        parts.append(f"'{'{' if i == 0 else ','}\"{key}\":'")
        if value.kind == "column" and value.arg in columns:
            parts.append(columns[value.arg])
        elif value.kind == "global_id" and _NAME.fullmatch(value.arg) and "id" in columns:
            parts.append(global_id_sql(value.arg, f"{alias}.id"))
        elif value.kind == "constant" and _NAME.fullmatch(value.arg):
            parts.append(f"'\"{value.arg}\"'")
        elif value.kind in nested and value.shape is not None:
            parts.append(nested[value.kind])
        else:
            raise ShapeRefused(f"{value.kind} {value.arg!r} is not a value of this object")
    if joined:
        return _concat([*parts, "'}'"])
    return " || ".join([*parts, "'}'"])


def _concat(parts: list[str]) -> str:
    """One `concat` of the parts (one allocation where `||` copies the growing text at each step), nested where
    they pass the 100 arguments a function takes."""
    while len(parts) > _MAX_ARGS:
        parts = [f"concat({', '.join(parts[i : i + _MAX_ARGS])})" for i in range(0, len(parts), _MAX_ARGS)]
    return f"concat({', '.join(parts)})"


_MAX_ARGS: Final = 100


def _authors_lateral(shape: Shape, paper: str) -> str:
    """`(authors, authors_top)`: the list of paper `paper`'s authorships (NULL: none), and the largest id in it."""
    researcher = next((v.shape for _, v in shape.fields if v.kind == "researcher"), None)
    institutions = next((v.shape for _, v in shape.fields if v.kind == "institutions"), None)
    nested: dict[str, str] = {}
    joins: list[str] = []
    tops = ["NULL::bigint"]
    if researcher is not None:
        nested["researcher"] = (
            f"CASE WHEN r.id IS NULL THEN 'null' ELSE {_object(researcher, 'r', _RESEARCHER, {})} END"
        )
        joins.append("LEFT JOIN researchers r ON r.id = a.researcher_id")
        tops.append("max(r.id)")
    if institutions is not None:
        nested["institutions"] = "coalesce(ins.list, '[]')"
        joins.append(f"""LEFT JOIN LATERAL (
        SELECT '[' || string_agg({_object(institutions, "i", _INSTITUTION, {})}, ',' ORDER BY i.name, i.id) || ']'
                   AS list,
               max(i.id) AS top
        FROM authorship_institutions ai JOIN institutions i ON i.id = ai.institution_id
        WHERE ai.paper_id = a.paper_id AND ai.position = a.position
    ) ins ON true""")
        tops.append("max(ins.top)")
    authorship = _object(shape, "a", _AUTHORSHIP, nested)
    join_text = "\n    ".join(joins)
    return f"""LEFT JOIN LATERAL (
    SELECT '[' || string_agg({authorship}, ',' ORDER BY a.position) || ']' AS authors,
           greatest({", ".join(tops)}) AS authors_top
    FROM authorships a
    {join_text}
    WHERE a.paper_id = {paper}
) aw ON true"""


def _versions_lateral(shape: Shape, paper: str) -> str:
    """`(versions, versions_finite)`: paper `paper`'s versions (NULL: none), and whether every time is finite."""
    return f"""LEFT JOIN LATERAL (
    SELECT '[' || string_agg({_object(shape, "v", _VERSION, {})}, ',' ORDER BY v.version) || ']' AS versions,
           bool_and(isfinite(v.submitted_at)) AS versions_finite
    FROM paper_versions v WHERE v.paper_id = {paper}
) vw ON true"""


def _authors(record: asyncpg.Record) -> str | None:
    """The written list, `[]` for none; None when an id in it is past a 32-bit integer: such ids cannot be written
    as GraphQL `Int`s, so the caller reads rows and answers the error GraphQL gives for them."""
    top = record["authors_top"]
    return None if top is not None and top > INT_MAX else record["authors"] or "[]"


def _versions(record: asyncpg.Record) -> str | None:
    """The written list, `[]` for none; None when a time is infinite (rows then answer what they answer)."""
    return None if record["versions_finite"] is False else record["versions"] or "[]"


@dataclass(frozen=True, slots=True)
class AuthorsStatement:
    """Each paper's author list written in one shape: `keyed`, the statement for a page of paper ids; `lateral` and
    `columns`, the join and columns that write them beside papers `p` another statement reads (`read` one)."""

    keyed: Keyed
    lateral: str
    columns: str = "aw.authors, aw.authors_top"

    @classmethod
    def of(cls, shape: Shape) -> AuthorsStatement:
        by_key = _authors_lateral(shape, "k.paper_id")
        keyed = Keyed.of(f"SELECT k.paper_id, aw.authors, aw.authors_top FROM {{keys}} AS k(paper_id)\n{by_key}")
        return cls(keyed, _authors_lateral(shape, "p.id"))

    def read(self, record: asyncpg.Record) -> str | None:
        return _authors(record)


class ListedPaper:
    """A page's paper written as its node's JSON (`node`), with the columns the list's cursors and sorts read."""

    __slots__ = ("cited_by_count", "id", "node", "published")

    def __init__(self, id: int, published: datetime, cited_by_count: int | None, node: str) -> None:
        self.id = id
        self.published = published
        self.cited_by_count = cited_by_count
        self.node = node


@dataclass(frozen=True, slots=True)
class NodesStatement:
    """A page's papers each written as one node of the shape given (with its `authors`, when selected): `columns`
    and `lateral` join a statement reading papers `p`; `read` makes a record a ListedPaper, None when the row
    must be answered from its columns instead (a guard of _PAPER_GUARDS failed)."""

    columns: str
    lateral: str

    @classmethod
    def of(cls, shape: Shape) -> NodesStatement:
        nested: dict[str, str] = {}
        guards = [_PAPER_GUARDS[v.arg] for _, v in shape.fields if v.kind == "column" and v.arg in _PAPER_GUARDS]
        lateral = ""
        authors = next((v.shape for _, v in shape.fields if v.kind == "authors"), None)
        if authors is not None:
            nested["authors"] = "coalesce(aw.authors, '[]')"
            guards.append(f"coalesce(aw.authors_top, 0) <= {INT_MAX}")
            lateral = _authors_lateral(authors, "p.id")
        node = _object(shape, "p", _PAPER, nested, joined=True)
        ok = " AND ".join(dict.fromkeys(guards)) or "true"
        columns = f"p.id, p.published, p.cited_by_count, {node} AS written_node, {ok} AS written_ok"
        return cls(columns, lateral)

    @staticmethod
    def read(record: asyncpg.Record) -> ListedPaper | None:
        if not record["written_ok"]:
            return None
        return ListedPaper(record["id"], record["published"], record["cited_by_count"], record["written_node"])


async def page_papers_written(
    conn: Conn,
    clauses: Sequence[Clause],
    sort: Sort,
    statement: NodesStatement,
    *,
    limit: int,
    offset: int = 0,
    count: bool = False,
) -> CountedRows[ListedPaper] | None:
    """db/queries/papers.page_papers with each paper written as its node; None when a row cannot be (the page is
    then read as rows)."""
    sql, args, counted = page_statement(
        clauses, sort, statement.columns, statement.lateral, limit=limit, offset=offset, count=count
    )
    records = await conn.fetch(sql, *args)
    rows = [statement.read(r) for r in records]
    if None in rows:
        return None
    return CountedRows(rows, records[0]["listed_total"] if counted and records else None)  # type: ignore[arg-type]


async def page_papers_of_owners_written(
    conn: Conn,
    owner: Fragment,
    owner_ids: Sequence[int],
    clauses: Sequence[Clause],
    sort: Sort,
    statement: NodesStatement,
    *,
    limit: int,
    offset: int = 0,
    count: bool = False,
) -> dict[int, CountedRows[ListedPaper]] | None:
    """db/queries/papers.page_papers_of_owners with each paper written as its node, when the owners' listings serve
    the page; None when they do not or a row cannot be written (the pages are then read as rows)."""
    listed = owner_listings.page_statement(
        owner, owner_ids, clauses, sort, columns=statement.columns, limit=limit, offset=offset,
        inner=PAPER_COLUMNS, joins=statement.lateral, count=count,
    )  # fmt: skip
    if listed is None:
        return None
    pages: dict[int, CountedRows[ListedPaper]] = {owner_id: CountedRows() for owner_id in owner_ids}
    for record in await conn.fetch(listed[0], *listed[1]):
        row = statement.read(record)
        if row is None:
            return None
        page = pages[record["owner_id"]]
        page.append(row)
        if count:
            page.total = record["listed_total"]
    return pages


async def fetch_authors_json(conn: Conn, statement: AuthorsStatement, paper_ids: Sequence[int]) -> dict[int, str]:
    """Each paper's author list as JSON text (`[]` for none); a paper whose list cannot be written is left out."""
    found: dict[int, str] = {}
    for record in await conn.fetch(*statement.keyed.bind(paper_ids)):
        text = _authors(record)
        if text is not None:
            found[record["paper_id"]] = text
    return found


# How papers are looked up: the column their key is, and its type.
PAPER_KEYS: Final = {"arxiv": ("p.arxiv_id", "text"), "slug": ("p.slug", "text"), "id": ("p.id", "bigint")}


@dataclass(frozen=True, slots=True)
class PaperStatement:
    """Papers by one kind of key, with their authors and (`versions`) their versions written in the shapes given;
    both forms of db/keys.py (one key, a batch)."""

    keyed: Keyed
    versions: bool

    @classmethod
    def of(cls, key: str, authors: Shape, versions: Shape | None) -> PaperStatement:
        if key not in PAPER_KEYS:
            raise ShapeRefused(f"papers are not looked up by {key!r}")
        column, pg_type = PAPER_KEYS[key]
        laterals = [_authors_lateral(authors, "p.id")]
        columns = f"{column} AS written_key, aw.authors, aw.authors_top"
        if versions is not None:
            laterals.append(_versions_lateral(versions, "p.id"))
            columns += ", vw.versions, vw.versions_finite"
        joins = "\n".join(laterals)
        template = f"SELECT {PAPER_COLUMNS}, {columns}\nFROM papers p\n{joins}\nWHERE {column} {{in_keys}}"
        return cls(Keyed.of(template, pg_type), versions is not None)


async def fetch_papers_written(
    conn: Conn, statement: PaperStatement, keys: Sequence[str | int]
) -> dict[str | int, tuple[PaperRow, str | None, str | None]]:
    """By key, the paper, its authors and its versions as JSON text (None: not written, or not asked for)."""
    found: dict[str | int, tuple[PaperRow, str | None, str | None]] = {}
    for record in await conn.fetch(*statement.keyed.bind(keys)):
        versions = _versions(record) if statement.versions else None
        found[record["written_key"]] = (paper_from_record(record), _authors(record), versions)
    return found
