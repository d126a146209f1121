"""The statement that answers one page of a paper search.

One statement answers a page: the matched set is materialised once, and the page, the total and the facets
(one GROUP BY per facet over that in-memory set, never another scan of papers) are all read from it.
"""

from __future__ import annotations

import re
from types import MappingProxyType
from typing import Literal

from db.filters import PAPER_SORTS, Fragment, Sort
from db.queries.papers import PAPER_COLUMNS

Mode = Literal["KEYWORD", "SEMANTIC", "HYBRID"]

# How many nearest neighbours make up a semantic result set, and how many of each ranking hybrid fuses.
SEMANTIC_CANDIDATES = 200
HYBRID_CANDIDATES = 200
RRF_K = 60
# pgvector: search at least this wide, and keep scanning the graph when filters reject neighbours.
SEMANTIC_SESSION = (
    "SET LOCAL hnsw.ef_search = 200; SET LOCAL hnsw.iterative_scan = relaxed_order;"
    " SET LOCAL hnsw.max_scan_tuples = 10000"
)
# Within a category that has its own HNSW index, the neighbours are read by a statement of their own under this
# setting: the planner prices reading all of a small category's vectors and sorting them below the graph walk
# (q-fin.ST, 7,800 vectors of 2.5M: 55 ms p50 against 11 through its index, with the same ten papers). The search's
# statement then runs with the server's own setting again (INDEXED_CATEGORY_DONE): hybrid search's keyword half
# needs its sorts.
INDEXED_CATEGORY_SESSION = "SET LOCAL enable_sort = off"
INDEXED_CATEGORY_DONE = "SET LOCAL enable_sort TO DEFAULT"
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

# At most the cap ($8, KEYWORD_CAP in search.papers) + 1 matches (the bitmap scans stop there): ranking and facets
# of a term that half the archive contains would otherwise read half the archive. The cited tier first; only when
# it has no more than the cap's matches are the other papers scanned (in table order) for the rest.
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
# Within a category listed in semantic_categories (migration 0029): its own vectors, through its partial HNSW index
# (the literal `{category}` lets the planner use it) or scanned exactly when small, then re-ranked by the full
# vectors, so that the distances (and scores) are the exact ones. The filter (the category's own clause included)
# still reads papers: the iterative scan keeps walking while withdrawn or out-of-range papers are rejected.
_CATEGORY_NEIGHBOURS = """
    SELECT v.id, e.embedding <=> {vector}::text::vector AS dist
    FROM (SELECT c.paper_id AS id
          FROM paper_category_vectors c JOIN papers p ON p.id = c.paper_id
          WHERE c.category = {category} AND {where}
          ORDER BY (c.embedding <=> {vector}::text::halfvec(384)){exact}
          LIMIT {limit}::int) v
    JOIN paper_embeddings e ON e.paper_id = v.id"""
# A category with its own index: its neighbours read before the search's statement (`build_neighbours_sql`, $1 the
# query vector, $2 the candidates, the filter's parameters from $3), passed in as $10 and $11. The filter is the
# one they were read with (every statement names all its parameters), checked again on those few rows by key.
_READ_NEIGHBOURS = """
    SELECT n.id, n.dist FROM unnest($10::bigint[], $11::float8[]) AS n(id, dist) JOIN papers p ON p.id = n.id
    WHERE {where}"""

_SEMANTIC_MATCHES = f"""
capped AS (SELECT NULL::tid AS tid, false AS tiered WHERE false),
probe AS (SELECT NULL::tid AS tid WHERE false),
sem AS MATERIALIZED ({{neighbours}}
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
    FROM ({{neighbours}}
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
# A query that excludes a word, or is longer than a name, is not read the simple way too ($9).
EXCLUSION = re.compile(r"(^|\s)-\S")
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
# $7 candidates, $8 the keyword cap, $9 the text read the simple way, $10 and $11 the neighbours when read before
# (ids, distances; else null); the filter's parameters follow, then the cursor's.
_SEARCH_TEMPLATE = """
WITH params AS (SELECT $5::text AS text, $6::text AS vector, $7::int AS candidates, $8::int AS cap, $9::text AS names,
                       $10::bigint[] AS neighbour_ids, $11::float8[] AS neighbour_distances),
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

FIXED_PARAMS = 11
# The neighbours' own statement: $1 the query vector, $2 the candidates.
NEIGHBOURS_PARAMS = 2


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


def has_phrase(text: str) -> bool:
    """Whether websearch_to_tsquery will make a phrase of some of this text (quotes, hyphenated words)."""
    return _PHRASE.search(text) is not None


def is_ordered(mode: Mode, sort: Sort, phrase: bool) -> bool:
    """Whether a keyword search takes its candidates in the sort's order (`_ORDERED_CAPPED`)."""
    return mode == "KEYWORD" and not phrase and sort.name != "RELEVANCE"


def build_search_sql(
    mode: Mode,
    sort: Sort,
    where: str,
    after: str,
    *,
    exact: bool = False,
    phrase: bool = False,
    category: str | None = None,
    neighbours_read: bool = False,
) -> str:
    """`category`: the SQL literal of a category listed in semantic_categories (category_vectors.Route), whose own
    vectors the semantic neighbours are read from; `neighbours_read`: they were read before (`build_neighbours_sql`)
    and are passed in."""
    page_order = sort.order_by.replace("p.", "pg.")
    if phrase:
        # The row address comes from inside the phrase's source subquery.
        capped = _PHRASE_CAPPED.replace("p.ctid AS tid", "p.tid")
    elif is_ordered(mode, sort, phrase):
        capped = _ORDERED_CAPPED
    else:
        capped = _TIERED_CAPPED
    capped = capped.format(where=where, source=_PHRASE_SOURCE.format(where=where), order=sort.order_by)
    if neighbours_read:
        neighbours = _READ_NEIGHBOURS.format(where=where)
    elif category:
        neighbours = build_neighbours_sql(where, category, exact=exact, vector="$6", limit="$7")
    else:
        neighbours = _SEMANTIC_NEIGHBOURS.format(where=where, exact=_EXACT if exact else "")
    matches = _MATCHES[mode].format(capped=capped, neighbours=neighbours)
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


def build_neighbours_sql(
    where: str, category: str, *, exact: bool = False, vector: str = "$1", limit: str = "$2"
) -> str:
    """The nearest papers (id, distance) within an indexed category, through its own index (or scanned when
    `exact`): a statement of its own, or the search statement's part (`vector`, `limit` its parameters)."""
    return _CATEGORY_NEIGHBOURS.format(
        where=where, exact=_EXACT if exact else "", category=category, vector=vector, limit=limit
    )
