"""Papers' author lists as JSON text that PostgreSQL writes, for answers that pass it on without decoding it.

A page of 24 papers has about 190 authorships, their researchers and their institutions: read as rows, each becomes
a Python object and then a dict before it is encoded again. Written here, each paper's list arrives as one string.
What to write comes as a `Shape` (which JSON key holds which value, in order), so the text has exactly the keys
and order the caller asked for; values are written as `to_json` writes them (strings escaped, numbers and booleans
bare) and the arrays and objects are joined without spaces, as a compact encoder would.

The vocabulary of values is the rows' own (db/queries/papers.py, researchers.py, institutions.py): a column, a
global id, a slug, a constant string. Keys and constants must be GraphQL names (`[_A-Za-z][_0-9A-Za-z]*`): they
are written into the statement, so anything else is refused.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from db.connection import Conn
from db.keys import Keyed

_NAME: Final = re.compile(r"[_A-Za-z][_0-9A-Za-z]*")
INT_MAX: Final = 2**31 - 1

# Values of an authorship (a), its researcher (r) and an institution (i), as JSON text.
_AUTHORSHIP: Final = {
    "position": "a.position::text",
    "name": "to_json(a.name)::text",
    "affiliation": "coalesce(to_json(a.affiliation)::text, 'null')",
    "is_collaboration": "CASE WHEN a.is_collaboration THEN 'true' ELSE 'false' END",
}
_RESEARCHER: Final = {
    "id": "r.id::text",
    "name": "to_json(r.name)::text",
    "slug": "to_json(CASE WHEN r.name_slug = '' THEN r.id::text ELSE r.id || '-' || r.name_slug END)::text",
}
_INSTITUTION: Final = {
    "id": "i.id::text",
    "name": "to_json(i.name)::text",
    "slug": "to_json(CASE WHEN i.name_slug = '' THEN i.id::text ELSE i.id || '-' || i.name_slug END)::text",
    "ror_id": "to_json(i.ror_id)::text",
    "country": "coalesce(to_json(i.country)::text, 'null')",
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
        elif value.kind == "global_id" and _NAME.fullmatch(value.arg):
            parts.append(_global_id(value.arg, alias))
        elif value.kind == "constant" and _NAME.fullmatch(value.arg):
            parts.append(f"'\"{value.arg}\"'")
        elif value.kind in nested and value.shape is not None:
            parts.append(nested[value.kind])
        else:
            raise ShapeRefused(f"{value.kind} {value.arg!r} is not a value of this object")
    return " || ".join([*parts, "'}'"])


@dataclass(frozen=True, slots=True)
class AuthorsStatement:
    """The statement writing each paper's author list in one shape, both forms of `db/keys.py`."""

    keyed: Keyed

    @classmethod
    def of(cls, shape: Shape) -> AuthorsStatement:
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
    SELECT '[' || string_agg({_object(institutions, "i", _INSTITUTION, {})}, ',' ORDER BY i.name, i.id) || ']' AS list,
           max(i.id) AS top
    FROM authorship_institutions ai JOIN institutions i ON i.id = ai.institution_id
    WHERE ai.paper_id = a.paper_id AND ai.position = a.position
) ins ON true""")
            tops.append("max(ins.top)")
        authorship = _object(shape, "a", _AUTHORSHIP, nested)
        join_text = "\n".join(joins)
        template = f"""
SELECT a.paper_id, '[' || string_agg({authorship}, ',' ORDER BY a.position) || ']' AS authors,
       greatest({", ".join(tops)}) AS top_id
FROM authorships a
{join_text}
WHERE a.paper_id {{in_keys}}
GROUP BY a.paper_id
"""
        return cls(Keyed.of(template))


async def fetch_authors_json(conn: Conn, statement: AuthorsStatement, paper_ids: Sequence[int]) -> dict[int, str]:
    """Each paper's author list as JSON text; a paper without authorships is `[]`. A paper whose list holds an id
    beyond a 32-bit integer is left out: its ids cannot be written as GraphQL `Int`s, so the caller reads rows and
    answers the error GraphQL gives for them."""
    found = {pid: "[]" for pid in paper_ids}
    for record in await conn.fetch(*statement.keyed.bind(paper_ids)):
        top = record["top_id"]
        if top is not None and top > INT_MAX:
            del found[record["paper_id"]]
        else:
            found[record["paper_id"]] = record["authors"]
    return found
