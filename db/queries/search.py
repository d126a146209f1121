"""Search over papers (keyword, semantic, hybrid) with facets and highlights, and name look-up.

Relevance (keyword): ts_rank_cd(search_vector, query) * (1 + ln(1 + cited_by_count)): text rank, with title
(weight A) over abstract (B) over author names (C), boosted by the log of the citation count.
Semantic: the nearest papers by cosine similarity of all-MiniLM-L6-v2 vectors (HNSW index, pgvector).
Hybrid: reciprocal rank fusion, sum over both rankings of 1 / (60 + rank), of the keyword and semantic lists.

One statement answers a page: the matched set is materialised once, and the page, the total and the facets
(one GROUP BY per facet over that in-memory set, never another scan of papers) are all read from it.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from types import MappingProxyType
from typing import Generic, Literal, TypeVar

import asyncpg
import orjson
from asyncpg.pool import PoolConnectionProxy

from db.filters import INSTITUTION_FILTERS, PAPER_SORTS, Clause, Fragment, Sort, compose, escape_like
from db.paging import entity_global_id
from db.queries.embeddings import vector_literal
from db.queries.institutions import INSTITUTION_COLUMNS, InstitutionRow, institution_from_record
from db.queries.papers import PAPER_COLUMNS, PaperRow, paper_from_record
from db.queries.researchers import RESEARCHER_COLUMNS, ResearcherRow, researcher_from_record

Conn = asyncpg.Connection | PoolConnectionProxy
Mode = Literal["KEYWORD", "SEMANTIC", "HYBRID"]
FacetKind = Literal["category", "primary", "year"]

# How many nearest neighbours make up a semantic result set, and how many of each ranking hybrid fuses.
SEMANTIC_CANDIDATES = 200
HYBRID_CANDIDATES = 200
# Keyword matches ranked, paged and counted in facets; past it, the number of matches is estimated. Each costs a
# heap fetch, a ts_rank_cd and its facet values, a few microseconds: on a million papers a capped statement takes
# about 15 ms with 1,000 (30 ms with 3,000, measured side by side; bench/RESULTS.md).
KEYWORD_CAP = 1_000
RRF_K = 60
# pgvector: search at least this wide, and keep scanning the graph when filters reject neighbours.
SEMANTIC_SESSION = (
    "SET LOCAL hnsw.ef_search = 200; SET LOCAL hnsw.iterative_scan = relaxed_order;"
    " SET LOCAL hnsw.max_scan_tuples = 10000"
)
# The planner prices evaluating `@@` on each row far too low: with a LIMIT it picks a sequential scan that reads
# tens of thousands of tsvectors. The text index is always the way in; and enough memory that the bitmap of a
# common term stays exact (a lossy bitmap rechecks every row of its pages).
# And plans made for the actual query text, so that its tsquery is computed once, not per row.
KEYWORD_SESSION = (
    "SET LOCAL enable_seqscan = off; SET LOCAL work_mem = '32MB'; SET LOCAL plan_cache_mode = force_custom_plan"
)

_ENGLISH_TSQUERY = "websearch_to_tsquery('english', $5::text)"
# Author names are indexed unstemmed ('simple'), title and abstract stemmed ('english'): `Thorne` is `thorn` in
# English and would miss the author, so the query is also read the simple way, either reading matching.
# ($9 is the text again, or '' when it excludes words, since an exclusion must hold under the English reading,
# or when it is long, names being short.) Where both readings are the same, the English one alone: an OR of a
# common word with itself doubles the index work.
_SIMPLE_TSQUERY = "websearch_to_tsquery('simple', $9::text)"
_TSQUERY = (
    f"(CASE WHEN $9::text = '' OR {_SIMPLE_TSQUERY}::text = {_ENGLISH_TSQUERY}::text THEN {_ENGLISH_TSQUERY}"
    f" ELSE {_ENGLISH_TSQUERY} || {_SIMPLE_TSQUERY} END)"
)
_RELEVANCE = f"ts_rank_cd(p.search_vector, {_TSQUERY}) * (1 + ln(1 + coalesce(p.cited_by_count, 0)))"
# Negation-only queries (`-foo`) cannot use the text index, and stop words alone mean nothing: refuse both
# (judged on the English reading, which drops stop words) instead of scanning every paper.
_INDEXABLE = f"numnode({_ENGLISH_TSQUERY}) > 0 AND querytree({_ENGLISH_TSQUERY}) <> 'T'"
# The row address of each match: when a query matches more than KEYWORD_CAP papers, how far the scan got through
# the table estimates how many match in all (read from the last one only: it is no use per row).
_MATCHED_COLUMNS = "p.id, p.published, p.cited_by_count, p.categories, p.primary_category, p.ctid AS tid"

# Well-cited papers have a text index of their own (migration 0006, `papers_search_cited_idx`; its predicate
# must read the same number). A common term's bitmap over every paper costs tens of milliseconds on a million
# papers before one row is ranked; over the cited tier it is a fourteenth of that, and relevance (multiplied by the
# log of the citations) ranks the best matches of such a term from there anyway.
CITED_TIER = 25
_CITED = f"p.cited_by_count >= {CITED_TIER}"
_UNCITED = f"(p.cited_by_count < {CITED_TIER} OR p.cited_by_count IS NULL)"

# At most KEYWORD_CAP + 1 matches (the bitmap scans stop there): ranking and facets of a term that half the archive
# contains would otherwise read half the archive. The cited tier first; only when it has no more than KEYWORD_CAP
# matches are the other papers scanned (in table order) for the rest.
_NO_PROBE = "probe AS (SELECT NULL::tid AS tid WHERE false)"
_TIERED_CAPPED = f"""
{_NO_PROBE},
cited AS MATERIALIZED (
    SELECT {_MATCHED_COLUMNS}, {_RELEVANCE} AS score, true AS tiered
    FROM papers p
    WHERE {_CITED} AND p.search_vector @@ {_TSQUERY} AND {_INDEXABLE} AND {{where}}
    LIMIT $8::int + 1
),
capped AS MATERIALIZED (
    SELECT * FROM cited
    UNION ALL
    (SELECT {_MATCHED_COLUMNS}, {_RELEVANCE} AS score, false AS tiered
     FROM papers p
     WHERE {_UNCITED} AND p.search_vector @@ {_TSQUERY} AND {_INDEXABLE} AND {{where}}
       AND (SELECT count(*) FROM cited) <= $8::int
     LIMIT $8::int + 1 - (SELECT count(*) FROM cited))
)"""
# A phrase is checked on the papers that have all its words (_PHRASE_SOURCE), in table order.
_PHRASE_CAPPED = f"""
{_NO_PROBE},
capped AS MATERIALIZED (
    SELECT {_MATCHED_COLUMNS}, {_RELEVANCE} AS score, false AS tiered
    FROM {{source}} p
    WHERE p.search_vector @@ {_TSQUERY} AND {_INDEXABLE} AND {{where}}
    LIMIT $8::int + 1
)"""
# Sorted by date or citations, a common term's first page is its newest (oldest, most cited) matches, not its best
# ranked: the candidates are the first matches in that order, read through the sort's own index when the term is
# common enough for that to be quick (the planner judges from the term's frequency). Their total is estimated from
# the cited tier (`probe`, read only past the cap), as for relevance.
_ORDERED_CAPPED = f"""
capped AS MATERIALIZED (
    SELECT {_MATCHED_COLUMNS}, {_RELEVANCE} AS score, false AS tiered
    FROM papers p
    WHERE p.search_vector @@ {_TSQUERY} AND {_INDEXABLE} AND {{where}}
    ORDER BY {{order}}
    LIMIT $8::int + 1
),
probe AS MATERIALIZED (
    SELECT p.ctid AS tid
    FROM papers p
    WHERE {_CITED} AND p.search_vector @@ {_TSQUERY} AND {_INDEXABLE} AND {{where}}
      AND (SELECT count(*) FROM capped) > $8::int
    LIMIT $8::int + 1
)"""
_KEYWORD_MATCHES = """{capped},
m AS MATERIALIZED (SELECT * FROM capped LIMIT $8::int)"""

_SEMANTIC_NEIGHBOURS = """
    SELECT e.paper_id AS id, e.embedding <=> $6::text::vector AS dist
    FROM paper_embeddings e JOIN papers p ON p.id = e.paper_id
    WHERE {where}
    ORDER BY (e.embedding <=> $6::text::vector){exact}
    LIMIT $7::int"""
# `+ 0` hides the distance from the HNSW index: an exact scan of the (few) papers a narrow filter leaves.
_EXACT = " + 0"

_SEMANTIC_MATCHES = f"""
capped AS (SELECT NULL::tid AS tid, false AS tiered WHERE false),
probe AS (SELECT NULL::tid AS tid WHERE false),
sem AS MATERIALIZED ({_SEMANTIC_NEIGHBOURS}
),
m AS MATERIALIZED (
    SELECT {_MATCHED_COLUMNS}, (1 - s.dist)::float8 AS score
    FROM sem s JOIN papers p ON p.id = s.id
)"""

_HYBRID_MATCHES = f"""{{capped}},
kw AS MATERIALIZED (
    SELECT c.id, row_number() OVER (ORDER BY c.score DESC, c.id DESC) AS r
    FROM (SELECT * FROM capped LIMIT $8::int) c
    ORDER BY r
    LIMIT $7::int
),
sem AS MATERIALIZED (
    SELECT n.id, row_number() OVER (ORDER BY n.dist, n.id) AS r
    FROM ({_SEMANTIC_NEIGHBOURS}
    ) n
),
fused AS (
    SELECT u.id, sum(1.0 / ({RRF_K} + u.r))::float8 AS score
    FROM (SELECT id, r FROM kw UNION ALL SELECT id, r FROM sem) u
    GROUP BY u.id
),
m AS MATERIALIZED (
    SELECT {_MATCHED_COLUMNS}, f.score
    FROM fused f JOIN papers p ON p.id = f.id
)"""

# A phrase (`"graph neural"`, `state-of-the-art`) is checked on every row its words share: for common words
# that can be most of the archive. So at most PHRASE_SCAN papers having all the words are checked for the phrase.
PHRASE_SCAN = 20_000
_LOOSE_TSQUERY = f"regexp_replace({_TSQUERY}::text, '<[0-9-]*>', '&', 'g')::tsquery"
_PHRASE_SOURCE = f"""(SELECT p.*, p.ctid AS tid FROM papers p
        WHERE p.search_vector @@ {_LOOSE_TSQUERY} AND {{where}} LIMIT {PHRASE_SCAN})"""
_PHRASE = re.compile(r'"|\w-\w')
_EXCLUSION = re.compile(r"(^|\s)-\S")
MAX_NAME_WORDS = 3

_MATCHES: MappingProxyType[str, str] = MappingProxyType(
    {"KEYWORD": _KEYWORD_MATCHES, "SEMANTIC": _SEMANTIC_MATCHES, "HYBRID": _HYBRID_MATCHES}
)

_ESCAPE = "replace(replace(replace({col}, '&', '&amp;'), '<', '&lt;'), '>', '&gt;')"
_TITLE_HEADLINE = (
    f"ts_headline('english', {_ESCAPE.format(col='p.title')}, {_TSQUERY},"
    " 'StartSel=<mark>, StopSel=</mark>, HighlightAll=true')"
)
_ABSTRACT_HEADLINE = (
    f"ts_headline('english', {_ESCAPE.format(col='p.abstract')}, {_TSQUERY},"
    " 'StartSel=<mark>, StopSel=</mark>, MaxFragments=2, MaxWords=30, MinWords=12, FragmentDelimiter=\" … \"')"
)

# Parameters: $1 limit, $2 offset, $3 facets wanted, $4 highlights wanted, $5 query text, $6 query vector,
# $7 candidates; the filter's parameters follow, then the cursor's.
_SEARCH_TEMPLATE = """
WITH params AS (SELECT $5::text AS text, $6::text AS vector, $7::int AS candidates, $8::int AS cap, $9::text AS names),
{matches},
facets AS (
    -- unnest() in the select list and extract() for the year: per row they cost a third of a LATERAL function
    -- scan and of to_char(), which matters over a thousand rows.
    SELECT 'category' AS kind, c AS value, count(*) AS n
    FROM (SELECT unnest(m.categories) AS c FROM m WHERE $3::boolean) u GROUP BY c
    UNION ALL
    SELECT 'primary', m.primary_category, count(*) FROM m WHERE $3::boolean GROUP BY m.primary_category
    UNION ALL
    SELECT 'year', y::text, n
    FROM (SELECT extract(year FROM m.published AT TIME ZONE 'UTC')::int AS y, count(*) AS n
          FROM m WHERE $3::boolean GROUP BY 1) ys
),
totals AS (
    SELECT (SELECT count(*) FROM m) AS total,
           (SELECT count(*) FROM capped) AS capped,
           {neighbours} AS neighbours,
           (SELECT count(*) FILTER (WHERE tiered) FROM capped) AS tier_found,
           (SELECT count(*) FROM probe) AS probe_found,
           (SELECT (max(tid)::text::point)[0] FROM probe) AS probe_block,
           (SELECT (max(tid) FILTER (WHERE tiered)::text::point)[0] FROM capped) AS tier_block,
           (SELECT (max(tid) FILTER (WHERE NOT tiered)::text::point)[0] FROM capped) AS rest_block,
           pg_relation_size('papers') / current_setting('block_size')::int AS relpages,
           (SELECT i.reltuples / greatest(t.reltuples, 1) FROM pg_class i, pg_class t
            WHERE i.oid = 'papers_search_cited_idx'::regclass AND t.oid = 'papers'::regclass) AS tier_share,
           (SELECT json_agg(json_build_array(kind, value, n)) FROM facets)::text AS facets
),
page AS (
    SELECT p.id, p.score, p.published, p.cited_by_count
    FROM m AS p
    WHERE {after}
    ORDER BY {order}
    LIMIT $1::int OFFSET $2::int
)
SELECT {paper_columns}, pg.score,
       CASE WHEN $4::boolean AND p.id IS NOT NULL THEN {title_headline} END AS title_highlight,
       CASE WHEN $4::boolean AND p.id IS NOT NULL THEN {abstract_headline} END AS abstract_highlight,
       t.total, t.capped, t.tier_found, t.tier_block, t.rest_block, t.probe_found, t.probe_block, t.relpages,
       t.tier_share, t.neighbours,
       CASE WHEN row_number() OVER (ORDER BY {page_order}) = 1 THEN t.facets END AS facets
