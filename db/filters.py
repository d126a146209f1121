"""The immutable registry of paper filter and sort fragments.

Every fragment is SQL over the alias `p` (papers) with parameters numbered from $1; `compose` renumbers
them after an offset, so a caller with its own leading parameters (search's query text, a researcher
id) can append the same fragments. The set of fragments is finite, so asyncpg's statement cache hits.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from types import MappingProxyType
from typing import Literal

from db.keys import keyed
from db.paging import CursorValue, datetime_to_micros, micros_to_datetime

_PARAM = re.compile(r"\$(\d+)")

AuthorPosition = Literal["FIRST", "LAST", "MIDDLE", "SOLO"]
# Which papers a list holds as to withdrawal: lists and feeds leave withdrawn papers out unless asked.
Withdrawn = Literal["EXCLUDE", "INCLUDE", "ONLY"]


@dataclass(frozen=True, slots=True)
class Fragment:
    """A boolean SQL expression over `p` with `arity` parameters $1..$arity."""

    sql: str
    arity: int


@dataclass(frozen=True, slots=True)
class Clause:
    fragment: Fragment
    args: tuple[object, ...]


# Researcher and institution filters are `p.id = ANY (ARRAY(subquery))`: the subquery runs once
# (an InitPlan) and the planner fetches that entity's papers by primary key, then sorts them. With
# `p.id IN (subquery)` a generic plan may instead walk the whole date index looking for the entity's
# papers, which costs the size of the archive rather than the size of the entity (measured on 1M
# papers: 88 ms for a researcher's first page, against under 2 ms this way).
# A researcher id may be one merged into another (migration 0011's redirects): it names the survivor's papers.
_RESEARCHER = "coalesce((SELECT d.survivor_id FROM researcher_redirects d WHERE d.old_id = $1::bigint), $1::bigint)"
_POSITION_SUBQUERY = (
    "p.id = ANY (ARRAY(SELECT a.paper_id FROM authorships a JOIN papers q ON q.id = a.paper_id"
    f" WHERE a.researcher_id = {_RESEARCHER} AND {{cond}}))"
)

PAPER_FILTERS: Mapping[str, Fragment] = MappingProxyType(
    {
        "category": Fragment("p.categories @> ARRAY[$1::text]", 1),
        "primary_category": Fragment("p.primary_category = $1::text", 1),
        "published_from": Fragment("p.published >= $1::timestamptz", 1),
        "published_before": Fragment("p.published < $1::timestamptz", 1),
        "researcher": Fragment(
            f"p.id = ANY (ARRAY(SELECT a.paper_id FROM authorships a WHERE a.researcher_id = {_RESEARCHER}))", 1
        ),
        "institution": Fragment(
            "p.id = ANY (ARRAY(SELECT DISTINCT ai.paper_id FROM authorship_institutions ai"
            " WHERE ai.institution_id = $1::bigint))",
            1,
        ),
        "position_first": Fragment(_POSITION_SUBQUERY.format(cond="a.position = 1 AND q.author_count > 1"), 1),
        "position_last": Fragment(
            _POSITION_SUBQUERY.format(cond="a.position = q.author_count AND q.author_count > 1"), 1
        ),
        "position_middle": Fragment(
            _POSITION_SUBQUERY.format(cond="a.position > 1 AND a.position < q.author_count"), 1
        ),
        "position_solo": Fragment(_POSITION_SUBQUERY.format(cond="q.author_count = 1"), 1),
        "nothing": Fragment("false", 0),
        # A set of papers by database id (chat scoped to the papers a page lists).
        "ids": Fragment("p.id = ANY($1::bigint[])", 1),
        "not_withdrawn": Fragment("NOT p.withdrawn", 0),
        "withdrawn": Fragment("p.withdrawn", 0),
    }
)


# The same owner conditions for pages of many owners at once: the owner id is the column
# `k.owner_id` of `unnest($1::bigint[]) AS k(owner_id)` instead of a parameter.
OWNER_KEYS = ("researcher", "institution", "position_first", "position_last", "position_middle", "position_solo")
OWNER_FILTERS: Mapping[str, Fragment] = MappingProxyType(
    {key: Fragment(PAPER_FILTERS[key].sql.replace("$1::bigint", "k.owner_id"), 0) for key in OWNER_KEYS}
)


@dataclass(frozen=True, slots=True)
class PaperFilterSpec:
    """A paper filter with every reference already resolved to a database id."""

    category: str | None = None
    primary_only: bool = False
    published_from: datetime | None = None
    published_before: datetime | None = None
    researcher_id: int | None = None
    # Papers with an author at each of these institutions.
    institution_ids: tuple[int, ...] = ()
    # Applies to `researcher_id`: the researcher's position among the paper's authors.
    author_position: AuthorPosition | None = None
    withdrawn: Withdrawn = "EXCLUDE"
    # A reference that names nothing in the archive: the filter matches no paper.
    matches_nothing: bool = False


def paper_filter_clauses(spec: PaperFilterSpec) -> list[Clause]:
    if spec.matches_nothing:
        return [Clause(PAPER_FILTERS["nothing"], ())]
    clauses: list[Clause] = []
    if spec.withdrawn != "INCLUDE":
        clauses.append(Clause(PAPER_FILTERS["withdrawn" if spec.withdrawn == "ONLY" else "not_withdrawn"], ()))
    if spec.category is not None:
        key = "primary_category" if spec.primary_only else "category"
        clauses.append(Clause(PAPER_FILTERS[key], (spec.category,)))
    if spec.published_from is not None:
        clauses.append(Clause(PAPER_FILTERS["published_from"], (spec.published_from,)))
    if spec.published_before is not None:
        clauses.append(Clause(PAPER_FILTERS["published_before"], (spec.published_before,)))
    if spec.researcher_id is not None:
        key = f"position_{spec.author_position.lower()}" if spec.author_position else "researcher"
        clauses.append(Clause(PAPER_FILTERS[key], (spec.researcher_id,)))
    for institution_id in spec.institution_ids:
        clauses.append(Clause(PAPER_FILTERS["institution"], (institution_id,)))
    return clauses


def _renumber(sql: str, base: int) -> str:
    return _PARAM.sub(lambda m: f"${int(m.group(1)) + base}", sql) if base else sql


def compose(clauses: Sequence[Clause], offset: int = 0) -> tuple[str, list[object]]:
    """`(sql, args)`: the clauses joined by AND ("true" when none), parameters numbered from offset+1."""
    parts: list[str] = []
    args: list[object] = []
    for clause in clauses:
        parts.append(_renumber(clause.fragment.sql, offset + len(args)))
        args.extend(clause.args)
    return (" AND ".join(parts) if parts else "true"), args


def owners_page(
    owner: Fragment,
    owner_ids: Sequence[int],
    clauses: Sequence[Clause],
    sort: Sort,
    *,
    columns: str,
    source: str,
    limit: int,
    offset: int,
    by_id: bool = False,
    total: str | None = None,
) -> tuple[str, list[object]]:
    """The same page for each owner, in one statement: one LATERAL subquery per owner id, `owner.sql` tying rows
    to `k.owner_id`. Returns the statement and its arguments; each row starts with its owner's id.

    `by_id`: the page's ids are chosen first, reading only what the filter and sort need (from a covering index,
    where there is one), and only the page's rows are then read whole by id: an owner with 200k rows otherwise
    has every one of them read whole to sort them. `total`: an expression of `k.owner_id` (no parameters), each
    row's `listed_total` (see `owner_keys`)."""
    where, args = compose(clauses, offset=1)
    n = len(args) + 1
    alias = source.split()[-1]
    rows = f" FROM {source} WHERE {owner.sql} AND {where} ORDER BY {sort.order_by} LIMIT ${n + 1} OFFSET ${n + 2}"
    if by_id:
        rows = f" FROM {source} WHERE {alias}.id = ANY (ARRAY(SELECT {alias}.id{rows}))"
    sql, keys = keyed(
        f"SELECT k.*, {columns} FROM {owner_keys(total)}"
        f" CROSS JOIN LATERAL (SELECT {columns}{rows}) {alias}"
        f" ORDER BY k.ord, {sort.order_by}",
        owner_ids,
    )
    return sql, [keys, *args, limit, offset]


