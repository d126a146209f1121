"""Keyword search, facets, highlights, sorts, paging and name look-up, on a corpus with known answers."""

from __future__ import annotations

from collections import Counter
from collections.abc import AsyncIterator

import asyncpg
import pytest

from db.filters import PaperFilterSpec, paper_filter_clauses
from db.queries.search.names import search_institutions_by_name, search_researchers_by_name
from db.queries.search.papers import EmptyQuery, SearchResult, search_papers
from db.queries.search.statement import CITED_TIER, SEARCH_SORTS
from db.queries.search.suggest import suggest
from tests.integration._search_data import PAPERS, Corpus, load_corpus

BY_KEY = {p.key: p for p in PAPERS}


@pytest.fixture(scope="module")
async def corpus(make_database) -> Corpus:
    return await load_corpus(await make_database("search_kw"))


@pytest.fixture
async def conn(corpus: Corpus) -> AsyncIterator[asyncpg.Connection]:
    c = await asyncpg.connect(corpus.dsn)
    yield c
    await c.close()


def keys(corpus: Corpus, result: SearchResult) -> list[str]:
    by_id = {v: k for k, v in corpus.paper_ids.items()}
    return [by_id[h.paper.id] for h in result.hits]


async def kw(conn: asyncpg.Connection, text: str, *, sort: str = "RELEVANCE", limit: int = 100, **kwargs):
    return await search_papers(
        conn,
        mode="KEYWORD",
        text=text,
        vector=None,
        clauses=kwargs.pop("clauses", []),
        sort=SEARCH_SORTS[sort],
        limit=limit,
        **kwargs,
    )


async def test_title_beats_abstract_and_citations_boost(conn, corpus) -> None:
    result = await kw(conn, "homology")
    # Same citations, same year: the title match ranks above the abstract-only match.
    assert keys(corpus, result) == ["title_match", "abstract_only"]
    spin = await kw(conn, "replica symmetry")
    # Identical text: the paper with more citations ranks first, and its score is higher by the log boost.
    assert keys(corpus, spin) == ["spin_high", "spin_low"]
    import math

    ratio = spin.hits[0].score / spin.hits[1].score
    assert ratio == pytest.approx((1 + math.log(1 + 400)) / (1 + math.log(1 + 5)))


async def test_relevance_orders_title_matches_by_citations(conn, corpus) -> None:
    result = await kw(conn, "graph neural networks")
    ranked = keys(corpus, result)
    assert {"gnn_molecules", "gnn_survey", "gnn_revisited", "gat"} <= set(ranked)
    # The uncited paper with the same title words ranks below the cited ones.
    assert ranked[-1] == "gnn_revisited"
    assert result.total == len(result.hits)
    assert all(a.score >= b.score for a, b in zip(result.hits, result.hits[1:], strict=False))


async def test_web_search_syntax(conn, corpus) -> None:
    assert keys(corpus, await kw(conn, '"graph attention"')) == ["gat"]
    without = keys(corpus, await kw(conn, "graph -attention"))
    assert "gat" not in without and "gnn_molecules" in without
    assert set(keys(corpus, await kw(conn, "transduction OR gravitational"))) == {"transformer", "grav_waves"}
    # Author names are searchable (weight C), diacritics as stored, also where English stemming would change
    # them (`Thorne` stems to `thorn`, `Krizhevsky` to `krizhevski`).
    assert keys(corpus, await kw(conn, "Vaswani")) == ["transformer"]
    assert keys(corpus, await kw(conn, "Thorne")) == ["grav_waves"]
    assert keys(corpus, await kw(conn, "Krizhevsky")) == ["cnn"]


async def test_empty_and_stop_word_queries_are_refused(conn) -> None:
    for text in ["", "   ", "the of and", "-graph"]:
        with pytest.raises(EmptyQuery):
            await kw(conn, text)


async def test_no_match_is_empty_with_zero_counts(conn) -> None:
    result = await kw(conn, "zyxwvut", with_facets=True)
    assert result.total == 0 and result.hits == []
    assert result.facets is not None
    assert result.facets.categories == [] and result.facets.primary_categories == [] and result.facets.years == []