FROM totals t
LEFT JOIN (page pg JOIN papers p ON p.id = pg.id) ON true
ORDER BY {page_order}
"""

_FIXED_PARAMS = 9


# The score travels as repr() text, which round-trips a float exactly: the keyset comparison neither skips
# nor repeats a row.
RELEVANCE_SORT = Sort(
    "RELEVANCE",
    "p.score DESC, p.id DESC",
    Fragment("(p.score, p.id) < ($1::text::float8, $2::bigint)", 2),
    (("score_key", "score"), ("id", "bigint")),
)

# Search sorts read the matched set `m AS p`, which carries the columns the paper sorts use.
SEARCH_SORTS: MappingProxyType[str, Sort] = MappingProxyType(
    {
        "RELEVANCE": RELEVANCE_SORT,
        "NEWEST": PAPER_SORTS["NEWEST"],
        "OLDEST": PAPER_SORTS["OLDEST"],
        "MOST_CITED": PAPER_SORTS["MOST_CITED"],
    }
)


class SemanticSearchUnavailable(Exception):
    """This database has no pgvector (no paper_embeddings table)."""


@dataclass(frozen=True, slots=True)
class FacetValue:
    value: str
    count: int


@dataclass(frozen=True, slots=True)
class Facets:
    """Every value of each facet over the whole result set, most frequent first (ties by value)."""

    categories: list[FacetValue]
    primary_categories: list[FacetValue]
    years: list[FacetValue]


@dataclass(slots=True)
class SearchHit:
    paper: PaperRow
    score: float
    title_highlight: str | None
    abstract_highlight: str | None

    # Sort keys, so that SEARCH_SORTS' cursor functions read a hit like a paper row.
    @property
    def score_key(self) -> str:
        return repr(self.score)

    @property
    def id(self) -> int:
        return self.paper.id

    @property
    def published(self) -> datetime:
        return self.paper.published

    @property
    def cited_by_count(self) -> int | None:
        return self.paper.cited_by_count


@dataclass(slots=True)
class SearchResult:
    total: int
    hits: list[SearchHit]
    facets: Facets | None
    # How many papers match: `total` when it is under KEYWORD_CAP, else an estimate (`matches_estimated`).
    matches: int = 0
    matches_estimated: bool = False


class EmptyQuery(ValueError):
    """The query has no searchable word: empty, only stop words, or only exclusions."""


def _facets_from_json(text: str | None) -> Facets:
    grouped: dict[str, list[FacetValue]] = {"category": [], "primary": [], "year": []}
    for kind, value, count in orjson.loads(text) if text else []:
        grouped[kind].append(FacetValue(value, count))
    for values in grouped.values():
        values.sort(key=lambda f: (-f.count, f.value))
    return Facets(grouped["category"], grouped["primary"], grouped["year"])


def has_phrase(text: str) -> bool:
    """Whether websearch_to_tsquery will make a phrase of some of this text (quotes, hyphenated words)."""
    return _PHRASE.search(text) is not None


def is_ordered(mode: Mode, sort: Sort, phrase: bool) -> bool:
    """Whether a keyword search takes its candidates in the sort's order (`_ORDERED_CAPPED`)."""
    return mode == "KEYWORD" and not phrase and sort.name != "RELEVANCE"


