"""Id forms the graph accepts for papers, researchers and institutions."""

from __future__ import annotations

import pytest

from resolvers.errors import BadUserInput
from resolvers.ids import parse_institution_id, parse_paper_id, parse_researcher_id


@pytest.mark.parametrize(
    ("given", "arxiv_id", "kind", "version"),
    [
        ("2401.01234", "2401.01234", "arxiv", None),
        ("2401.01234v2", "2401.01234", "arxiv", 2),
        ("arXiv:2401.01234", "2401.01234", "arxiv", None),
        ("astro-ph/9901001", "astro-ph/9901001", "arxiv", None),
        ("astro-ph/9901001v3", "astro-ph/9901001", "arxiv", 3),
        ("ASTRO-PH/9901001", "astro-ph/9901001", "arxiv", None),
        ("math.GT/0309136", "math.GT/0309136", "arxiv", None),
        ("https://arxiv.org/abs/2401.01234", "2401.01234", "arxiv", None),
        ("https://arxiv.org/pdf/2401.01234v1", "2401.01234", "arxiv", 1),
        ("10.48550/arXiv.2401.01234", "2401.01234", "arxiv", None),
        ("10.48550/ARXIV.2401.01234", "2401.01234", "arxiv", None),
        ("2401.01234-some-title", "2401.01234", "slug", None),
        ("astro-ph-9901001-cosmic-rays", "astro-ph/9901001", "slug", None),
        ("astro-ph-9901001", "astro-ph/9901001", "slug", None),
        ("hep-th-9901001-x", "hep-th/9901001", "slug", None),
    ],
)
def test_paper_ids(given: str, arxiv_id: str, kind: str, version: int | None) -> None:
    key = parse_paper_id(given)
    assert (key.value, key.kind, key.version) == (arxiv_id, kind, version)


@pytest.mark.parametrize(
    ("given", "kind", "value"),
    [
        ("10.1038/s42256-024-00832-8", "doi", "10.1038/s42256-024-00832-8"),
        ("https://doi.org/10.1038/S42256-024-00832-8", "doi", "10.1038/s42256-024-00832-8"),
        ("doi:10.1000/old.paper", "doi", "10.1000/old.paper"),
        ("s2:" + "C4A6" * 10, "s2", "c4a6" * 10),
        ("CorpusId:258059792", "corpus", "258059792"),
        ("corpusid:7", "corpus", "7"),
        ("W4365597205", "openalex", "W4365597205"),
        ("https://openalex.org/w4365597205", "openalex", "W4365597205"),
        # The arXiv DOI is the arXiv id, not a journal DOI.
        ("https://doi.org/10.48550/arXiv.2401.01234", "arxiv", "2401.01234"),
    ],
)
def test_paper_external_ids(given: str, kind: str, value: str) -> None:
    key = parse_paper_id(given)
    assert (key.kind, key.value) == (kind, value)


def test_the_global_ids_this_api_returns_are_id_forms_too() -> None:
    from db.paging import encode_global_id, paper_global_id

    assert (
        parse_paper_id(paper_global_id("astro-ph/9901001")).kind,
        parse_paper_id(paper_global_id("2401.00001")).value,
    ) == (
        "arxiv",
        "2401.00001",
    )
    assert parse_paper_id(encode_global_id("Paper", 42)) == parse_paper_id(encode_global_id("Paper", 42))
    assert parse_paper_id(encode_global_id("Paper", 42)).kind == "id"
    assert parse_researcher_id(encode_global_id("Researcher", 7)).db_id == 7
    assert parse_institution_id(encode_global_id("Institution", 9)).db_id == 9
    # Another type's global id is no id of this one.
    with pytest.raises(BadUserInput):
        parse_researcher_id(encode_global_id("Institution", 9))
    assert parse_institution_id(encode_global_id("Researcher", 7)).kind == "name"


@pytest.mark.parametrize(
    "given",
    ["", "hello", "2401", "2401.1", "12345", "astro-ph", "2401.01234--x", "é", "s2:123", "CorpusId:x", "10.1/x"],
)
def test_malformed_paper_ids(given: str) -> None:
    with pytest.raises(BadUserInput) as err:
        parse_paper_id(given)
    assert err.value.extensions == {"code": "BAD_USER_INPUT"}
    assert "astro-ph/9901001" in str(err.value)


@pytest.mark.parametrize(
    ("given", "kind", "value", "db_id"),
    [
        ("1396945", "id", "1396945", 1396945),
        ("1396945-wumo-yan", "slug", "1396945-wumo-yan", 1396945),
        ("s2:2109311836", "s2", "2109311836", None),
        ("A5023888391", "openalex", "A5023888391", None),
        ("https://openalex.org/a5023888391", "openalex", "A5023888391", None),
        ("0000-0002-1825-0097", "orcid", "0000-0002-1825-0097", None),
        ("https://orcid.org/0000-0002-1825-009x", "orcid", "0000-0002-1825-009X", None),
    ],
)
def test_researcher_ids(given: str, kind: str, value: str, db_id: int | None) -> None:
    key = parse_researcher_id(given)
    assert (key.kind, key.value, key.db_id) == (kind, value, db_id)


@pytest.mark.parametrize("given", ["", "0", "99999999999999999999", "Wumo Yan", "I123", "s2:abc", "1396945-"])
def test_malformed_researcher_ids(given: str) -> None:
    with pytest.raises(BadUserInput):
        parse_researcher_id(given)


@pytest.mark.parametrize(
    ("given", "kind", "value"),
    [
        ("42", "id", "42"),
        ("42-universite-de-montreal", "slug", "42-universite-de-montreal"),
        ("0161xgx34", "ror", "0161xgx34"),
        ("https://ror.org/0161XGX34", "ror", "0161xgx34"),
        ("Université   de Montréal", "name", "Université de Montréal"),
        ("0161xgx35", "name", "0161xgx35"),  # a ROR-shaped string with a bad checksum is only a name
        ("I70931966", "openalex", "I70931966"),
        ("https://openalex.org/i70931966", "openalex", "I70931966"),
    ],
)
def test_institution_ids(given: str, kind: str, value: str) -> None:
    key = parse_institution_id(given)
    assert (key.kind, key.value) == (kind, value)


@pytest.mark.parametrize("given", ["", "  ", "0", "x" * 301])
def test_malformed_institution_ids(given: str) -> None:
    with pytest.raises(BadUserInput):
        parse_institution_id(given)