async def test_facets_cover_the_whole_result_not_the_page(conn, corpus) -> None:
    everything = await kw(conn, "networks", with_facets=True)
    page = await kw(conn, "networks", limit=2, with_facets=True)
    assert len(page.hits) == 2 and page.total == everything.total > 2
    assert page.facets == everything.facets
    matched = [BY_KEY[k] for k in keys(corpus, everything)]
    assert everything.facets is not None
    assert {f.value: f.count for f in everything.facets.categories} == Counter(c for p in matched for c in p.categories)
    assert {f.value: f.count for f in everything.facets.primary_categories} == Counter(p.categories[0] for p in matched)
    assert {f.value: f.count for f in everything.facets.years} == Counter(str(p.year) for p in matched)
    counts = [f.count for f in everything.facets.categories]
    assert counts == sorted(counts, reverse=True)


async def test_filters_apply_to_hits_and_facets(conn, corpus) -> None:
    clauses = paper_filter_clauses(PaperFilterSpec(category="q-bio.BM"))
    result = await kw(conn, "networks OR learning", clauses=clauses, with_facets=True)
    assert set(keys(corpus, result)) == {"gnn_molecules", "protein"}
    assert result.facets is not None
    assert {f.value for f in result.facets.years} == {"2021"}
    primary = paper_filter_clauses(PaperFilterSpec(category="q-bio.BM", primary_only=True))
    assert keys(corpus, await kw(conn, "networks OR learning", clauses=primary)) == ["protein"]


async def test_sorts(conn, corpus) -> None:
    newest = await kw(conn, "networks", sort="NEWEST")
    dates = [h.paper.published for h in newest.hits]
    assert dates == sorted(dates, reverse=True)
    oldest = await kw(conn, "networks", sort="OLDEST")
    assert [h.paper.id for h in oldest.hits] == [h.paper.id for h in reversed(newest.hits)]
    cited = await kw(conn, "networks", sort="MOST_CITED")
    counts = [h.paper.cited_by_count for h in cited.hits]
    assert counts[-1] is None  # papers without a count come last
    assert counts[:-1] == sorted(counts[:-1], reverse=True)


@pytest.mark.parametrize("sort", ["RELEVANCE", "NEWEST", "OLDEST", "MOST_CITED"])
async def test_pages_and_cursors_walk_the_same_list(conn, sort) -> None:
    full = [h.paper.id for h in (await kw(conn, "networks OR graph", sort=sort)).hits]
    assert len(full) >= 6
    by_pages = []
    for page in range(0, len(full), 2):
        by_pages += [h.paper.id for h in (await kw(conn, "networks OR graph", sort=sort, limit=2, offset=page)).hits]
    assert by_pages == full
    walked: list[int] = []
    after = None
    spec = SEARCH_SORTS[sort]
    while True:
        result = await kw(conn, "networks OR graph", sort=sort, limit=2, after=after)
        if not result.hits:
            break
        walked += [h.paper.id for h in result.hits]
        after = spec.after_clause(spec.cursor_key(result.hits[-1]))
    assert walked == full


async def test_highlights_mark_terms_and_escape_markup(conn, corpus) -> None:
    result = await kw(conn, "graph colouring", with_highlights=True)
    hit = next(h for h in result.hits if h.paper.id == corpus.paper_ids["markup"])
    assert hit.title_highlight is not None and hit.abstract_highlight is not None
    assert "<mark>graph</mark>" in hit.title_highlight and "<mark>colouring</mark>" in hit.title_highlight
    assert "&lt;i&gt;chromatic&lt;/i&gt;" in hit.title_highlight and "<i>" not in hit.title_highlight
    assert "&amp;" in hit.title_highlight
    assert "<mark>graphs</mark>" in hit.abstract_highlight  # stemmed match marked too
    plain = await kw(conn, "graph colouring")
    assert all(h.title_highlight is None for h in plain.hits)