def build_search_sql(
    mode: Mode, sort: Sort, where: str, after: str, *, exact: bool = False, phrase: bool = False
) -> str:
    page_order = sort.order_by.replace("p.", "pg.")
    if phrase:
        # The row address comes from inside the phrase's source subquery.
        capped = _PHRASE_CAPPED.replace("p.ctid AS tid", "p.tid")
    elif is_ordered(mode, sort, phrase):
        capped = _ORDERED_CAPPED
    else:
        capped = _TIERED_CAPPED
    capped = capped.format(where=where, source=_PHRASE_SOURCE.format(where=where), order=sort.order_by)
    matches = _MATCHES[mode].format(capped=capped, where=where, exact=_EXACT if exact else "")
    return _SEARCH_TEMPLATE.format(
        matches=matches,
        neighbours="0" if mode == "KEYWORD" else "(SELECT count(*) FROM sem)",
        after=after,
        order=sort.order_by,
        page_order=page_order,
        paper_columns=PAPER_COLUMNS,
        title_headline=_TITLE_HEADLINE,
        abstract_headline=_ABSTRACT_HEADLINE,
    )


async def search_papers(
    conn: Conn,
    *,
    mode: Mode,
    text: str,
    vector: Sequence[float] | None,
    clauses: Sequence[Clause],
    sort: Sort,
    limit: int,
    offset: int = 0,
    after: Clause | None = None,
    with_facets: bool = False,
    with_highlights: bool = False,
    cap: int | None = None,
) -> SearchResult:
    """One page of a search, its total and (when asked) its facets, in one statement.

    `cap`: keyword matches ranked at most, KEYWORD_CAP when not given (chat, which wants a handful of papers,
    ranks fewer).

    `vector` (the query's embedding) is required for SEMANTIC and HYBRID. `after` is a keyset condition from
    the sort (`db.filters.after_clause`). Raises EmptyQuery (KEYWORD, HYBRID without a vector match is fine)
    and SemanticSearchUnavailable.
    """
    cap = KEYWORD_CAP if cap is None else cap
    if mode != "KEYWORD" and vector is None:
        raise ValueError("semantic and hybrid search need the query vector")
    where, filter_args = compose(clauses, offset=_FIXED_PARAMS)
    after_sql, after_args = compose([after] if after else [], offset=_FIXED_PARAMS + len(filter_args))
    phrase = mode != "SEMANTIC" and has_phrase(text)
    sql = build_search_sql(mode, sort, where, after_sql, phrase=phrase)
    exact_sql = build_search_sql(mode, sort, where, after_sql, exact=True, phrase=phrase) if clauses else None
    candidates = SEMANTIC_CANDIDATES if mode == "SEMANTIC" else HYBRID_CANDIDATES
    args = [
        limit,
        offset,
        with_facets,
        with_highlights,
        text,
        vector_literal(vector) if vector is not None else None,
        candidates,
        cap,
        "" if _EXCLUSION.search(text) or len(text.split()) > MAX_NAME_WORDS else text,
        *filter_args,
        *after_args,
    ]
    if mode == "KEYWORD":
        async with conn.transaction(readonly=True):
            await conn.execute(KEYWORD_SESSION)
            records = await conn.fetch(sql, *args)
    else:
        try:
            async with conn.transaction(readonly=True):
                await conn.execute(f"{KEYWORD_SESSION}; {SEMANTIC_SESSION}")
                records = await conn.fetch(sql, *args)
                # A narrow filter (a researcher, a small category) leaves too few papers near the query for the
                # graph walk to find within its budget: then the filtered papers are few, and an exact scan is
                # both right and quick.
                if exact_sql is not None and _neighbours_found(mode, records[0]) < candidates:
                    records = await conn.fetch(exact_sql, *args)
        except (asyncpg.UndefinedTableError, asyncpg.UndefinedObjectError) as exc:
            raise SemanticSearchUnavailable(str(exc)) from exc
    first = records[0]
    if mode == "KEYWORD" and first["total"] == 0 and not await query_has_terms(conn, text):
        raise EmptyQuery(text)
    hits = [
        SearchHit(paper_from_record(r), r["score"], r["title_highlight"], r["abstract_highlight"])
        for r in records
        if r["id"] is not None
    ]
    facets = _facets_from_json(first["facets"]) if with_facets else None
    matches, estimated = _matches(
        first["total"],
        first["capped"],
        Scanned(
            first["tier_found"],
            first["tier_block"],
            first["rest_block"],
            first["relpages"],
            first["tier_share"],
            ordered=is_ordered(mode, sort, phrase),
            probe_found=first["probe_found"],
            probe_block=first["probe_block"],
        ),
        cap,
    )
    return SearchResult(total=first["total"], hits=hits, facets=facets, matches=matches, matches_estimated=estimated)


