"""The demo generator on its own (no database): determinism, id formats, shares, heavy researchers."""

from __future__ import annotations

import random
import re
from collections import Counter
from datetime import UTC, date, datetime
from itertools import islice

import pytest

import demo
from db.ids import normalize_orcid, normalize_ror, parse_arxiv_id
from demo.papers import _IdMinter


def generate(papers: int, seed: int = 42, researchers_with_works: int | None = None):
    plan = demo.DemoPlan.for_papers(papers, seed)
    institutions = demo.make_institutions(plan)
    researchers, people = demo.make_researchers(plan)
    arxiv_ids: list[str] = []
    rows = list(demo.generate_papers(plan, people, institutions, arxiv_ids))
    works = list(islice(demo.generate_works(plan, people, arxiv_ids), researchers_with_works))
    return plan, institutions, researchers, people, rows, works


@pytest.fixture(scope="module")
def small():
    return generate(2_000, researchers_with_works=50)


def test_same_seed_same_data_other_seed_other_data() -> None:
    one, again, other = generate(500), generate(500), generate(500, seed=43)
    assert again[4] == one[4] and again[5] == one[5] and again[2] == one[2] and again[1] == one[1]
    assert [p.title for p, *_ in other[4]] != [p.title for p, *_ in one[4]]
    assert [r.name for r in other[2]] != [r.name for r in one[2]]


def test_institutions_have_well_formed_unique_ror_ids(small) -> None:
    _, institutions, *_ = small
    assert len(institutions) == 500
    assert len({i.ror_id for i in institutions}) == 500
    assert len({i.name for i in institutions}) == 500
    for inst in institutions:
        assert normalize_ror(inst.ror_id) == inst.ror_id, inst.ror_id
        assert inst.ror_id[0] == "0"
        assert inst.country and re.fullmatch(r"[A-Z]{2}", inst.country)
    assert "Université de Montréal" in {i.name for i in institutions}


def test_arxiv_ids_are_old_style_before_april_2007_and_new_style_after(small) -> None:
    _, _, _, _, rows, _ = small
    ids = [p.arxiv_id for p, *_ in rows]
    assert len(set(ids)) == len(ids)
    for p, *_ in rows:
        assert parse_arxiv_id(p.arxiv_id) == (p.arxiv_id, None)
        day = p.published.date()
        if day < date(2007, 4, 1):
            assert re.fullmatch(r"[a-z-]+/\d{7}", p.arxiv_id), p.arxiv_id
            assert p.arxiv_id.split("/")[1][:4] == p.published.strftime("%y%m")
        elif day < date(2015, 1, 1):
            assert re.fullmatch(r"\d{4}\.\d{4}", p.arxiv_id), p.arxiv_id
        else:
            assert re.fullmatch(r"\d{4}\.\d{5}", p.arxiv_id), p.arxiv_id
        assert p.updated >= p.published and p.version == len(p.versions)
    years = Counter(p.published.year for p, *_ in rows)
    assert min(years) == 1995 and max(years) == 2026
    assert years[2025] > years[2000]  # arXiv grows


def test_a_full_old_style_month_mints_no_id_beyond_999() -> None:
    """At the whole corpus's size today's cs share asks for about 1,270 cs papers in December 2006; arXiv's
    old-style numbers stop at 999 an archive a month, and the generator must then draw the paper elsewhere."""
    minter = _IdMinter(demo.DemoPlan.for_papers(2_500_000, 42))
    rng = random.Random(1)
    when = datetime(2006, 12, 15, tzinfo=UTC)
    minted = [minter.mint(when, "cs.LG", rng) for _ in range(1_300)]
    ids = [i for i in minted if i is not None]
    assert len(ids) == 999 and len(set(ids)) == 999
    assert minted[999:] == [None] * 301  # full from the 1,000th on, not before
    assert all(re.fullmatch(r"cs/0612\d{3}", i) and parse_arxiv_id(i) == (i, None) for i in ids)
    other = minter.mint(when, "hep-th", rng)
    assert other is not None and other.startswith("hep-th/0612")


