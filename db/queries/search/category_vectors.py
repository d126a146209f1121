"""Per-category vectors (migration 0029): which way a category's semantic search goes, and building the partial
HNSW indexes of the big categories (`wovepaper semantic-indexes`)."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable
from dataclasses import dataclass

import asyncpg

from db.connection import Conn

# Below this many vectors a category is scanned exactly: a few thousand half-precision vectors in contiguous pages
# cost less than a graph walk, and are exact. Above it the category gets its own HNSW index.
MIN_INDEXED_VECTORS = 5_000

# The planner uses a partial index only when the query names its predicate's literal, so a category goes into the
# statement as text: only names of this shape (every arXiv category) are ever spelled into SQL.
_SAFE_CATEGORY = re.compile(r"[A-Za-z][A-Za-z0-9.-]{0,39}")

SELECT_ROUTE = "SELECT indexed FROM semantic_categories WHERE category = $1::text"

SELECT_HAS_CATEGORY_VECTORS = "SELECT to_regclass('paper_category_vectors') IS NOT NULL"

# An index-only scan of the primary key (category, paper_id).
COUNT_BY_CATEGORY = "SELECT category, count(*) AS n FROM paper_category_vectors GROUP BY category ORDER BY n DESC"

SELECT_INDEXES = """
SELECT c.relname AS name, i.indisvalid AS valid
FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
WHERE i.indrelid = 'paper_category_vectors'::regclass AND c.relname LIKE 'paper_category_vectors_hnsw_%'
"""

UPSERT_CATEGORY = """
INSERT INTO semantic_categories (category, vectors, indexed, index_name, checked_at)
VALUES ($1::text, $2::bigint, $3::boolean, $4::text, now())
ON CONFLICT (category) DO UPDATE
    SET vectors = excluded.vectors, indexed = excluded.indexed, index_name = excluded.index_name,
        checked_at = excluded.checked_at
"""

# Categories no paper holds any more: searched the old way (a literal naming them would find nothing anyway).
DELETE_GONE = "DELETE FROM semantic_categories WHERE NOT (category = ANY($1::text[]))"


@dataclass(frozen=True, slots=True)
class Route:
    """How a category's semantic neighbours are found: its category literal, and through its own index or exactly."""

    literal: str
    indexed: bool


def category_literal(category: str) -> str | None:
    """The category as an SQL string literal, or None when it is not a plain category name."""
    return f"'{category}'" if _SAFE_CATEGORY.fullmatch(category) else None


def index_name(category: str) -> str:
    # Lower case plus a hash of the exact name: distinct for names that differ only in case, and under 63 bytes.
    slug = re.sub(r"[^a-z0-9]+", "_", category.lower())[:30]
    return f"paper_category_vectors_hnsw_{slug}_{hashlib.md5(category.encode()).hexdigest()[:6]}"


async def category_route(conn: Conn, category: str) -> Route | None:
    """The route for a category, or None: not listed by `wovepaper semantic-indexes` (or not a plain name)."""
    literal = category_literal(category)
    if literal is None:
        return None
    indexed = await conn.fetchval(SELECT_ROUTE, category)
    return None if indexed is None else Route(literal, bool(indexed))


@dataclass(frozen=True, slots=True)
class CategoryIndexes:
    indexed: int
    built: list[str]
    scanned: int
    seconds_building: float


async def build_category_indexes(
    conn: asyncpg.Connection,
    *,
    min_vectors: int = MIN_INDEXED_VECTORS,
    maintenance_work_mem: str = "1GB",
    progress: Callable[[str], None] = lambda _: None,
) -> CategoryIndexes:
    """Build the missing partial HNSW indexes (one per category of at least `min_vectors` vectors, concurrently:
    searches and ingest go on), rebuild invalid ones (an interrupted build), and record every category's route.

    Idempotent: run it after each large ingest (a category that grew past the threshold gets its index). Raises
    LookupError when this database has no paper_category_vectors (no pgvector, or migration 0029 not applied)."""
    import time

    if not await conn.fetchval(SELECT_HAS_CATEGORY_VECTORS):
        raise LookupError("paper_category_vectors does not exist (no pgvector, or migration 0029 not applied)")
    counts = [(r["category"], int(r["n"])) for r in await conn.fetch(COUNT_BY_CATEGORY)]
    existing = {r["name"]: bool(r["valid"]) for r in await conn.fetch(SELECT_INDEXES)}
    await conn.execute("SELECT set_config('maintenance_work_mem', $1::text, false)", maintenance_work_mem)
    built: list[str] = []
    building = 0.0
    indexed = 0
    for category, n in counts:
        literal = category_literal(category)
        name = index_name(category)
        has_index = existing.get(name, False)
        if literal is not None and n >= min_vectors and not has_index:
            if name in existing:  # invalid: a build that was interrupted
                await conn.execute(f'DROP INDEX CONCURRENTLY IF EXISTS "{name}"')
            started = time.perf_counter()
            await conn.execute(
                f'CREATE INDEX CONCURRENTLY "{name}" ON paper_category_vectors'
                f" USING hnsw (embedding halfvec_cosine_ops) WHERE category = {literal}"
            )
            took = time.perf_counter() - started
            building += took
            built.append(category)
            has_index = True
            progress(f"{category}: {n} vectors, index built in {took:.1f}s")
        if literal is None:
            continue
        # A category that shrank below the threshold keeps its index (and uses it).
        indexed += has_index
        await conn.execute(UPSERT_CATEGORY, category, n, has_index, name if has_index else None)
    await conn.execute(DELETE_GONE, [c for c, _ in counts])
    await conn.execute("ANALYZE paper_category_vectors")
    return CategoryIndexes(indexed, built, len(counts) - indexed, building)