def _neighbours_found(mode: Mode, first: asyncpg.Record) -> int:
    return int(first["neighbours"])


@dataclass(frozen=True, slots=True)
class Scanned:
    """How far a capped keyword search got: matches kept from the cited tier, the last heap block each tier's scan
    reached, the table's size in blocks, and the cited tier's share of all papers (-1 or None: unknown). Sorted by
    date or citations (`ordered`), the candidates say nothing of the table: the cited tier's matches, read apart
    (`probe_found`, up to the cap, the last of them in block `probe_block`), do."""

    tier_found: int
    tier_block: float | None
    rest_block: float | None
    relpages: int | None
    tier_share: float | None
    ordered: bool = False
    probe_found: int = 0
    probe_block: float | None = None


def _tier_share(scanned: Scanned) -> float:
    # A never-analysed index has no row count (-1): then the tier's share is unknown, and not used.
    return min(1.0, scanned.tier_share) if scanned.tier_share and scanned.tier_share > 0 else 1.0


def _matches(total: int, capped: int, scanned: Scanned, cap: int | None = None) -> tuple[int, bool]:
    """Past the cap, estimate all matches: a scan that stopped part way through the table found that share of its
    matches; matches of the cited tier alone scale by the tier's share of all papers too."""
    cap = KEYWORD_CAP if cap is None else cap
    if capped <= cap or not scanned.relpages:
        return total, False
    if scanned.ordered:
        if not scanned.probe_found or scanned.probe_block is None:
            return capped, True
        read = 1.0 if scanned.probe_found <= cap else min(1.0, (scanned.probe_block + 1) / scanned.relpages)
        return max(capped, round(scanned.probe_found / read / _tier_share(scanned))), True
    rest_found = capped - scanned.tier_found
    if rest_found == 0:
        if scanned.tier_block is None:
            return total, False
        share = min(1.0, (scanned.tier_block + 1) / scanned.relpages) * _tier_share(scanned)
        return max(capped, round(capped / share)), True
    # Every cited match was kept; the scan of the other papers stopped part way through the table.
    if scanned.rest_block is None:
        return total, False
    share = min(1.0, (scanned.rest_block + 1) / scanned.relpages)
    return max(capped, scanned.tier_found + round(rest_found / share)), True


