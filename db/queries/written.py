"""A paper's lists (its authors, its versions) as JSON text that PostgreSQL writes, for answers that pass it on
without decoding it.

A page of 24 papers has about 190 authorships, their researchers and their institutions: read as rows, each becomes
a Python object and then a dict before it is encoded again. Written here, each paper's list arrives as one string.
What to write comes as a `Shape` (which JSON key holds which value, in order), so the text has exactly the keys
and order the caller asked for; values are written as the API's own encoding writes them (`to_json` for strings,
numbers and booleans bare, timestamps as Python's `isoformat`), and arrays and objects are joined without spaces.

The vocabulary of values is the rows' own (db/queries/papers.py, researchers.py, institutions.py): a column, a
global id, a slug, a constant string. Keys and constants must be GraphQL names (`[_A-Za-z][_0-9A-Za-z]*`): they
are written into the statement, so anything else is refused.

Each list is a LATERAL subquery over a paper `p`, so one statement can read a page's lists (`AuthorsStatement`) or
a paper together with its lists (`PaperStatement`).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

import asyncpg

from db.connection import Conn
from db.keys import Keyed
from db.queries.papers import PAPER_COLUMNS, PaperRow, paper_from_record

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
_RESEARCHER: Final = {
    "id": "r.id::text",
    "name": "to_json(r.name)::text",
    "slug": _slug("r"),
    "claimed": "CASE WHEN r.claimed THEN 'true' ELSE 'false' END",
}
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


def _global_id(type_name: str, alias: str) -> str:
    # db/paging.encode_global_id: urlsafe base64 of `Type:id` without padding (and base64's line breaks, which
    # PostgreSQL adds every 76 characters, removed).
    encoded = f"encode(convert_to('{type_name}:' || {alias}.id, 'UTF8'), 'base64')"
    return f"to_json(rtrim(translate({encoded}, E'+/\\n', '-_'), '='))::text"


def _object(shape: Shape, alias: str, columns: dict[str, str], nested: dict[str, str]) -> str:
    parts: list[str] = []
    for i, (key, value) in enumerate(shape.fields):
        if not _NAME.fullmatch(key):
            raise ShapeRefused(f"key {key!r} is not a name")
        parts.append(f"'{'{' if i == 0 else ','}\"{key}\":'")
        if value.kind == "column" and value.arg in columns:
            parts.append(columns[value.arg])
        elif value.kind == "global_id" and _NAME.fullmatch(value.arg) and "id" in columns:
            parts.append(_global_id(value.arg, alias))
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
