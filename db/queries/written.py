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

Each list is a LATERAL subquery over a paper `p`, so one statement can read a page's lists (`AuthorsStatement`), a
paper together with its lists (`PaperStatement`), or a page of papers each written whole (`NodesStatement`).

A value whose text could differ from the API's is not written: the paper's text is NULL when a guard fails (an id
past a 32-bit integer, an infinite time, a list holding NULL, a type outside the enum, a score PostgreSQL spells
otherwise than Python), and the caller answers from rows, errors included.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

import asyncpg

from db.connection import Conn
from db.ids import ARXIV_ABS, ARXIV_PDF
from db.keys import Keyed
from db.queries.papers import PAPER_COLUMNS, PaperRow, paper_from_record
from db.records import PAPER_TYPES

_NAME: Final = re.compile(r"[_A-Za-z][_0-9A-Za-z]*")
INT_MAX: Final = 2**31 - 1


def _timestamp(column: str) -> str:
    # Python's isoformat of an aware UTC datetime (what the API's DateTime writes): microseconds only when not 0.
    utc = f"({column} AT TIME ZONE 'UTC')"
    return (
        f"""'"' || to_char({utc}, 'YYYY-MM-DD"T"HH24:MI:SS') """
        f"""|| CASE WHEN to_char({utc}, 'US') = '000000' THEN '' ELSE '.' || to_char({utc}, 'US') END """
        """|| '+00:00"'"""
    )


def _nullable(column: str, text: str) -> str:
    return f"CASE WHEN {column} IS NULL THEN 'null' ELSE {text} END"


def _slug(alias: str) -> str:
    # db/slugs.entity_slug
    slug = f"CASE WHEN {alias}.name_slug = '' THEN {alias}.id::text ELSE {alias}.id || '-' || {alias}.name_slug END"
    return f"to_json({slug})::text"


# Values of an authorship (a), its researcher (r), an institution (i) and a version (v), as JSON text.
_AUTHORSHIP: Final = {
    "position": "a.position::text",
    "name": "to_json(a.name)::text",
    "affiliation": "coalesce(to_json(a.affiliation)::text, 'null')",
    "is_collaboration": "CASE WHEN a.is_collaboration THEN 'true' ELSE 'false' END",
}
_RESEARCHER: Final = {"id": "r.id::text", "name": "to_json(r.name)::text", "slug": _slug("r")}
_INSTITUTION: Final = {
    "id": "i.id::text",
    "name": "to_json(i.name)::text",
    "slug": _slug("i"),
    "ror_id": "to_json(i.ror_id)::text",
    "country": "coalesce(to_json(i.country)::text, 'null')",
}
_VERSION: Final = {
    "version": "v.version::text",
    "submitted_at": _timestamp("v.submitted_at"),
    "size_kb": "coalesce(v.size_kb::text, 'null')",
    "source_type": "coalesce(to_json(v.source_type)::text, 'null')",
}


def _text_list(column: str) -> tuple[str, str]:
    # A one-dimensional array without NULLs (GraphQL's [String!]); to_json writes it without spaces.
    return (
        f"coalesce(to_json({column})::text, 'null')",
        # (CASE: array_position refuses a multidimensional array, and AND may evaluate either side first.)
        f"CASE WHEN {column} IS NULL THEN true WHEN coalesce(array_ndims({column}), 1) <> 1 THEN false"
        f" ELSE array_position({column}, NULL) IS NULL END",
    )


def _score(column: str) -> tuple[str, str]:
    # A float4 as Python writes the float it reads as: integral values with `.0`. Below 1e-4 Python and PostgreSQL
    # choose different notations, and 1e15 is where PostgreSQL turns to exponents: those are not written.
    wide = f"{column}::float8"
    text = f"CASE WHEN {column} = trunc({column}) THEN {wide}::text || '.0' ELSE {wide}::text END"
    return _nullable(column, text), f"({column} IS NULL OR {column} = 0 OR {wide} BETWEEN 1e-4 AND 1e15 - 1)"