SELECT_QUERY_HAS_TERMS = """
SELECT numnode(q) > 0 AND querytree(q) <> 'T' FROM websearch_to_tsquery('english', $1::text) AS q
"""


async def query_has_terms(conn: Conn | asyncpg.Pool, text: str) -> bool:
    """False when the text has no word full-text search can look up (empty, stop words, only `-word`)."""
    return bool(await conn.fetchval(SELECT_QUERY_HAS_TERMS, text))


# --- similar papers ----------------------------------------------------------------------------------

# For each source paper, its nearest neighbours through the HNSW index (the LATERAL's ORDER BY operand is
# the source's vector, a parameter of the inner scan, so the index serves it).
SELECT_SIMILAR_PAPERS = f"""
SELECT {PAPER_COLUMNS}, n.source_id, n.similarity
FROM (
    SELECT s.paper_id AS source_id, x.paper_id, x.similarity
    FROM unnest($1::bigint[]) AS s (paper_id)
    JOIN paper_embeddings e ON e.paper_id = s.paper_id
    CROSS JOIN LATERAL (
        SELECT o.paper_id, (1 - (o.embedding <=> e.embedding))::float8 AS similarity
        FROM paper_embeddings o
        WHERE o.paper_id <> s.paper_id
        ORDER BY o.embedding <=> e.embedding
        LIMIT $2::int
    ) x
) n
JOIN papers p ON p.id = n.paper_id
ORDER BY n.source_id, n.similarity DESC, p.id
"""