def owner_keys(total: str | None) -> str:
    """The owners of a page statement as `k(owner_id, ord)`, each with `listed_total` when `total` (an expression
    of `k.owner_id`) is given: evaluated once an owner (OFFSET 0 keeps the subquery from being merged into the
    statement, which would evaluate it once a row), so the owner's count comes with its page."""
    if total is None:
        return "{keys_ord} AS k(owner_id, ord)"
    return f"(SELECT k.owner_id, k.ord, {total} AS listed_total FROM {{keys_ord}} AS k(owner_id, ord) OFFSET 0) k"


# `score`: a float as repr() text (exact, so a keyset neither skips nor repeats a row), compared as float8.
# `int`, `int_or_null`: an integer column (32 bits); `bigint`: an id.
KeyKind = Literal["ts", "int", "int_or_null", "bigint", "str", "score"]
_INT32 = range(-(2**31), 2**31)


def _is_score(value: object) -> bool:
    try:
        return isinstance(value, str) and math.isfinite(float(value))
    except ValueError:
        return False


@dataclass(frozen=True, slots=True)
class Sort:
    """An ORDER BY with a stable id tie-break, and its keyset condition for `after`.

    `key` names the row attributes the cursor carries, in ORDER BY order, with their kinds.
    """

    name: str
    order_by: str
    after: Fragment
    key: tuple[tuple[str, KeyKind], ...]
    # When the cursor's first key is NULL (rows sorted last): the condition within the NULL tail.
    after_null: Fragment | None = None

    def cursor_key(self, row: object) -> tuple[CursorValue, ...]:
        values: list[CursorValue] = []
        for attr, kind in self.key:
            value = getattr(row, attr)
            values.append(datetime_to_micros(value) if kind == "ts" else value)
        return tuple(values)

    def after_clause(self, key: tuple[CursorValue, ...]) -> Clause:
        """The keyset condition for a cursor's key; ValueError when the key does not fit this sort (a tampered
        cursor: an integer, time or score out of range never reaches PostgreSQL)."""
        if len(key) != len(self.key):
            raise ValueError("cursor does not fit this sort")
        args: list[object] = []
        for value, (_, kind) in zip(key, self.key, strict=True):
            if isinstance(value, bool):
                raise ValueError("cursor does not fit this sort")
            if kind == "ts" and isinstance(value, int):
                args.append(micros_to_datetime(value))
            elif kind in ("int", "int_or_null") and isinstance(value, int) and value in _INT32:
                args.append(value)
            elif kind == "bigint" and isinstance(value, int):
                args.append(value)
            elif kind == "int_or_null" and value is None:
                args.append(None)
            elif kind == "str" and isinstance(value, str):
                args.append(value)
            elif kind == "score" and _is_score(value):
                args.append(value)
            else:
                raise ValueError("cursor does not fit this sort")
        if args[0] is None:
            if self.after_null is None:
                raise ValueError("cursor does not fit this sort")
            return Clause(self.after_null, tuple(args[1:]))
        return Clause(self.after, tuple(args))


