"""Autocomplete: researchers, institutions and papers whose name or title matches what the user is typing."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import asyncpg

from db.connection import Conn, read_only
from db.filters import escape_like
from db.paging import entity_global_id
from db.queries.institutions import INSTITUTION_COLUMNS, institution_from_record
from db.queries.researchers import RESEARCHER_COLUMNS, researcher_from_record
from db.queries.search.names import (
    NAME_CANDIDATES,
    NAME_MATCH,
    NAME_SCORE,
    NAME_SESSION,
    PREFIX_MATCH,
    is_short,
    search_institutions_by_name,
)

# Ordered by score, then paper count, then id; `after` ($4..$6, all null for none) continues from a row.
_NAME_PAGE = """
SELECT * FROM ({inner}) s
WHERE $4::float8 IS NULL OR s.score < $4::float8
   OR (s.score = $4::float8 AND (s.paper_count < $5::int OR (s.paper_count = $5::int AND s.id > $6::bigint)))
ORDER BY s.score DESC, s.paper_count DESC, s.id
LIMIT $2::int OFFSET $3::int
"""


def _name_candidates(table: str, match: str, country: str = "", size: int = NAME_CANDIDATES) -> str:
    columns = "x.id, x.name, x.country" if country else "x.id, x.name"
    return f"""(SELECT c.id FROM {table} c WHERE {match.format(col="c.name")}{country.format(a="c")}
         LIMIT {size})
        UNION
        (SELECT t.id FROM (SELECT {columns} FROM {table} x
                           ORDER BY x.paper_count DESC, x.id LIMIT {size}) t
         WHERE {match.format(col="t.name")}{country.format(a="t")})"""


_COUNTRY_FILTER = " AND ($7::text IS NULL OR {a}.country = $7::text)"


def _researchers_page(match: str, score: str, candidates: str | None = None) -> str:
    candidates = candidates or _name_candidates("researchers", match)
    # The folded name is computed once per row and scored from there.
    return _NAME_PAGE.format(
        inner=f"""SELECT f.*, {score.format(col="f.fold_name")}::float8 AS score FROM (
        SELECT {RESEARCHER_COLUMNS}, wp_fold(r.name) AS fold_name, count(*) OVER () AS total
        FROM researchers r
        WHERE r.id IN ({candidates})) f"""
    )


def _institutions_page(match: str, score: str, size: int = NAME_CANDIDATES) -> str:
    candidates = _name_candidates("institutions", match, _COUNTRY_FILTER, size)
    return _NAME_PAGE.format(
        inner=f"""SELECT f.*, {score.format(col="f.fold_name")}::float8 AS score FROM (
        SELECT {INSTITUTION_COLUMNS}, wp_fold(i.name) AS fold_name, count(*) OVER () AS total
        FROM institutions i
        WHERE i.id IN ({candidates})) f"""
    )


# A suggestion list shows a handful: fewer candidates than a results page needs.
SUGGEST_CANDIDATES = 50
# Autocomplete reads prefixes first: of the surname being typed (the query's last word, `jing zh` -> `zh`; migration
# 0007's index, most papers first within a surname) and of the whole name. Only when they give fewer candidates
# than a page ($2) do the trigram index's matches join them, for typos and for words in the middle of a name.
# $7 is the query with LIKE's wildcards escaped. The surname's range is written with the index's own operators
# (bytewise, up to the last code point) so that it is read in index order, never rechecked row by row, and so that
# one generic plan serves every query (planning this statement costs more than running it).
_SUGGEST_CANDIDATES = f"""
    WITH prefixed AS (
        (SELECT c.id FROM researchers c
         WHERE wp_surname(c.name) ~>=~ wp_surname($7::text)
           AND wp_surname(c.name) ~<~ (wp_surname($7::text) || chr(1114111))
         ORDER BY wp_surname(c.name) USING ~<~, c.paper_count DESC, c.id LIMIT {SUGGEST_CANDIDATES})
        UNION
        (SELECT c.id FROM researchers c
         WHERE wp_fold(c.name) ~>=~ wp_fold($7::text) AND wp_fold(c.name) ~<~ (wp_fold($7::text) || chr(1114111))
         LIMIT {SUGGEST_CANDIDATES})
    )
    SELECT id FROM prefixed
    UNION
    (SELECT t.id
     FROM (SELECT x.id, x.name FROM researchers x ORDER BY x.paper_count DESC, x.id LIMIT {SUGGEST_CANDIDATES}) t
     WHERE {NAME_MATCH.format(col="t.name")})
    UNION
    (SELECT c.id FROM researchers c
     WHERE {NAME_MATCH.format(col="c.name")} AND (SELECT count(*) FROM prefixed) < $2::int
     LIMIT {SUGGEST_CANDIDATES})"""

_SUGGEST_PAGE = _researchers_page(NAME_MATCH, NAME_SCORE, candidates=_SUGGEST_CANDIDATES)
SUGGEST_INSTITUTIONS = _institutions_page(NAME_MATCH, NAME_SCORE, size=SUGGEST_CANDIDATES)
# One and two letters have no trigram to look up: a prefix of the folded name instead.
_RESEARCHERS_BY_PREFIX = _researchers_page(PREFIX_MATCH, "1.0")


async def _name_page(
    conn: Conn, sql: str, query: str, limit: int, offset: int, after: tuple[float, int, int] | None, *extra: object
) -> list[asyncpg.Record]:
    keyset = after if after is not None else (None, None, None)
    if sql in _PREFIX_PAGES:
        return await conn.fetch(sql, escape_like(query), limit, offset, *keyset, *extra)
    async with read_only(conn, NAME_SESSION):
        return await conn.fetch(sql, query, limit, offset, *keyset, *extra)


# --- autocomplete ------------------------------------------------------------------------------------

EntityKind = Literal["PAPER", "RESEARCHER", "INSTITUTION"]


@dataclass(frozen=True, slots=True)
class Suggestion:
    kind: EntityKind
    id: int
    label: str
    slug: str
    hint: str | None  # a paper's is its arXiv id
    score: float

    @property
    def node_id(self) -> str:
        return entity_global_id(self.kind, self.id, self.hint if self.kind == "PAPER" else None)


# A researcher's hint is their most recent institution: suggestions come with it, in one statement.
def _with_hints(page: str) -> str:
    return f"""