async def fetch_similar_papers(
    conn: Conn, paper_ids: Sequence[int], *, limit: int
) -> dict[int, list[tuple[PaperRow, float]]]:
    """For each paper, up to `limit` of its nearest papers with their cosine similarity, most similar first;
    a paper without a vector has none. Raises SemanticSearchUnavailable without pgvector."""
    out: dict[int, list[tuple[PaperRow, float]]] = {pid: [] for pid in paper_ids}
    try:
        async with conn.transaction(readonly=True):
            await conn.execute(SEMANTIC_SESSION)
            rows = await conn.fetch(SELECT_SIMILAR_PAPERS, list(paper_ids), limit)
    except (asyncpg.UndefinedTableError, asyncpg.UndefinedObjectError) as exc:
        raise SemanticSearchUnavailable(str(exc)) from exc
    for r in rows:
        out[r["source_id"]].append((paper_from_record(r), r["similarity"]))
    return out


async def fetch_similar_papers_by_keys(conn: Conn, keys: list[tuple[int, int]]) -> list[list[PaperRow]]:
    """A loader batch: keys are (paper id, how many); one statement per distinct count (usually one).
    Without pgvector every list is empty: a paper page must not fail for want of the optional index."""
    out: dict[tuple[int, int], list[PaperRow]] = {}
    for limit in sorted({k[1] for k in keys}):
        ids = [k[0] for k in keys if k[1] == limit]
        try:
            found = await fetch_similar_papers(conn, ids, limit=limit)
        except SemanticSearchUnavailable:
            found = {}
        for pid in ids:
            out[(pid, limit)] = [row for row, _ in found.get(pid, [])]
    return [out[k] for k in keys]


# --- name look-up ------------------------------------------------------------------------------------

# word_similarity (`<%`, served by the gin_trgm index on wp_fold(name)) scores the query against the best
# matching part of the name, so `muller` matches `Hans Müller` fully and `nuller`
# or `mueller` still pass; plain similarity breaks ties towards names that are close as a whole.
# pg_trgm's default 0.6 drops a typo in the first letters of a short name (`nuller`: 0.57); 0.5 keeps it.
# A look-up reads a few hundred index entries: parallel workers would only add their start-up, and planning the
# statement again for every keystroke would cost more than running it (its plan does not depend on the name).
NAME_SESSION = (
    "SET LOCAL pg_trgm.word_similarity_threshold = 0.5; SET LOCAL max_parallel_workers_per_gather = 0;"
    " SET LOCAL plan_cache_mode = force_generic_plan"
)
# The folded query as a sub-select: computed once per statement even in a generic plan (NAME_SESSION), where
# `wp_fold($1)` would be computed again for every row it is compared with.
_QUERY_FOLDED = "(SELECT wp_fold($1::text))"
_NAME_MATCH = f"{_QUERY_FOLDED} <% wp_fold({{col}})"
# Over an already folded name.
_NAME_SCORE = f"(word_similarity({_QUERY_FOLDED}, {{col}}) + similarity({_QUERY_FOLDED}, {{col}}) / 10)"

