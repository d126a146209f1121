from __future__ import annotations

from datetime import UTC, datetime

import pytest

from ingest.errors import BadResumptionToken, MalformedResponse, NoRecordsMatch, OAIError
from ingest.parsers.oai import parse_identify, parse_page
from tests.ingest.conftest import FIXTURES, OAI_CURRENT, OAI_LEGACY, fixture_records, list_records_page


def test_arxivraw_page_with_token_old_style_ids_and_acm_none() -> None:
    page = parse_page((OAI_CURRENT / "listrecords_arXivRaw_page1_with-resumptionToken.xml").read_bytes())
    assert page.token == "verb%3DListRecords%26metadataPrefix%3DarXivRaw%26from%3D2009-09-17%26skip%3D0"
    assert page.response_date == datetime(2026, 11, 30, 0, 47, 1, tzinfo=UTC)
    assert [r.arxiv_id for r in page.records] == ["cs/0001024", "0704.0248", "chao-dyn/9510015"]
    cs = page.records[0]
    assert cs.categories == ["cs.CV"] and cs.primary_category == "cs.CV"
    assert [a.name for a in cs.authors] == ["B. R. Schlei", "L. Prasad"]
    assert cs.published == datetime(2000, 1, 25, 16, 9, 37, tzinfo=UTC)
    # The abstract's two leading spaces are gone; `<acm-class>None` is not a value anywhere.
    assert cs.abstract.startswith("We describe a simple")
    assert "None" not in (cs.comments or "")
    assert cs.comments and cs.comments.startswith("5 pages")
    chao = page.records[2]
    assert chao.categories[0] == "chao-dyn" and chao.versions[0].source_type == "P"


def test_versions_give_published_updated_and_version() -> None:
    page = parse_page((OAI_CURRENT / "getrecord_arXivRaw_oldstyle-id_hep-th-0703166_5-versions.xml").read_bytes())
    (paper,) = page.records
    assert paper.arxiv_id == "hep-th/0703166"
    assert paper.version == 5 and [v.version for v in paper.versions] == [1, 2, 3, 4, 5]
    assert paper.published == paper.versions[0].submitted_at < paper.updated == paper.versions[-1].submitted_at
    assert not paper.withdrawn


def test_legacy_unpadded_rfc1123_dates_and_token() -> None:
    path = OAI_LEGACY / "listrecords_arXivRaw_from-2014-10-01_with-resumptionToken_2015-01-06.xml"
    page = parse_page(path.read_bytes())
    assert page.token == "726959|1001"
    assert len(page.records) == 6
    multi = next(r for r in page.records if r.arxiv_id == "0704.0716")
    assert multi.version == 4 and multi.published.year == 2007 and multi.updated.year == 2008


def test_withdrawn_from_last_version_source_type_i() -> None:
    page = parse_page((OAI_CURRENT / "getrecord_arXivRaw_withdrawn_cond-mat-0703772_source_type-I.xml").read_bytes())
    (paper,) = page.records
    assert paper.withdrawn
    assert paper.versions[-1].source_type == "I" and paper.versions[-1].size_kb == 0
    # A paper with an ordinary last version is not withdrawn.
    page = parse_page((OAI_LEGACY / "getrecord_arXivRaw_1302.2146_2015-01-06.xml").read_bytes())
    assert not page.records[0].withdrawn


def test_tex_accents_become_letters_but_math_stays() -> None:
    record = fixture_records(OAI_CURRENT / "getrecord_arXivRaw_oldstyle-id_hep-th-0703166_5-versions.xml")[0]
    record = record.replace(b"<title>", b'<title>Schr\\"odinger and   G{\\"o}del:\n   $\\"a$ ', 1)
    record = record.replace(b"<authors>Hironobu Kihara", b"<authors>Hironobu Kih\\'ara", 1)
    (paper,) = parse_page(list_records_page([record], None)).records
    assert paper.title.startswith('Schrödinger and Gödel: $\\"a$ ')
    assert paper.authors[0].name == "Hironobu Kihára"


