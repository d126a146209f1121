"""Semantic Scholar and OpenAlex bodies (recorded) -> rows."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from ingest.errors import MalformedResponse
from ingest.parsers import openalex, s2
from tests.ingest.conftest import FIXTURES


def load(path: str) -> Any:
    return json.loads((FIXTURES / path).read_bytes())


def test_s2_batch_keeps_order_and_nulls() -> None:
    payload = load("s2/paper_batch_POST_fullfields_first-id-not-found-null.json")
    ids = ["0000.00000", "1111.11111", "2222.22222", "3333.33333"]
    papers = s2.parse_paper_batch(ids, payload)
    assert "0000.00000" not in papers  # null: not found
    assert papers["1111.11111"].citation_count == payload[1]["citationCount"]
    assert [a.author_id for a in papers["1111.11111"].authors] == [a["authorId"] for a in payload[1]["authors"]]
    with pytest.raises(MalformedResponse):
        s2.parse_paper_batch(ids[:2], payload)


def test_s2_batch_trusts_the_answers_arxiv_id() -> None:
    paper = load("s2/paper_DOI-10.48550_arxiv.2312.07559_arxiv-paper.json")
    assert set(s2.parse_paper_batch(["2312.07559"], [paper])) == {"2312.07559"}
    assert s2.parse_paper_batch(["2401.99999"], [paper]) == {}  # an answer for another paper is not used


def test_s2_author_and_papers_pages() -> None:
    author = s2.researcher_from_author(load("s2/author_2262347_allfields_with_papers.json"))
    assert author is not None
    assert (author.s2_author_id, author.s2_paper_count, author.s2_citation_count, author.s2_h_index) == (
        "2262347",
        60,
        12415,
        23,
    )
    works, nxt = s2.parse_author_papers_page(load("s2/author_1723755_papers_offset0_next100.json"))
    assert nxt == 100 and len(works) == 100 and all(w.source == "s2" for w in works)
    works, nxt = s2.parse_author_papers_page(load("s2/author_1723755_papers_offset800_last-page-no-next.json"))
    assert nxt is None and works
    with pytest.raises(MalformedResponse):
        s2.parse_author_papers_page(load("s2/error_404_author_not_found.json"))


def test_openalex_arxiv_markers() -> None:
    page = load("openalex/works_list_cursor-star_page1_arxiv-work_2025-11-17.json")
    works = {w.openalex_id: w for w in map(openalex.parse_work, page["results"]) if w}
    assert works["W3045921891"].arxiv_id == "2007.14454" and works["W3045921891"].is_preprint
    assert works["W3046863325"].arxiv_id is None and not works["W3046863325"].is_preprint
    # Without the DOI, the location id or the landing page still says which arXiv paper it is.
    raw = copy.deepcopy(next(w for w in page["results"] if w["id"].endswith("W3045921891")))
    raw["doi"] = None
    raw["ids"] = {}
    assert openalex.work_arxiv_id(raw) == "2007.14454"
    raw["locations"] = [{"landing_page_url": "https://arxiv.org/abs/2007.14454v2", "id": None}]
    raw["primary_location"] = None
    assert openalex.work_arxiv_id(raw) == "2007.14454"


def test_openalex_preprint_wins_over_journal_duplicate_in_either_order() -> None:
    results = load("openalex/works_list_filter-title.search_journal-plus-arxiv-duplicate_2025-09-11.json")["results"]
    works = [w for w in map(openalex.parse_work, results) if w]
    wanted = {"2304.05376": "10.1038/s42256-024-00832-8"}
    for order in (works, works[::-1]):
        grouped = openalex.match_works(wanted, order)
        assert [w.openalex_id for w in grouped["2304.05376"]] == ["W4365597205", "W4396723768"]


def test_openalex_institutions_keep_type_funder() -> None:
    inst = openalex.institution_from(load("openalex/institution_I27837315_2025-06.json"))
    assert inst is not None and (inst.ror_id, inst.type, inst.country) == ("00jmfr291", "funder", "US")
    assert openalex.institution_from({"ror": "https://ror.org/00jmfr290", "display_name": "bad checksum"}) is None


def test_openalex_author_figures_and_deleted_author() -> None:
    rec = openalex.researcher_from_author(load("openalex/author_A5023888391_2025-06.json"))
    assert rec is not None
    assert (rec.openalex_id, rec.orcid, rec.openalex_h_index, rec.openalex_i10_index) == (
        "A5023888391",
        "0000-0001-6187-6610",
        17,
        20,
    )
    deleted = openalex.researcher_from_author(load("openalex/author_A5317838346_deleted-author_2025-06.json"))
    assert deleted is not None and deleted.openalex_works_count == 0


def test_openalex_error_bodies_are_malformed_lists() -> None:
    with pytest.raises(MalformedResponse):
        openalex.parse_results(load("openalex/error_400_invalid_filter_field_2026-03-02.json"))
