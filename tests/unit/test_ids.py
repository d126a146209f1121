from __future__ import annotations

import pytest

from db.ids import (
    normalize_arxiv_id,
    normalize_openalex,
    normalize_orcid,
    normalize_ror,
    parse_arxiv_id,
    ror_checksum,
)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2401.01234", ("2401.01234", None)),
        ("2401.01234v2", ("2401.01234", 2)),
        ("arXiv:2401.01234v12", ("2401.01234", 12)),
        ("ARXIV:2401.01234", ("2401.01234", None)),
        ("0704.0001", ("0704.0001", None)),
        ("1911.04650", ("1911.04650", None)),
        ("https://arxiv.org/abs/2401.01234v3", ("2401.01234", 3)),
        ("http://export.arxiv.org/abs/2401.01234", ("2401.01234", None)),
        ("https://arxiv.org/pdf/2401.01234v1.pdf", ("2401.01234", 1)),
        ("https://arxiv.org/pdf/2401.01234", ("2401.01234", None)),
        ("10.48550/arXiv.2401.01234", ("2401.01234", None)),
        ("https://doi.org/10.48550/arXiv.2401.01234", ("2401.01234", None)),
        ("oai:arXiv.org:2401.01234", ("2401.01234", None)),
        ("  2401.01234v2\n", ("2401.01234", 2)),
    ],
)
def test_new_style_ids_in_every_form(text: str, expected: tuple[str, int | None]) -> None:
    assert parse_arxiv_id(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("astro-ph/9901001", ("astro-ph/9901001", None)),
        ("hep-th/9711200v3", ("hep-th/9711200", 3)),
        ("cond-mat/0001001", ("cond-mat/0001001", None)),
        ("arXiv:hep-th/9711200v1", ("hep-th/9711200", 1)),
        ("https://arxiv.org/abs/hep-th/9901001v3", ("hep-th/9901001", 3)),
        ("oai:arXiv.org:math/0309136", ("math/0309136", None)),
        # The subject class after the dot is upper case, whatever case it came in.
        ("math.GT/0309136", ("math.GT/0309136", None)),
        ("math.gt/0309136", ("math.GT/0309136", None)),
    ],
)
def test_old_style_ids_keep_their_slash(text: str, expected: tuple[str, int | None]) -> None:
    assert parse_arxiv_id(text) == expected


@pytest.mark.parametrize(
    "text",
    ["", "foo", "2401.123", "2401.123456", "24010.1234", "astro-ph/990100", "astro-ph9901001", "doi:10.1000/xyz", "v2"],
)
def test_non_arxiv_text_is_not_an_id(text: str) -> None:
    assert parse_arxiv_id(text) is None
    assert normalize_arxiv_id(text) is None


def test_normalize_drops_the_version() -> None:
    assert normalize_arxiv_id("arXiv:2401.01234v7") == "2401.01234"
    assert normalize_arxiv_id("hep-th/9711200v2") == "hep-th/9711200"


# Real ROR ids (their checksums were computed by ROR, not by this code).
REAL_RORS = ["05gq02987", "03yrm5c26", "02mhbdp94", "00f54p054", "042nb2s44", "01an7q238"]


@pytest.mark.parametrize("ror", REAL_RORS)
def test_ror_checksum_matches_real_ids(ror: str) -> None:
    assert ror_checksum(ror[:7]) == ror[7:]
    assert normalize_ror(ror) == ror
    assert normalize_ror(f"https://ror.org/{ror}") == ror
    assert normalize_ror(f"  https://ror.org/{ror.upper()} ") == ror


@pytest.mark.parametrize("ror", REAL_RORS)
def test_ror_with_a_wrong_check_digit_is_rejected(ror: str) -> None:
    last = int(ror[-1])
    assert normalize_ror(ror[:-1] + str((last + 1) % 10)) is None


@pytest.mark.parametrize(
    "text",
    ["", "5gq02987", "15gq02987", "05gq0298", "05gq029870", "05iq02987", "05lq02987", "05uq02987", "https://ror.org/"],
)
def test_malformed_ror_is_rejected(text: str) -> None:
    # ROR ids start with 0 and use Crockford base32, which has no i, l, o or u.
    assert normalize_ror(text) is None


def test_orcid_forms() -> None:
    assert normalize_orcid("0000-0002-1825-0097") == "0000-0002-1825-0097"
    assert normalize_orcid("https://orcid.org/0000-0002-1694-233x") == "0000-0002-1694-233X"
    assert normalize_orcid("0000-0002-1825-009") is None
    assert normalize_orcid("0000000218250097") is None


def test_openalex_forms() -> None:
    assert normalize_openalex("https://openalex.org/A5023888391") == "A5023888391"
    assert normalize_openalex("i136199984") == "I136199984"
    assert normalize_openalex("W2741809807") == "W2741809807"
    assert normalize_openalex("X123") is None
    assert normalize_openalex("A") is None