def _frozen(sorts: Sequence[Sort]) -> Mapping[str, Sort]:
    return MappingProxyType({s.name: s for s in sorts})


PAPER_SORTS: Mapping[str, Sort] = _frozen(
    [
        Sort(
            "NEWEST",
            "p.published DESC, p.id DESC",
            Fragment("(p.published, p.id) < ($1::timestamptz, $2::bigint)", 2),
            (("published", "ts"), ("id", "bigint")),
        ),
        Sort(
            "OLDEST",
            "p.published ASC, p.id ASC",
            Fragment("(p.published, p.id) > ($1::timestamptz, $2::bigint)", 2),
            (("published", "ts"), ("id", "bigint")),
        ),
        # Papers without a count sort last; written out (not coalesce) so papers_cited_idx serves it.
        Sort(
            "MOST_CITED",
            "p.cited_by_count DESC NULLS LAST, p.id DESC",
            Fragment(
                "(p.cited_by_count < $1::int OR (p.cited_by_count = $1::int AND p.id < $2::bigint)"
                " OR p.cited_by_count IS NULL)",
                2,
            ),
            (("cited_by_count", "int_or_null"), ("id", "bigint")),
            Fragment("(p.cited_by_count IS NULL AND p.id < $1::bigint)", 1),
        ),
    ]
)

# A viewer's feed ($1 the viewer id): papers by the researchers or at the institutions they follow, each once.
# Two forms of one set (db/queries/papers.py page_papers_scanning uses both). `followed` collects the followed
# entities' paper ids and fetches those papers by primary key: its cost grows with how many papers they have.
# `followed_scan` is a per-paper test, for walking papers in the sort's order: its cost grows with how rare such
# papers are. `followed_count` estimates how many papers the reader follows (M) from the stored paper counts.
_FOLLOWED_RESEARCHERS = "ARRAY(SELECT f.researcher_id FROM follows f WHERE f.viewer_id = $1::text)"
_FOLLOWED_INSTITUTIONS = "ARRAY(SELECT f.institution_id FROM institution_follows f WHERE f.viewer_id = $1::text)"
FEED_FILTERS: Mapping[str, Fragment] = MappingProxyType(
    {
        # The ids through the (researcher_id, paper_id) and (institution_id, paper_id) indexes, index only.
        "followed": Fragment(
            "p.id = ANY (ARRAY(SELECT a.paper_id FROM authorships a"
            f" WHERE a.researcher_id = ANY ({_FOLLOWED_RESEARCHERS})"
            " UNION SELECT ai.paper_id FROM authorship_institutions ai"
            f" WHERE ai.institution_id = ANY ({_FOLLOWED_INSTITUTIONS})))",
            1,
        ),
        # Each paper's authorships by primary key, their researchers (institutions) looked up in the reader's
        # follows, read once per statement as an array (no index choice per probe: an index on the follows of a
        # popular researcher would read all their followers). OFFSET 0 keeps each test a test per paper
        # (PostgreSQL would otherwise hash every followed paper first, the other form's work); a kind of follow
        # the reader has none of is skipped once, not per paper.
        "followed_scan": Fragment(
            "((EXISTS (SELECT 1 FROM follows f WHERE f.viewer_id = $1::text)"
            " AND EXISTS (SELECT 1 FROM authorships a WHERE a.paper_id = p.id"
            f" AND a.researcher_id = ANY ({_FOLLOWED_RESEARCHERS}) OFFSET 0))"
            " OR (EXISTS (SELECT 1 FROM institution_follows f WHERE f.viewer_id = $1::text)"
            " AND EXISTS (SELECT 1 FROM authorship_institutions ai WHERE ai.paper_id = p.id"
            f" AND ai.institution_id = ANY ({_FOLLOWED_INSTITUTIONS}) OFFSET 0)))",
            1,
        ),
        "followed_count": Fragment(
            f"((SELECT coalesce(sum(r.paper_count), 0) FROM researchers r WHERE r.id = ANY ({_FOLLOWED_RESEARCHERS}))"
            " + (SELECT coalesce(sum(i.paper_count), 0) FROM institutions i"
            f" WHERE i.id = ANY ({_FOLLOWED_INSTITUTIONS})))",
            1,
        ),
    }
)