_TYPES = ", ".join(f"'{name}'" for name in PAPER_TYPES)
_TOPICS, _CATEGORIES, _SCORE = _text_list("p.topics"), _text_list("p.categories"), _score("p.significance_score")
# A paper's values (p) as JSON text, and what must hold for that text to be the API's (absent: always).
_PAPER: Final = {
    "id": "p.id::text",
    "arxiv_id": "to_json(p.arxiv_id)::text",
    "version": "p.version::text",
    "slug": "to_json(p.slug)::text",
    "title": "to_json(p.title)::text",
    "abstract": "to_json(p.abstract)::text",
    "authors_text": "to_json(p.authors_text)::text",
    "categories": "to_json(p.categories)::text",
    "primary_category": "to_json(p.primary_category)::text",
    "published": _timestamp("p.published"),
    "updated": _timestamp("p.updated"),
    "abs_url": f"to_json('{ARXIV_ABS}' || p.arxiv_id)::text",
    "pdf_url": f"to_json('{ARXIV_PDF}' || p.arxiv_id)::text",
    "doi": "coalesce(to_json(p.doi)::text, 'null')",
    "journal_ref": "coalesce(to_json(p.journal_ref)::text, 'null')",
    "comments": "coalesce(to_json(p.comments)::text, 'null')",
    "license": "coalesce(to_json(p.license)::text, 'null')",
    "withdrawn": "CASE WHEN p.withdrawn THEN 'true' ELSE 'false' END",
    "modified_at": _timestamp("p.modified_at"),
    "cited_by_count": "coalesce(p.cited_by_count::text, 'null')",
    "summary": "coalesce(to_json(p.summary)::text, 'null')",
    "topics": _TOPICS[0],
    "paper_type": "coalesce(to_json(p.paper_type)::text, 'null')",
    "research_field": "coalesce(to_json(p.research_field)::text, 'null')",
    "novelty": "coalesce(to_json(p.novelty)::text, 'null')",
    "significance_score": _SCORE[0],
    "analysed": "CASE WHEN p.analysed THEN 'true' ELSE 'false' END",
    "analysed_at": _nullable("p.analysed_at", _timestamp("p.analysed_at")),
    "analysis_model": "coalesce(to_json(p.analysis_model)::text, 'null')",
}
_PAPER_GUARDS: Final = {
    "id": f"p.id <= {2**31 - 1}",
    "categories": _CATEGORIES[1],
    "published": "isfinite(p.published)",
    "updated": "isfinite(p.updated)",
    "modified_at": "isfinite(p.modified_at)",
    "topics": _TOPICS[1],
    "paper_type": f"(p.paper_type IS NULL OR p.paper_type IN ({_TYPES}))",
    "significance_score": _SCORE[1],
    "analysed_at": "(p.analysed_at IS NULL OR isfinite(p.analysed_at))",
}


@dataclass(frozen=True, slots=True)
class Value:
    """One JSON value: `column` of the row, `global_id` of the row (`arg`: the type it names, as
    db/paging.encode_global_id spells it), `constant` (`arg`), the authorship's `researcher` / `institutions` or the
    paper's `authors` (`shape`: what to write of each)."""

    kind: str
    arg: str = ""
    shape: Shape | None = None


@dataclass(frozen=True, slots=True)
class Shape:
    """An object's keys in order, each with its value."""

    fields: tuple[tuple[str, Value], ...]


class ShapeRefused(ValueError):
    """A shape names a value this module cannot write."""


def _global_id(type_name: str, key: str) -> str:
    # db/paging.encode_global_id: urlsafe base64 of `Type:key` without padding (and base64's line breaks, which
    # PostgreSQL adds every 76 characters, removed).
    encoded = f"encode(convert_to('{type_name}:' || {key}, 'UTF8'), 'base64')"
    return f"to_json(rtrim(translate({encoded}, E'+/\\n', '-_'), '='))::text"


def _object(shape: Shape, alias: str, columns: dict[str, str], nested: dict[str, str], named: str = "") -> str:
    """`shape` written from the values of `alias`; `named`: what its global id names (its id by default)."""
    parts: list[str] = []
    for i, (key, value) in enumerate(shape.fields):
        if not _NAME.fullmatch(key):
            raise ShapeRefused(f"key {key!r} is not a name")
        parts.append(f"'{'{' if i == 0 else ','}\"{key}\":'")
        if value.kind == "column" and value.arg in columns:
            parts.append(columns[value.arg])
        elif value.kind == "global_id" and _NAME.fullmatch(value.arg) and "id" in columns:
            parts.append(_global_id(value.arg, named or f"{alias}.id"))
        elif value.kind == "constant" and _NAME.fullmatch(value.arg):
            parts.append(f"'\"{value.arg}\"'")
        elif value.kind in nested and value.shape is not None:
            parts.append(nested[value.kind])
        else:
            raise ShapeRefused(f"{value.kind} {value.arg!r} is not a value of this object")
    return " || ".join([*parts, "'}'"])


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


@dataclass(frozen=True, slots=True)
class NodesStatement:
    """A page's papers, each written whole in one shape: `lateral` and `columns` write it beside papers `p` another
    statement reads (`read` one: the text, None when a guard failed)."""

    lateral: str
    columns: str

    @classmethod
    def of(cls, shape: Shape) -> NodesStatement:
        guards = [_PAPER_GUARDS[v.arg] for _, v in shape.fields if v.kind == "column" and v.arg in _PAPER_GUARDS]
        nested: dict[str, str] = {}
        lateral = ""
        authors = next((v.shape for _, v in shape.fields if v.kind == "authors"), None)
        if authors is not None:
            lateral = _authors_lateral(authors, "p.id")
            nested["authors"] = "coalesce(aw.authors, '[]')"
            guards.append(f"(aw.authors_top IS NULL OR aw.authors_top <= {INT_MAX})")
        text = _object(shape, "p", _PAPER, nested, named="p.arxiv_id")
        condition = " AND ".join(dict.fromkeys(guards)) or "true"
        return cls(lateral, f"CASE WHEN {condition} THEN {text} END AS written_node")

    def read(self, record: asyncpg.Record) -> str | None:
        text: str | None = record["written_node"]
        return text


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