# Ordered by score, then paper count, then id; `after` ($4..$6, all null for none) continues from a row.
_NAME_PAGE = """
SELECT * FROM ({inner}) s
WHERE $4::float8 IS NULL OR s.score < $4::float8
   OR (s.score = $4::float8 AND (s.paper_count < $5::int OR (s.paper_count = $5::int AND s.id > $6::bigint)))
ORDER BY s.score DESC, s.paper_count DESC, s.id
LIMIT $2::int OFFSET $3::int
"""

# A common name (Zhang, Wang) matches tens of thousands of researchers; ranking them all costs hundreds of
# milliseconds. So the candidates are at most NAME_CANDIDATES matches as the index yields them, plus the matches
# among as many researchers with most papers (so well-known people always come up); both are exact for names
# with fewer matches than that, and the ranking (similarity, then paper count) runs over the union.
NAME_CANDIDATES = 200


def _name_candidates(table: str, match: str, country: str = "", size: int = NAME_CANDIDATES) -> str:
    columns = "x.id, x.name, x.country" if country else "x.id, x.name"
    return f"""(SELECT c.id FROM {table} c WHERE {match.format(col="c.name")}{country.format(a="c")}
         LIMIT {size})
        UNION
        (SELECT t.id FROM (SELECT {columns} FROM {table} x
                           ORDER BY x.paper_count DESC, x.id LIMIT {size}) t
         WHERE {match.format(col="t.name")}{country.format(a="t")})"""


_PREFIX_MATCH = "wp_fold({col}) LIKE wp_fold($1::text) || '%'"
_COUNTRY_FILTER = " AND ($7::text IS NULL OR {a}.country = $7::text)"


def _researchers_page(match: str, score: str, candidates: str | None = None) -> str:
    candidates = candidates or _name_candidates("researchers", match)
    # The folded name is computed once per row (RESEARCHER_COLUMNS' fold_name) and scored from there.
    return _NAME_PAGE.format(
        inner=f"""SELECT f.*, {score.format(col="f.fold_name")}::float8 AS score FROM (
        SELECT {RESEARCHER_COLUMNS}, count(*) OVER () AS total
        FROM researchers r
        WHERE r.id IN ({candidates})) f"""
    )


