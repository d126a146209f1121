"""Normalizing external identifiers: arXiv ids, ROR ids, ORCIDs, OpenAlex ids."""

from __future__ import annotations

import re

NEW_STYLE = re.compile(r"^(\d{4}\.\d{4,5})(?:v(\d+))?$")
OLD_STYLE = re.compile(r"^([a-z][a-z\-]*(?:\.[A-Za-z]{2})?)/(\d{7})(?:v(\d+))?$")
_PREFIXES = re.compile(
    r"^(?:oai:arxiv\.org:|https?://(?:www\.|export\.)?arxiv\.org/(?:abs|pdf)/|arxiv:|(?:https?://doi\.org/)?10\.48550/arxiv\.)",
    re.IGNORECASE,
)
ROR = re.compile(r"^(?:https?://ror\.org/)?(0[0-9a-hjkmnp-tv-z]{6}[0-9]{2})$", re.IGNORECASE)
ORCID = re.compile(r"^(?:https?://orcid\.org/)?(\d{4}-\d{4}-\d{4}-\d{3}[\dX])$", re.IGNORECASE)
OPENALEX = re.compile(r"^(?:https?://openalex\.org/)?([AIWS]\d+)$", re.IGNORECASE)
_CROCKFORD = "0123456789abcdefghjkmnpqrstvwxyz"


def parse_arxiv_id(text: str) -> tuple[str, int | None] | None:
    """`arXiv:2401.01234v2`, abs/pdf URLs, the arXiv DOI -> (`2401.01234`, 2). None when not an arXiv id."""
    s = _PREFIXES.sub("", text.strip())
    s = s.removesuffix(".pdf")
    if m := NEW_STYLE.match(s):
        return m.group(1), int(m.group(2)) if m.group(2) else None
    if m := OLD_STYLE.match(s):
        archive = m.group(1)
        # Archive names are lower case; a subject class after the dot is upper case (math.GT/0309136).
        if "." in archive:
            head, sub = archive.split(".", 1)
            archive = f"{head.lower()}.{sub.upper()}"
        return f"{archive}/{m.group(2)}", int(m.group(3)) if m.group(3) else None
    return None


def normalize_arxiv_id(text: str) -> str | None:
    parsed = parse_arxiv_id(text)
    return parsed[0] if parsed else None


def arxiv_doi(arxiv_id: str) -> str:
    """The DOI arXiv registers for every paper: 10.48550/arXiv.2401.01234."""
    return f"10.48550/arXiv.{arxiv_id}"


def arxiv_abs_url(arxiv_id: str) -> str:
    return f"https://arxiv.org/abs/{arxiv_id}"


def arxiv_pdf_url(arxiv_id: str) -> str:
    return f"https://arxiv.org/pdf/{arxiv_id}"


def ror_checksum(body: str) -> str:
    """ISO 7064 Mod 97-10 over the Crockford base32 value of the 7 leading characters."""
    value = 0
    for ch in body:
        value = value * 32 + _CROCKFORD.index(ch)
    return f"{98 - (value * 100) % 97:02d}"


def normalize_ror(text: str) -> str | None:
    """`https://ror.org/05gq02987` or `05gq02987` -> `05gq02987`, when the checksum holds."""
    m = ROR.match(text.strip())
    if not m:
        return None
    ror = m.group(1).lower()
    return ror if ror_checksum(ror[:7]) == ror[7:] else None


def normalize_orcid(text: str) -> str | None:
    m = ORCID.match(text.strip())
    return m.group(1).upper() if m else None


def normalize_openalex(text: str) -> str | None:
    m = OPENALEX.match(text.strip())
    return m.group(1).upper() if m else None