def test_authorships_unmatched_share_and_collaborations(small) -> None:
    _, _, _, _, rows, _ = small
    people_slots = matched = collaborations = 0
    for p, matches, *_ in rows:
        matched_positions = {m.position for m in matches}
        assert len(matched_positions) == len(matches)
        for a in p.authors:
            if a.is_collaboration:
                collaborations += 1
                assert a.position not in matched_positions
                assert a.name.endswith("Collaboration")
            else:
                people_slots += 1
                matched += a.position in matched_positions
    assert collaborations > 0
    assert 0.08 < 1 - matched / people_slots < 0.12


def test_names_are_diverse(small) -> None:
    _, _, researchers, *_ = small
    names = [r.name for r in researchers]
    assert len(set(names)) > len(names) * 0.5
    assert any(any(0x4E00 <= ord(c) <= 0x9FFF for c in n) for n in names)
    assert any(any(0x0400 <= ord(c) <= 0x04FF for c in n) for n in names)
    assert any(any(0xAC00 <= ord(c) <= 0xD7A3 for c in n) for n in names)
    assert any("Ñ" in n or "ñ" in n for n in names) and any("ü" in n for n in names)
    assert any(n.endswith((" Jr.", " III")) for n in names)
    assert len({r.s2_author_id for r in researchers}) == len(researchers)
    orcids = [r.orcid for r in researchers if r.orcid]
    assert orcids and all(normalize_orcid(o) == o for o in orcids)
    assert all(o.startswith(("0000-0001-", "0000-0002-", "0000-0003-")) for o in orcids)  # the issued ranges
    assert len(set(orcids)) == len(orcids)
    assert all(re.fullmatch(r"A5\d{9}", r.openalex_id) for r in researchers if r.openalex_id)


def test_orcids_stay_unique_at_benchmark_scale() -> None:
    # A million-paper demo has ~690k researchers; colliding ORCIDs would drop researchers from the load.
    rng = random.Random(1)
    orcids = [demo.people._orcid(rng, j) for j in range(0, 700_000, 3)]
    assert len(set(orcids)) == len(orcids)
    assert all(normalize_orcid(o) == o for o in orcids[:1000])


def test_citations_are_skewed(small) -> None:
    _, _, _, _, rows, _ = small
    counts = sorted((c.cited_by_count for _, _, c, _ in rows if c), reverse=True)
    assert 0.8 < len(counts) / len(rows) < 0.9
    top = sum(counts[: len(counts) // 10])
    assert top > sum(counts) * 0.5  # the top tenth of papers hold most citations
    assert counts[len(counts) // 2] < 20


def test_works_overlap_across_sources_and_include_own_papers(small) -> None:
    plan, _, _, people, rows, works = small
    paper_ids = [p.arxiv_id for p, *_ in rows]
    heavy_id, heavy_works, totals = works[0]
    assert heavy_id == 0
    sources = Counter(w.source for w in heavy_works)
    assert sources["s2"] > 3_000 and sources["openalex"] > 3_000
    titles_in_both = {w.title for w in heavy_works if w.source == "s2"} & {
        w.title for w in heavy_works if w.source == "openalex"
    }
    assert titles_in_both
    own = {w.arxiv_id for w in heavy_works if w.arxiv_id}
    assert own and own <= set(paper_ids)
    assert totals.s2_citation_count == sum(w.citation_count or 0 for w in heavy_works if w.source == "s2")
    assert people.paper_count[0] == plan.heavy[0].papers


def test_default_dataset_has_heavy_researchers() -> None:
    plan, _, _, people, _, works = generate(demo.DEFAULT_PAPERS, researchers_with_works=3)
    assert plan.researchers == 30_000
    assert len(plan.heavy) >= 3
    for j, heavy in enumerate(plan.heavy):
        assert people.paper_count[j] == heavy.papers >= 2_000
        # Distinct as the figures count them: by arXiv id, else DOI, else the source's own id.
        distinct = {w.arxiv_id or w.doi or f"{w.source}:{w.external_id}" for w in works[j][1]}
        assert len(distinct) >= 5_000
    assert demo.DemoPlan.for_papers(1_000_000).heavy == plan.heavy
