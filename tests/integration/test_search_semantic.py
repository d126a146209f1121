"""Semantic and hybrid search, similar papers and embedding upkeep, for real: the bundled model and pgvector.

When the session's PostgreSQL lacks pgvector, the embedded PostgreSQL (which bundles it) is started for these.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import asyncpg
import pytest

import localservers
import semantic
from db.admin import create_database
from db.filters import PaperFilterSpec, compose, paper_filter_clauses
from db.migrate import migrate
from db.queries.embeddings import count_embeddings, has_embeddings, vector_literal
from db.queries.search.papers import SemanticSearchUnavailable, search_papers
from db.queries.search.similar import fetch_similar_papers
from db.queries.search.statement import SEARCH_SORTS
from ingest.embed import embed_missing
from tests.integration._search_data import Corpus, api_for, load_corpus

pytestmark = [
    pytest.mark.semantic,
    pytest.mark.skipif(not semantic.is_available(), reason="the `semantic` extra is not installed"),
]

ROOT = Path(__file__).resolve().parents[2]


async def _has_vector(dsn: str) -> bool:
    conn = await asyncpg.connect(dsn)
    try:
        return bool(await conn.fetchval("SELECT count(*) FROM pg_available_extensions WHERE name = 'vector'"))
    finally:
        await conn.close()


@pytest.fixture(scope="module")
async def vector_admin_dsn(pg_admin_dsn: str) -> str:
    if await _has_vector(pg_admin_dsn):
        return pg_admin_dsn
    return localservers.start_postgres(ROOT / ".wovepaper" / "test-pgvector")


@pytest.fixture(scope="module")
async def corpus(vector_admin_dsn: str) -> AsyncIterator[Corpus]:
    name = f"wovepaper_test_semantic_{uuid.uuid4().hex[:10]}"
    admin = await asyncpg.connect(vector_admin_dsn)
    await create_database(admin, name)
    await admin.close()
    head, sep, query = vector_admin_dsn.partition("?")
    dsn = f"{head.rsplit('/', 1)[0]}/{name}{sep}{query}"
    try:
        yield await load_corpus(dsn)
    finally:
        admin = await asyncpg.connect(vector_admin_dsn)
        await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        await admin.close()


@pytest.fixture(scope="module")
async def embedded(corpus: Corpus) -> Corpus:
    conn = await asyncpg.connect(corpus.dsn)
    try:
        assert await has_embeddings(conn)
        assert await embed_missing(conn, batch_size=4) == len(corpus.paper_ids)
    finally:
        await conn.close()
    return corpus


@pytest.fixture
async def conn(embedded: Corpus) -> AsyncIterator[asyncpg.Connection]:
    c = await asyncpg.connect(embedded.dsn)
    yield c
    await c.close()


def keys(corpus: Corpus, ids: list[int]) -> list[str]:
    by_id = {v: k for k, v in corpus.paper_ids.items()}
    return [by_id[i] for i in ids]


async def run(conn, mode, text, *, limit=100, clauses=(), sort="RELEVANCE", **kwargs):
    vector = semantic.embed_query(text)
    return await search_papers(
        conn,
        mode=mode,
        text=text,
        vector=vector,
        clauses=list(clauses),
        sort=SEARCH_SORTS[sort],
        limit=limit,
        **kwargs,
    )


def test_vectors_are_unit_length_and_384_wide() -> None:
    [v] = semantic.embed_papers([("Graph neural networks", "Message passing on graphs.")])
    assert len(v) == semantic.DIMENSIONS
    assert sum(x * x for x in v) == pytest.approx(1.0, abs=1e-4)


async def test_embed_missing_is_incremental_and_notices_changed_text(embedded: Corpus) -> None:
    conn = await asyncpg.connect(embedded.dsn)
    try:
        assert await count_embeddings(conn) == (len(embedded.paper_ids), len(embedded.paper_ids))
        assert await embed_missing(conn) == 0
        pid = embedded.paper_ids["qec"]
        before = await conn.fetchval("SELECT embedding::text FROM paper_embeddings WHERE paper_id = $1", pid)
        await conn.execute("UPDATE papers SET abstract = abstract || ' Also magic states.' WHERE id = $1", pid)
        assert await embed_missing(conn, limit=5) == 1
        after = await conn.fetchval("SELECT embedding::text FROM paper_embeddings WHERE paper_id = $1", pid)
        assert after != before
        assert await embed_missing(conn) == 0
    finally:
        await conn.close()


async def test_semantic_finds_meaning_without_shared_words(conn, embedded) -> None:
    text = "ripples in spacetime when two collapsed stars collide"
    keyword = await search_papers(
        conn, mode="KEYWORD", text=text, vector=None, clauses=[], sort=SEARCH_SORTS["RELEVANCE"], limit=10
    )
    assert embedded.paper_ids["grav_waves"] not in {h.paper.id for h in keyword.hits}
    result = await run(conn, "SEMANTIC", text, with_facets=True, with_highlights=True)
    assert keys(embedded, [h.paper.id for h in result.hits])[0] == "grav_waves"
    scores = [h.score for h in result.hits]
    assert scores == sorted(scores, reverse=True) and -1 <= scores[-1] <= scores[0] <= 1
    assert result.total == len(result.hits) == len(embedded.paper_ids)
    assert result.facets is not None
    assert sum(f.count for f in result.facets.primary_categories) == result.total


async def test_semantic_neighbours_of_a_topic(conn, embedded) -> None:
    result = await run(conn, "SEMANTIC", "learning on molecular graphs with message passing", limit=3)
    top = keys(embedded, [h.paper.id for h in result.hits])
    assert top[0] == "gnn_molecules"
    assert set(top) <= {"gnn_molecules", "gnn_revisited", "gnn_survey", "gat", "protein"}


async def test_semantic_honours_filters_and_paging(conn, embedded) -> None:
    clauses = paper_filter_clauses(PaperFilterSpec(category="cs.LG"))
    result = await run(conn, "SEMANTIC", "protein folding", clauses=clauses)
    assert result.hits and all("cs.LG" in h.paper.categories for h in result.hits)
    assert keys(embedded, [result.hits[0].paper.id]) == ["protein"]
    full = [h.paper.id for h in result.hits]
    sort = SEARCH_SORTS["RELEVANCE"]
    walked: list[int] = []
    after = None
    while True:
        page = await run(conn, "SEMANTIC", "protein folding", clauses=clauses, limit=2, after=after)
        if not page.hits:
            break
        walked += [h.paper.id for h in page.hits]
        after = sort.after_clause(sort.cursor_key(page.hits[-1]))
    assert walked == full
    newest = await run(conn, "SEMANTIC", "protein folding", clauses=clauses, sort="NEWEST")
    dates = [h.paper.published for h in newest.hits]
    assert dates == sorted(dates, reverse=True) and set(h.paper.id for h in newest.hits) == set(full)


async def test_hybrid_fuses_both_rankings(conn, embedded) -> None:
    result = await run(conn, "HYBRID", "graph attention", with_facets=True)
    ranked = keys(embedded, [h.paper.id for h in result.hits])
    # First in both lists, so first in the fusion.
    assert ranked[0] == "gat"
    assert result.hits[0].score == pytest.approx(2 / 61)
    # Every paper appears (semantic lists them all), and fused scores are descending.
    assert result.total == len(embedded.paper_ids)
    scores = [h.score for h in result.hits]
    assert scores == sorted(scores, reverse=True)
    assert result.facets is not None and sum(f.count for f in result.facets.years) == result.total
    # Stop words only: nothing for the keyword half, the semantic half still answers.
    fallback = await run(conn, "HYBRID", "the of and")
    assert fallback.total == len(embedded.paper_ids)


async def test_similar_papers(conn, embedded) -> None:
    source = embedded.paper_ids["gnn_revisited"]
    similar = await fetch_similar_papers(conn, [source, embedded.paper_ids["dark_matter"]], limit=3)
    top = keys(embedded, [row.id for row, _ in similar[source]])
    assert source not in [row.id for row, _ in similar[source]]
    assert top[0] in {"gnn_survey", "gnn_molecules"}
    assert set(top) <= {"gnn_molecules", "gnn_survey", "gat"}
    sims = [s for _, s in similar[source]]
    assert sims == sorted(sims, reverse=True)
    assert len(similar[embedded.paper_ids["dark_matter"]]) == 3


async def test_without_pgvector_semantic_is_unavailable_and_keyword_works(make_database) -> None:
    dsn = await make_database("search_novector")
    conn = await asyncpg.connect(dsn)
    try:
        await migrate(conn)
        # The state of a server without pgvector: migration 0003 then creates no embedding table.
        await conn.execute("DROP TABLE IF EXISTS paper_category_vectors, paper_embeddings")
        assert not await has_embeddings(conn)
        with pytest.raises(semantic.EmbeddingsUnavailable):
            await embed_missing(conn)
        vector = semantic.embed_query("anything")
        for mode in ("SEMANTIC", "HYBRID"):
            with pytest.raises(SemanticSearchUnavailable):
                await search_papers(
                    conn, mode=mode, text="graph", vector=vector, clauses=[], sort=SEARCH_SORTS["RELEVANCE"], limit=5
                )
        with pytest.raises(SemanticSearchUnavailable):
            await fetch_similar_papers(conn, [1], limit=3)
        keyword = await search_papers(
            conn, mode="KEYWORD", text="graph", vector=None, clauses=[], sort=SEARCH_SORTS["RELEVANCE"], limit=5
        )
        assert keyword.total == 0
    finally:
        await conn.close()


# -- through /graphql --------------------------------------------------------------------------------

SEMANTIC_Q = """query($q: String!, $mode: SearchMode) {
  search(query: $q, mode: $mode, first: 3) {
    totalCount edges { score node { title } }
    facets(limit: 3) { years { values { value count } otherCount } }
  }
}"""
SIMILAR_Q = """query($id: String!) { paper(id: $id) { title similarPapers(first: 2) { title } } }"""


async def test_semantic_and_similar_papers_through_graphql(embedded: Corpus) -> None:
    async with api_for(embedded.dsn) as api:
        data = await api.data(SEMANTIC_Q, q="ripples in spacetime when two collapsed stars collide", mode="SEMANTIC")
        assert data["search"]["edges"][0]["node"]["title"] == "Gravitational waves from binary black hole mergers"
        assert data["search"]["totalCount"] == len(embedded.paper_ids)
        years = data["search"]["facets"]["years"]
        assert sum(v["count"] for v in years["values"]) + years["otherCount"] == len(embedded.paper_ids)
        hybrid = await api.data(SEMANTIC_Q, q="graph attention", mode="HYBRID")
        assert hybrid["search"]["edges"][0]["node"]["title"] == "Graph attention networks"
        arxiv_id = await _arxiv_id(embedded, "gnn_revisited")
        similar = (await api.data(SIMILAR_Q, id=arxiv_id))["paper"]["similarPapers"]
        assert len(similar) == 2
        assert {s["title"] for s in similar} <= {
            "Graph neural networks for molecule property prediction",
            "A survey of graph neural networks",
            "Graph attention networks",
        }


async def test_graphql_without_pgvector(make_database) -> None:
    dsn = await make_database("search_api_novector")
    corpus = await load_corpus(dsn)
    conn = await asyncpg.connect(dsn)
    await conn.execute("DROP TABLE IF EXISTS paper_category_vectors, paper_embeddings")
    await conn.close()
    async with api_for(dsn) as api:
        for mode in ("SEMANTIC", "HYBRID"):
            assert await api.error_code(SEMANTIC_Q, q="graph", mode=mode) == "SEMANTIC_UNAVAILABLE"
        arxiv_id = await _arxiv_id(corpus, "gnn_revisited")
        # The paper page still renders: no similar papers instead of an error.
        assert (await api.data(SIMILAR_Q, id=arxiv_id))["paper"]["similarPapers"] == []
        assert (await api.data(SEMANTIC_Q, q="graph"))["search"]["totalCount"] > 0


async def _arxiv_id(corpus: Corpus, key: str) -> str:
    conn = await asyncpg.connect(corpus.dsn)
    try:
        return str(await conn.fetchval("SELECT arxiv_id FROM papers WHERE id = $1", corpus.paper_ids[key]))
    finally:
        await conn.close()


@pytest.fixture
async def fresh_corpus(vector_admin_dsn: str) -> AsyncIterator[Corpus]:
    name = f"wovepaper_test_embedcli_{uuid.uuid4().hex[:10]}"
    admin = await asyncpg.connect(vector_admin_dsn)
    await create_database(admin, name)
    await admin.close()
    head, sep, query = vector_admin_dsn.partition("?")
    try:
        yield await load_corpus(f"{head.rsplit('/', 1)[0]}/{name}{sep}{query}")
    finally:
        admin = await asyncpg.connect(vector_admin_dsn)
        await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        await admin.close()


def test_embed_command(fresh_corpus: Corpus) -> None:
    from typer.testing import CliRunner

    from cli import app

    runner = CliRunner()
    env = {"DATABASE_URL": fresh_corpus.dsn}
    first = runner.invoke(app, ["embed", "--limit", "5", "--batch-size", "2"], env=env)
    assert first.exit_code == 0, first.output
    assert "embedded 5 paper(s)" in first.output
    rest = runner.invoke(app, ["embed"], env=env)
    assert rest.exit_code == 0, rest.output
    assert f"embedded {len(fresh_corpus.paper_ids) - 5} paper(s)" in rest.output
    again = runner.invoke(app, ["embed"], env=env)
    assert "embedded 0 paper(s)" in again.output


async def test_chat_retrieval_is_hybrid_when_the_model_and_pgvector_are_there(embedded: Corpus) -> None:
    from chat.retrieval import ChatScope, retrieve

    question = "Ripples in spacetime when collapsed stars collide?"
    pool = await asyncpg.create_pool(embedded.dsn, min_size=1, max_size=2)
    try:
        hybrid = await retrieve(pool, question, ChatScope(), semantic=True)
        keyword = await retrieve(pool, question, ChatScope(), semantic=False)
    finally:
        await pool.close()
    assert keys(embedded, [p.id for p in hybrid])[0] == "grav_waves"
    assert embedded.paper_ids["grav_waves"] not in {p.id for p in keyword}


async def test_category_vectors_route_and_upkeep(conn, embedded, monkeypatch) -> None:
    """Migration 0029: a category's own vectors (its partial HNSW index, or an exact scan when small) give what the
    index over all vectors gives; the triggers keep them in step with papers and vectors."""
    import db.queries.search.papers as search_module
    from db.queries.search.category_vectors import build_category_indexes, category_route

    cs_lg = paper_filter_clauses(PaperFilterSpec(category="cs.LG"))
    counts = dict(await conn.fetch("SELECT category, count(*) FROM paper_category_vectors GROUP BY 1"))
    tagged = await conn.fetchval("SELECT count(*) FROM papers WHERE categories @> ARRAY['cs.LG']")
    assert counts["cs.LG"] == tagged
    assert await category_route(conn, "cs.LG") is None  # not listed yet: the index over all vectors
    # cs.LG gets an index of its own, every smaller category is scanned.
    done = await build_category_indexes(conn, min_vectors=tagged)
    assert done.indexed >= 1 and "cs.LG" in done.built
    route = await category_route(conn, "cs.LG")
    assert route is not None and route.indexed and route.literal == "'cs.LG'"
    small = next(c for c, n in counts.items() if n < tagged)
    assert (await category_route(conn, small)) == type(route)(f"'{small}'", False)
    assert await category_route(conn, "cs.LG'; --") is None
    again = await build_category_indexes(conn, min_vectors=tagged)
    assert again.built == [] and again.indexed == done.indexed

    for mode, text, clauses in [
        ("SEMANTIC", "protein folding", cs_lg),
        ("HYBRID", "graph attention", cs_lg),
        ("SEMANTIC", "graph attention", paper_filter_clauses(PaperFilterSpec(category="cs.LG", primary_only=True))),
        ("SEMANTIC", "protein folding", paper_filter_clauses(PaperFilterSpec(category=small))),
    ]:
        routed = await run(conn, mode, text, clauses=clauses, with_facets=True)
        monkeypatch.setattr(search_module, "CATEGORY_VECTORS", False)
        single = await run(conn, mode, text, clauses=clauses, with_facets=True)
        monkeypatch.setattr(search_module, "CATEGORY_VECTORS", True)
        assert [h.paper.id for h in routed.hits] == [h.paper.id for h in single.hits]
        assert [h.score for h in routed.hits] == pytest.approx([h.score for h in single.hits])
        assert routed.total == single.total and routed.facets == single.facets

    # A paper moved out of cs.LG leaves its vectors; a re-embedded one is replaced; a deleted one is gone.
    pid = embedded.paper_ids["protein"]
    rows = "SELECT category FROM paper_category_vectors WHERE paper_id = $1 ORDER BY 1"
    before = await conn.fetchval("SELECT categories FROM papers WHERE id = $1", pid)
    await conn.execute("UPDATE papers SET categories = ARRAY['q-bio.BM'] WHERE id = $1", pid)
    assert [r[0] for r in await conn.fetch(rows, pid)] == ["q-bio.BM"]
    moved = await run(conn, "SEMANTIC", "protein folding", clauses=cs_lg)
    assert pid not in {h.paper.id for h in moved.hits}
    await conn.execute("UPDATE papers SET categories = $2 WHERE id = $1", pid, before)
    assert sorted(r[0] for r in await conn.fetch(rows, pid)) == sorted(set(before))
    await conn.execute(
        "UPDATE paper_embeddings SET embedding = (SELECT embedding FROM paper_embeddings WHERE paper_id = $2)"
        " WHERE paper_id = $1",
        pid,
        embedded.paper_ids["gat"],
    )
    assert await conn.fetchval(
        "SELECT bool_and(c.embedding = e.embedding::halfvec(384)) FROM paper_category_vectors c"
        " JOIN paper_embeddings e ON e.paper_id = $2 WHERE c.paper_id = $1",
        pid,
        embedded.paper_ids["gat"],
    )
    await conn.execute("DELETE FROM paper_embeddings WHERE paper_id = $1", pid)
    assert await conn.fetch(rows, pid) == []
    assert await embed_missing(conn) == 1
    assert sorted(r[0] for r in await conn.fetch(rows, pid)) == sorted(set(before))


async def test_indexed_category_neighbours_walk_their_index_and_the_search_may_sort(conn, embedded) -> None:
    """Within a category with its own HNSW index, the neighbours are read by a statement of their own that walks
    that index (sorting all the category's vectors is what the planner prefers for a small one, and is refused
    there); the search's statement after it runs with sorts allowed again, as hybrid search's keyword half needs."""
    import db.queries.search.papers as search_module
    from db.queries.search.category_vectors import build_category_indexes, category_route, index_name
    from db.queries.search.statement import INDEXED_CATEGORY_SESSION, SEMANTIC_SESSION, build_neighbours_sql

    tagged = await conn.fetchval("SELECT count(*) FROM papers WHERE categories @> ARRAY['cs.LG']")
    await build_category_indexes(conn, min_vectors=tagged)
    route = await category_route(conn, "cs.LG")
    assert route is not None and route.indexed
    clauses = paper_filter_clauses(PaperFilterSpec(category="cs.LG"))
    text = vector_literal(semantic.embed_query("graph attention"))
    where, args = compose(clauses, offset=search_module.NEIGHBOURS_PARAMS)
    async with conn.transaction():
        await conn.execute(f"{SEMANTIC_SESSION}; {INDEXED_CATEGORY_SESSION}")
        plan = "\n".join(
            r[0] for r in await conn.fetch(f"EXPLAIN {build_neighbours_sql(where, route.literal)}", text, 200, *args)
        )
    assert index_name("cs.LG") in plan, plan

    async with conn.transaction():
        ids, distances = await search_module._indexed_neighbours(conn, clauses, route.literal, text, 200)
        assert await conn.fetchval("SHOW enable_sort") == "on"  # the server's own setting
    exact = await conn.fetch(
        "SELECT e.paper_id, e.embedding <=> $1::text::vector AS d FROM paper_embeddings e"
        " JOIN papers p ON p.id = e.paper_id WHERE 'cs.LG' = ANY (p.categories) AND NOT p.withdrawn ORDER BY 2, 1",
        text,
    )
    # This corpus's category has fewer than 200 papers: all of them, with their exact (full precision) distances.
    assert len(exact) < 200
    found = dict(zip(ids, distances, strict=True))
    assert sorted(found) == sorted(r[0] for r in exact)
    assert [found[r[0]] for r in exact] == pytest.approx([r[1] for r in exact])