async def test_researcher_lookup_ignores_case_diacritics_and_a_typo(conn, corpus) -> None:
    for query in ["Muller", "müller", "MULLER", "Mueller", "Mulller", "Nuller", "Muler"]:
        found = await search_researchers_by_name(conn, query, limit=10)
        names = [r.name for r, _ in found.rows]
        # Equal match: more papers first.
        assert names[:2] == ["Hans Müller", "Anna Müller"], query
    exact = await search_researchers_by_name(conn, "anna muller", limit=10)
    assert exact.rows[0][0].name == "Anna Müller"
    assert (await search_researchers_by_name(conn, "Jean-Luc Emile", limit=5)).rows[0][0].name == "Jean-Luc Émile"
    assert (await search_researchers_by_name(conn, "qqqqqq", limit=5)).total == 0
    short = await search_researchers_by_name(conn, "ha", limit=5)
    assert [r.name for r, _ in short.rows] == ["Hans Müller", "Hannah Arendt"]


async def test_institution_lookup(conn) -> None:
    found = await search_institutions_by_name(conn, "Universite de Montreal", limit=5)
    assert found.rows[0][0].name == "Université de Montréal"
    assert (await search_institutions_by_name(conn, "eth zurich", limit=5)).rows[0][0].name == "ETH Zürich"
    assert (await search_institutions_by_name(conn, "Univrsity of Toronto", limit=5)).rows[0][0].name == (
        "University of Toronto"
    )
    in_ch = await search_institutions_by_name(conn, "university", limit=5, country="CH")
    assert all(i.country == "CH" for i, _ in in_ch.rows)
    paged = await search_institutions_by_name(conn, "university", limit=1, offset=1)
    everything = await search_institutions_by_name(conn, "university", limit=10)
    assert paged.total == everything.total and paged.rows[0][0].id == everything.rows[1][0].id


async def test_autocomplete_mixes_kinds_with_hints(conn, corpus) -> None:
    people = await suggest(conn, "mull", kinds=["RESEARCHER", "INSTITUTION", "PAPER"], limit=8)
    assert [(s.kind, s.label) for s in people[:2]] == [("RESEARCHER", "Hans Müller"), ("RESEARCHER", "Anna Müller")]
    assert people[0].hint == "ETH Zürich"  # his latest institution
    # One or two letters take the prefix path: the same hints.
    short = await suggest(conn, "ha", kinds=["RESEARCHER"], limit=8)
    assert [(s.label, s.hint) for s in short][:1] == [("Hans Müller", "ETH Zürich")]
    places = await suggest(conn, "montreal", kinds=["INSTITUTION"], limit=8)
    assert [(s.label, s.hint) for s in places] == [("Université de Montréal", "CA")]
    papers = await suggest(conn, "graph neu", kinds=["PAPER"], limit=3)
    graph_neural = ("gnn_molecules", "gnn_survey", "gnn_revisited", "gat")
    assert {s.id for s in papers} <= {corpus.paper_ids[k] for k in graph_neural}
    assert len(papers) == 3
    learning = await suggest(conn, "deep learni", kinds=["PAPER"], limit=3)
    assert corpus.paper_ids["protein"] in {s.id for s in learning}
    only_people = await suggest(conn, "montreal", kinds=["RESEARCHER"], limit=8)
    assert all(s.kind == "RESEARCHER" for s in only_people)


async def test_a_huge_result_is_capped_and_its_size_estimated(conn, corpus, monkeypatch) -> None:
    import db.queries.search.papers as search_module

    everything = await kw(conn, "networks OR graph OR learning", with_facets=True)
    assert not everything.matches_estimated and everything.matches == everything.total > 4
    monkeypatch.setattr(search_module, "KEYWORD_CAP", 3)
    capped = await kw(conn, "networks OR graph OR learning", with_facets=True)
    assert capped.total == 3 and len(capped.hits) == 3
    assert capped.matches_estimated and capped.matches >= 4
    assert capped.facets is not None
    assert sum(f.count for f in capped.facets.primary_categories) == 3
    assert {h.paper.id for h in capped.hits} <= {h.paper.id for h in everything.hits}