SELECT s.*, (SELECT i.name FROM researcher_institutions ri JOIN institutions i ON i.id = ri.institution_id
             WHERE ri.researcher_id = s.id
             ORDER BY ri.last_year DESC NULLS LAST, i.paper_count DESC, i.id LIMIT 1) AS hint
FROM ({page}) s
ORDER BY s.score DESC, s.paper_count DESC, s.id
"""


SUGGEST_RESEARCHERS = _with_hints(_SUGGEST_PAGE)
SUGGEST_RESEARCHERS_BY_PREFIX = _with_hints(_RESEARCHERS_BY_PREFIX)
# Prefix pages take the query with LIKE's wildcards escaped, and need no session settings.
_PREFIX_PAGES = (SUGGEST_RESEARCHERS_BY_PREFIX,)

# Papers by title words, the last word as a prefix (what the user is still typing): the most cited of at most
# PAPER_CANDIDATES matches (a two-letter prefix matches half the archive); withdrawn papers, which lists leave out,
# are not suggested.
PAPER_CANDIDATES = 500
SUGGEST_PAPERS = f"""
SELECT c.id, c.title, c.slug, c.arxiv_id, word_similarity(wp_fold($1::text), wp_fold(c.title))::float8 AS score
FROM (
    SELECT p.id, p.title, p.slug, p.arxiv_id, p.cited_by_count
    FROM papers p
    WHERE p.search_vector @@ to_tsquery('english', $2::text) AND NOT p.withdrawn
    LIMIT {PAPER_CANDIDATES}
) c
ORDER BY c.cited_by_count DESC NULLS LAST, c.id DESC
LIMIT $3::int
"""


def prefix_tsquery(query: str) -> str | None:
    """`graph neur` -> `'graph' & 'neur':*`: whole words, then the word being typed as a prefix (3+ letters)."""
    words = ["".join(ch for ch in w if ch.isalnum()) for w in query.split()]
    words = [w for w in words if w]
    if not words:
        return None
    parts = [f"'{w}'" for w in words[:-1]]
    last = words[-1]
    if len(last) >= 3:
        # The stored lexemes are stemmed (`learning` is `learn`): a half-typed word loses its last letters
        # so that it still prefixes the stem.
        parts.append(f"'{last[: max(3, len(last) - 2)]}':*")
    else:
        parts.append(f"'{last}'")
    return " & ".join(parts)


async def _suggest_researchers(conn: Conn, query: str, limit: int) -> list[Suggestion]:
    query = " ".join(query.split())
    if is_short(query):
        records = await _name_page(conn, SUGGEST_RESEARCHERS_BY_PREFIX, query, limit, 0, None)
    else:
        records = await _name_page(conn, SUGGEST_RESEARCHERS, query, limit, 0, None, escape_like(query))
    return [
        Suggestion("RESEARCHER", r["id"], r["name"], researcher_from_record(r).slug, r["hint"], r["score"])
        for r in records
    ]


async def _suggest_institutions(conn: Conn, query: str, limit: int) -> list[Suggestion]:
    query = " ".join(query.split())
    if is_short(query):
        rows = (await search_institutions_by_name(conn, query, limit=limit)).rows
    else:
        records = await _name_page(conn, SUGGEST_INSTITUTIONS, query, limit, 0, None, None)
        rows = [(institution_from_record(r), r["score"]) for r in records]
    return [Suggestion("INSTITUTION", i.id, i.name, i.slug, i.country, s) for i, s in rows]


async def _suggest_papers(conn: Conn, query: str, limit: int) -> list[Suggestion]:
    tsq = prefix_tsquery(query)
    if tsq is None:
        return []
    try:
        rows = await conn.fetch(SUGGEST_PAPERS, query, tsq, limit)
    except asyncpg.SyntaxOrAccessError:
        return []
    return [Suggestion("PAPER", r["id"], r["title"], r["slug"], r["arxiv_id"], r["score"]) for r in rows]


_SUGGESTERS = {"RESEARCHER": _suggest_researchers, "INSTITUTION": _suggest_institutions, "PAPER": _suggest_papers}


async def suggest(
    target: Conn | asyncpg.Pool, query: str, *, kinds: Sequence[EntityKind], limit: int
) -> list[Suggestion]:
    """Researchers, institutions and papers whose name or title matches what the user is typing.

    Up to `limit` of each kind are looked up, then the best `limit` across kinds are kept (name similarity;
    papers score by how well the title matches). Given a pool, the kinds are looked up at once, each on a
    connection of its own, so the answer takes as long as the slowest kind, not their sum."""
    wanted = [k for k in _SUGGESTERS if k in kinds]
    if isinstance(target, asyncpg.Pool):
        pool = target

        async def one(kind: str) -> list[Suggestion]:
            async with pool.acquire() as conn:
                return await _SUGGESTERS[kind](conn, query, limit)

        found = await asyncio.gather(*(one(k) for k in wanted))
    else:
        found = [await _SUGGESTERS[k](target, query, limit) for k in wanted]
    out = [s for group in found for s in group]
    out.sort(key=lambda s: -s.score)
    return out[:limit]