def _institutions_page(match: str, score: str, size: int = NAME_CANDIDATES) -> str:
    candidates = _name_candidates("institutions", match, _COUNTRY_FILTER, size)
    return _NAME_PAGE.format(
        inner=f"""SELECT f.*, {score.format(col="f.fold_name")}::float8 AS score FROM (
        SELECT {INSTITUTION_COLUMNS}, count(*) OVER () AS total
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
     WHERE {_NAME_MATCH.format(col="t.name")})
    UNION
    (SELECT c.id FROM researchers c
     WHERE {_NAME_MATCH.format(col="c.name")} AND (SELECT count(*) FROM prefixed) < $2::int
     LIMIT {SUGGEST_CANDIDATES})"""

_SUGGEST_PAGE = _researchers_page(_NAME_MATCH, _NAME_SCORE, candidates=_SUGGEST_CANDIDATES)
SUGGEST_INSTITUTIONS = _institutions_page(_NAME_MATCH, _NAME_SCORE, size=SUGGEST_CANDIDATES)
# One and two letters have no trigram to look up: a prefix of the folded name instead.
_RESEARCHERS_BY_PREFIX = _researchers_page(_PREFIX_MATCH, "1.0")

RowT = TypeVar("RowT")


@dataclass(slots=True)
class NameMatches(Generic[RowT]):
    total: int
    rows: list[tuple[RowT, float]]


def _short(query: str) -> bool:
    return len("".join(query.split())) < 3


async def _name_page(
    conn: Conn, sql: str, query: str, limit: int, offset: int, after: tuple[float, int, int] | None, *extra: object
) -> list[asyncpg.Record]:
    keyset = after if after is not None else (None, None, None)
    if sql in _PREFIX_PAGES:
        return await conn.fetch(sql, escape_like(query), limit, offset, *keyset, *extra)
    async with conn.transaction(readonly=True):
        await conn.execute(NAME_SESSION)
        return await conn.fetch(sql, query, limit, offset, *keyset, *extra)


# -- lists by name: researchers(query:) and institutions(query:) ----------------------------------------------

# One matching rule whatever the order and the filters: the matches (trigram word similarity, or a prefix for one
# or two letters) among the rows that pass the filters, at most NAME_CANDIDATES from the index plus those among the
# NAME_CANDIDATES with most papers; then ordered by relevance or by the list's sort.
_LIST_BY_NAME = """
SELECT * FROM (
    SELECT {columns}, {score}::float8 AS score, count(*) OVER () AS total
    FROM {table} {a}
    WHERE {a}.id IN (
        (SELECT {a}.id FROM {table} {a} WHERE {match_a} AND {where} LIMIT {size})
        UNION
        (SELECT t.id FROM (SELECT {a}.id, {a}.name FROM {table} {a} WHERE {where}
                           ORDER BY {a}.paper_count DESC, {a}.id LIMIT {size}) t
         WHERE {match_t}))) {a}
WHERE {after}
ORDER BY {order}
LIMIT ${n} OFFSET ${n_offset}
"""


def name_relevance(alias: str) -> Sort:
    """Best name match first, then most papers, then id; `score` travels as repr() text (exact)."""
    return Sort(
        "NAME_RELEVANCE",
        f"{alias}.score DESC, {alias}.paper_count DESC, {alias}.id",
        Fragment(
            f"({alias}.score < $1::text::float8 OR ({alias}.score = $1::text::float8 AND ({alias}.paper_count < $2::int"
            f" OR ({alias}.paper_count = $2::int AND {alias}.id > $3::bigint))))",
            3,
        ),
        (("score", "score"), ("paper_count", "int"), ("id", "bigint")),
    )


@dataclass(frozen=True, slots=True)
class _Named(Generic[RowT]):
    """A table listed by name: its alias in the list's SQL, its columns and how a record becomes a row."""

    table: str
    alias: str
    columns: str
    row: Callable[[asyncpg.Record], RowT]


_RESEARCHERS = _Named("researchers", "r", RESEARCHER_COLUMNS, researcher_from_record)
_INSTITUTIONS = _Named("institutions", "i", INSTITUTION_COLUMNS, institution_from_record)


async def _list_by_name(
    conn: Conn,
    named: _Named[RowT],
    query: str,
    *,
    clauses: Sequence[Clause],
    sort: Sort | None,
    after: Clause | None,
    limit: int,
    offset: int,
) -> NameMatches[RowT]:
    query = " ".join(query.split())
    short = _short(query)
    match, score = (_PREFIX_MATCH, "1.0") if short else (_NAME_MATCH, _NAME_SCORE)
    where, args = compose(clauses, offset=1)
    after_sql, after_args = compose([after] if after is not None else [], offset=1 + len(args))
    n = 2 + len(args) + len(after_args)
    a = named.alias
    sql = _LIST_BY_NAME.format(
        columns=named.columns,
        score=score.format(col=f"wp_fold({a}.name)"),
        table=named.table,
        a=a,
        match_a=match.format(col=f"{a}.name"),
        match_t=match.format(col="t.name"),
        where=where,
        size=NAME_CANDIDATES,
        after=after_sql,
        order=(sort or name_relevance(a)).order_by,
        n=n,
        n_offset=n + 1,
    )
    params = [escape_like(query) if short else query, *args, *after_args, limit, offset]
    async with conn.transaction(readonly=True):
        await conn.execute(NAME_SESSION)
        records = await conn.fetch(sql, *params)
    return NameMatches(records[0]["total"] if records else 0, [(named.row(r), r["score"]) for r in records])


async def search_researchers_by_name(
    conn: Conn,
    query: str,
    *,
    limit: int,
    offset: int = 0,
    clauses: Sequence[Clause] = (),
    sort: Sort | None = None,
    after: Clause | None = None,
) -> NameMatches[ResearcherRow]:
    """Researchers whose name matches ignoring case and diacritics, a typo tolerated (with fewer than three letters,
    names that start with them) and that pass `clauses`; by `sort` (default: best match first, then most papers,
    then id). `after`: the sort's keyset condition. `total` counts every match, whatever the page."""
    return await _list_by_name(
        conn, _RESEARCHERS, query, clauses=clauses, sort=sort, after=after, limit=limit, offset=offset
    )


async def search_institutions_by_name(
    conn: Conn,
    query: str,
    *,
    limit: int,
    offset: int = 0,
    country: str | None = None,
    clauses: Sequence[Clause] = (),
    sort: Sort | None = None,
    after: Clause | None = None,
) -> NameMatches[InstitutionRow]:
    """Institutions by name, like `search_researchers_by_name`; optionally in one country (ISO code)."""
    if country is not None:
        clauses = [*clauses, Clause(INSTITUTION_FILTERS["country"], (country,))]
    return await _list_by_name(
        conn, _INSTITUTIONS, query, clauses=clauses, sort=sort, after=after, limit=limit, offset=offset
    )


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
    if _short(query):
        records = await _name_page(conn, SUGGEST_RESEARCHERS_BY_PREFIX, query, limit, 0, None)
    else:
        records = await _name_page(conn, SUGGEST_RESEARCHERS, query, limit, 0, None, escape_like(query))
    return [
        Suggestion("RESEARCHER", r["id"], r["name"], researcher_from_record(r).slug, r["hint"], r["score"])
        for r in records
    ]


async def _suggest_institutions(conn: Conn, query: str, limit: int) -> list[Suggestion]:
    query = " ".join(query.split())
    if _short(query):
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