async def test_past_the_cap_a_common_term_is_ranked_among_well_cited_papers(conn, corpus, monkeypatch) -> None:
    import db.queries.search.papers as search_module

    query = "networks OR graph OR learning"
    everything = await kw(conn, query)
    cited = {h.paper.id for h in everything.hits if (h.paper.cited_by_count or 0) >= CITED_TIER}
    assert 2 <= len(cited) < everything.total  # the corpus has matches on both sides of the tier
    # More well-cited matches than the cap: the page is drawn from them alone, not from table order.
    monkeypatch.setattr(search_module, "KEYWORD_CAP", len(cited) - 1)
    capped = await kw(conn, query)
    assert len(capped.hits) == len(cited) - 1
    assert {h.paper.id for h in capped.hits} <= cited
    # The estimate scales by the tier's share of all papers: never below what the whole archive has.
    assert capped.matches_estimated and capped.matches >= len(cited)
    # At the cap exactly, every well-cited match is kept and the other papers fill nothing more.
    monkeypatch.setattr(search_module, "KEYWORD_CAP", len(cited))
    full_tier = await kw(conn, query)
    assert {h.paper.id for h in full_tier.hits} == cited


async def test_autocomplete_reads_surname_prefixes_most_prolific_first(conn) -> None:
    tx = conn.transaction()
    await tx.start()
    try:
        # 300 researchers share a surname, and 250 others have more papers than any of them: a suggestion list must
        # still show the most prolific Mitchells, not the first ones the table happens to hold.
        people = [(f"Ab{i:03d} Mitchell", i) for i in range(300)]
        people += [(f"Zed{i:03d} Other", 10_000 + i) for i in range(250)]
        people += [("Ann Mitcham", 5_000), ("Jing Zhang", 3), ("Jing Zhao", 2)]
        await conn.executemany("INSERT INTO researchers (name, name_slug, paper_count) VALUES ($1, 'x', $2)", people)
        await conn.execute("ANALYZE researchers")
        found = await suggest(conn, "mitchel", kinds=["RESEARCHER"], limit=8)
        assert [s.label for s in found] == [f"Ab{i:03d} Mitchell" for i in range(299, 291, -1)]
        # The surname is the query's last word; the first name narrows it.
        assert [s.label for s in await suggest(conn, "jing zh", kinds=["RESEARCHER"], limit=2)] == [
            "Jing Zhang",
            "Jing Zhao",
        ]
        # A typo inside the surname matches no prefix: the trigram index still finds the name.
        typo = await suggest(conn, "Mitchrll", kinds=["RESEARCHER"], limit=8)
        assert typo and all(s.label.endswith("Mitchell") for s in typo)
        # Suffixes are not surnames.
        assert await conn.fetchval("SELECT wp_surname('Robert Mitchell Jr.')") == "mitchell"
        assert await conn.fetchval("SELECT wp_surname('Sophie J. Müller III')") == "muller"
    finally:
        await tx.rollback()


@pytest.mark.parametrize(
    ("sort", "key"),
    [
        ("NEWEST", lambda p: (-p.published.timestamp(), -p.id)),
        ("OLDEST", lambda p: (p.published.timestamp(), p.id)),
        ("MOST_CITED", lambda p: (p.cited_by_count is None, -(p.cited_by_count or 0), -p.id)),
    ],
)
async def test_past_the_cap_a_sorted_search_lists_the_first_matches_in_that_order(
    conn, corpus, monkeypatch, sort, key
) -> None:
    import db.queries.search.papers as search_module

    query = "networks OR graph OR learning"
    everything = await kw(conn, query)
    expected = [p.id for p in sorted((h.paper for h in everything.hits), key=key)][:3]
    # Three candidates only: they must be the newest (oldest, most cited) of all matches, wherever they lie.
    monkeypatch.setattr(search_module, "KEYWORD_CAP", 3)
    capped = await kw(conn, query, sort=sort, with_facets=True)
    assert [h.paper.id for h in capped.hits] == expected
    assert capped.matches_estimated and capped.matches >= 4
    assert capped.facets is not None and sum(f.count for f in capped.facets.primary_categories) == 3