def test_arxiv_format_split_names_affiliations_suffix() -> None:
    page = parse_page((OAI_LEGACY / "getrecord_arXiv_1606.07066_author-affiliations_2016-06-29.xml").read_bytes())
    (paper,) = page.records
    assert [(a.name, a.affiliation) for a in paper.authors][:2] == [
        ("Curtis J. Saxton", "Technion; DESY"),
        ("Ziri Younsi", "U.Frankfurt"),
    ]
    page = parse_page((OAI_LEGACY / "getrecord_arXiv_1603.05976_suffix-and-odd-keynames_2016-06-30.xml").read_bytes())
    names = [a.name for a in page.records[0].authors]
    assert ":" not in names and any(n.endswith(" IV") for n in names)
    assert any(a.is_collaboration for a in page.records[0].authors)
    page = parse_page((OAI_CURRENT / "getrecord_arXiv_oldstyle-id_math-0510544.xml").read_bytes())
    assert [a.name for a in page.records[0].authors][-1] == "Linsheng Zhu"


def test_deleted_header_is_a_tombstone() -> None:
    deleted = (
        b'<record xmlns="http://www.openarchives.org/OAI/2.0/"><header status="deleted">'
        b"<identifier>oai:arXiv.org:0704.0248</identifier><datestamp>2026-11-01</datestamp></header></record>"
    )
    page = parse_page(list_records_page([deleted], ""))
    assert page.deleted == ["0704.0248"] and page.records == [] and page.token is None
    # The generic (non-arXiv) sample: its identifiers are not arXiv ids, so nothing is tombstoned.
    page = parse_page(
        (FIXTURES / "arxiv_oai/generic_oai_not_arxiv/sickle_ListRecords_with_deleted_header.xml").read_bytes()
    )
    assert page.deleted == [] and page.skipped


def test_empty_final_token_means_complete() -> None:
    records = fixture_records(OAI_CURRENT / "getrecord_arXivRaw_oldstyle-id_hep-th-0703166_5-versions.xml")
    assert parse_page(list_records_page(records, "")).token is None
    assert parse_page(list_records_page(records, None)).token is None


def test_streamed_in_small_chunks_equals_whole() -> None:
    body = (OAI_CURRENT / "listrecords_arXivRaw_page2_via-resumptionToken.xml").read_bytes()
    whole = parse_page(body)
    chunked = parse_page([body[i : i + 97] for i in range(0, len(body), 97)])
    assert chunked.records == whole.records and chunked.token == whole.token


def test_truncated_xml_is_malformed() -> None:
    body = (OAI_CURRENT / "listrecords_arXivRaw_page1_with-resumptionToken.xml").read_bytes()
    with pytest.raises(MalformedResponse):
        parse_page(body[: len(body) // 2])
    with pytest.raises(MalformedResponse):
        parse_page(b"<!doctype html><html><body>503 Service Unavailable</body></html>")


def test_oai_errors_sent_with_http_200() -> None:
    with pytest.raises(BadResumptionToken):
        parse_page((OAI_CURRENT / "error_badResumptionToken.xml").read_bytes())
    with pytest.raises(NoRecordsMatch):
        parse_page((OAI_LEGACY / "error_noRecordsMatch_2015-06-23.xml").read_bytes())
    with pytest.raises(OAIError) as err:
        parse_page((OAI_LEGACY / "error_badArgument_2015-06-23.xml").read_bytes())
    assert err.value.code == "badArgument"


def test_record_without_categories_is_skipped_not_fatal() -> None:
    records = fixture_records(OAI_CURRENT / "getrecord_arXivRaw_oldstyle-id_hep-th-0703166_5-versions.xml")
    broken = records[0].replace(b"<categories>hep-th</categories>", b"")
    good = fixture_records(OAI_LEGACY / "getrecord_arXivRaw_1302.2146_2015-01-06.xml")
    page = parse_page(list_records_page([broken, *good], None))
    assert [r.arxiv_id for r in page.records] == ["1302.2146"]
    assert page.skipped and "categories" in page.skipped[0][1]


def test_identify_earliest_datestamp() -> None:
    assert str(parse_identify((OAI_CURRENT / "identify.xml").read_bytes())) == "2005-09-16"