# A viewer's follows (alias f), most recently followed first.
FOLLOWED_RESEARCHERS_SORT = Sort(
    "FOLLOWED",
    "f.created_at DESC, f.researcher_id DESC",
    Fragment("(f.created_at, f.researcher_id) < ($1::timestamptz, $2::bigint)", 2),
    (("followed_at", "ts"), ("id", "int")),
)
FOLLOWED_INSTITUTIONS_SORT = Sort(
    "FOLLOWED",
    "f.created_at DESC, f.institution_id DESC",
    Fragment("(f.created_at, f.institution_id) < ($1::timestamptz, $2::bigint)", 2),
    (("followed_at", "ts"), ("id", "int")),
)

# Researchers (alias r) and institutions (alias i): figures descending, id ascending, as their indexes are.
RESEARCHER_FILTERS: Mapping[str, Fragment] = MappingProxyType(
    {
        "institution": Fragment(
            "r.id IN (SELECT ri.researcher_id FROM researcher_institutions ri WHERE ri.institution_id = $1::bigint)",
            1,
        ),
        # Ranges over the stored whole-career figures (refreshed by every write).
        "min_h_index": Fragment("r.h_index >= $1::int", 1),
        "max_h_index": Fragment("r.h_index <= $1::int", 1),
        "min_citations": Fragment("r.citation_count >= $1::int", 1),
        "max_citations": Fragment("r.citation_count <= $1::int", 1),
    }
)


def _by_figure(name: str, alias: str, column: str) -> Sort:
    return Sort(
        name,
        f"{alias}.{column} DESC, {alias}.id ASC",
        Fragment(f"({alias}.{column} < $1::int OR ({alias}.{column} = $1::int AND {alias}.id > $2::bigint))", 2),
        ((column, "int"), ("id", "bigint")),
    )


def _by_name(alias: str) -> Sort:
    return Sort(
        "NAME",
        f"wp_fold({alias}.name) ASC, {alias}.id ASC",
        # The cursor holds the name as shown and the statement folds it, once (a sub-select): rows need not carry
        # a folded name, which would cost a wp_fold per row of every page. Folding is idempotent, so cursors that
        # hold a folded name still work.
        Fragment(f"(wp_fold({alias}.name), {alias}.id) > ((SELECT wp_fold($1::text)), $2::bigint)", 2),
        (("name", "str"), ("id", "bigint")),
    )


RESEARCHER_SORTS: Mapping[str, Sort] = _frozen(
    [
        _by_figure("PAPER_COUNT", "r", "paper_count"),
        _by_figure("H_INDEX", "r", "h_index"),
        _by_figure("CITATIONS", "r", "citation_count"),
        _by_name("r"),
    ]
)

# Researchers of many institutions at once (see OWNER_FILTERS).
RESEARCHER_OWNER_FILTERS: Mapping[str, Fragment] = MappingProxyType(
    {"institution": Fragment(RESEARCHER_FILTERS["institution"].sql.replace("$1::bigint", "k.owner_id"), 0)}
)

INSTITUTION_FILTERS: Mapping[str, Fragment] = MappingProxyType(
    {
        "country": Fragment("i.country = $1::text", 1),
    }
)

INSTITUTION_SORTS: Mapping[str, Sort] = _frozen([_by_figure("PAPER_COUNT", "i", "paper_count"), _by_name("i")])


def escape_like(text: str) -> str:
    """A user's text as a literal inside LIKE '%...%'."""
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
