"""A signed-in reader's feed: the papers by the researchers and at the institutions they follow, newest first, each
once, read through migration 0028's listings so a page costs about (follows x rows wanted), whatever the followed
have published and however large the archive."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from types import MappingProxyType

from db.connection import Conn
from db.filters import PAPER_FILTERS, PAPER_SORTS, Clause, Fragment, compose
from db.queries.papers import PAPER_COLUMNS, PAPERS, PaperRow

# Conditions a listing row answers itself (alias `l`: published, paper_id, withdrawn), index only; any other
# condition is tested on the paper, joined in the per-follow scan before its LIMIT.
_ON_LISTING: Mapping[Fragment, Fragment] = MappingProxyType(
    {
        PAPER_SORTS["NEWEST"].after: Fragment("(l.published, l.paper_id) < ($1::timestamptz, $2::bigint)", 2),
        PAPER_FILTERS["not_withdrawn"]: Fragment("NOT l.withdrawn", 0),
        PAPER_FILTERS["withdrawn"]: Fragment("l.withdrawn", 0),
        PAPER_FILTERS["published_from"]: Fragment("l.published >= $1::timestamptz", 1),
        PAPER_FILTERS["published_before"]: Fragment("l.published < $1::timestamptz", 1),
        PAPER_FILTERS["nothing"]: Fragment("false", 0),
    }
)
# Per kind of follow: the reader's follows (alias f) and the owner's listing.
_SOURCES = (
    ("follows f", "researcher_papers l", "l.researcher_id = f.researcher_id"),
    ("institution_follows f", "institution_papers l", "l.institution_id = f.institution_id"),
)


def _on_listing(clauses: Sequence[Clause]) -> tuple[list[Clause], list[Clause]]:
    """(the clauses as conditions on the listing, those that need the paper)."""
    listing: list[Clause] = []
    paper: list[Clause] = []
    for clause in clauses:
        moved = _ON_LISTING.get(clause.fragment)
        if moved is None:
            paper.append(clause)
        else:
            listing.append(Clause(moved, clause.args))
    return listing, paper


def feed_statement(clauses: Sequence[Clause]) -> tuple[str, list[object]]:
    """The statement and its arguments after $1 (the viewer), $2 (rows wanted: limit + offset), $3 (limit) and
    $4 (offset). `clauses` are over the paper (`p`), the feed's cursor among them.

    Each follow gives its first rows wanted in the feed's order, read backwards from the cursor along its listing
    (the conditions on the paper tested on the way); the newest of those, each paper once, are the page: any paper
    of the page is among the first rows wanted of some follow it came through. A first, shorter reading of each
    follow bounds how far back the page can reach (below). (Each paper once by sorting the candidates, not hashing
    them: with a thousand follows, hashing 25,000 pairs cost more than their sort.)"""
    listing, paper = _on_listing(clauses)
    where, args = compose([*listing, *paper], offset=4)
    join = " JOIN papers p ON p.id = l.paper_id" if paper else ""

    def scans(limit: str, bound: str) -> str:
        return "\n    UNION ALL\n".join(
            f"""    SELECT c.published, c.paper_id FROM {follows} CROSS JOIN LATERAL (
        SELECT l.published, l.paper_id FROM {source}{join} WHERE {owner} AND {where}{bound}
        ORDER BY l.published DESC, l.paper_id DESC LIMIT {limit}) c
    WHERE f.viewer_id = $1::text"""
            for follows, source, owner in _SOURCES
        )

    # First each follow's first R/n rows (n follows): when those hold R papers, the page ends no lower than the
    # R-th of them, and the second reading of each follow stops there (an index condition), so a thousand follows
    # read about a thousand rows for a page, not 25,000. Fewer than R papers: no bound, R rows per follow.
    first = scans("(SELECT ceil($2::int / greatest(n.n, 1)::float8)::int FROM follow_count n)", "")
    bounded = scans(
        "$2::int",
        " AND (l.published, l.paper_id) >= ((SELECT b.published FROM bound b), (SELECT b.paper_id FROM bound b))",
    )
    sql = f"""WITH follow_count AS MATERIALIZED (
    SELECT (SELECT count(*) FROM follows f WHERE f.viewer_id = $1::text)
         + (SELECT count(*) FROM institution_follows f WHERE f.viewer_id = $1::text) AS n
), first AS MATERIALIZED (
{first}
), bound AS MATERIALIZED (
    SELECT coalesce(max(d.published), '-infinity') AS published, coalesce(max(d.paper_id), -1) AS paper_id
    FROM (SELECT DISTINCT c.published, c.paper_id FROM first c
          ORDER BY c.published DESC, c.paper_id DESC OFFSET $2::int - 1 LIMIT 1) d
), candidates AS (
{bounded}
)
SELECT {PAPER_COLUMNS} FROM papers p
WHERE p.id = ANY (ARRAY(SELECT d.paper_id FROM (
    SELECT DISTINCT c.published, c.paper_id FROM candidates c ORDER BY c.published DESC, c.paper_id DESC LIMIT $2::int
) d))
ORDER BY p.published DESC, p.id DESC LIMIT $3::int OFFSET $4::int"""
    return sql, args


async def page_feed(
    conn: Conn, viewer_id: str, clauses: Sequence[Clause], *, limit: int, offset: int = 0
) -> list[PaperRow]:
    """A page of the reader's feed, newest first (the sort `papers(sort: NEWEST)` has)."""
    sql, args = feed_statement(clauses)
    return PAPERS.build_all(await conn.fetch(sql, viewer_id, limit + offset, limit, offset, *args))
