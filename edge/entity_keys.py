"""One spelling per entity reference, for cache keys: `2401.01234v2`, `arXiv:2401.01234` and
`2401.01234-any-title-words` all name the paper `2401.01234`; `42` and `42-any-slug` the researcher 42.

Pure and forgiving: a reference none of these forms fits gives None (GraphQL will answer it with
BAD_USER_INPUT, which is never cached).
"""

from __future__ import annotations

import re

from db.ids import normalize_openalex, normalize_orcid, normalize_ror, parse_arxiv_id

_NEW_SLUG = re.compile(r"^(\d{4}\.\d{4,5})(?:v\d+)?-[a-z0-9-]*$", re.IGNORECASE)
_OLD_SLUG = re.compile(r"^([a-z][a-z-]*?(?:\.[a-z]{2})?)-(\d{7})(?:v\d+)?(?:-[a-z0-9-]*)?$", re.IGNORECASE)
_DB_ID = re.compile(r"^(\d{1,19})(?:-[a-z0-9-]*)?$", re.IGNORECASE)
_S2 = re.compile(r"^s2:(\d{1,20})$", re.IGNORECASE)
MAX_LENGTH = 300


def paper_key(text: str) -> str | None:
    """The arXiv id a paper reference names (the version and the slug's title words dropped)."""
    s = text.strip()
    if not s or len(s) > MAX_LENGTH:
        return None
    parsed = parse_arxiv_id(s) or parse_arxiv_id(s.lower())
    if parsed:
        return parsed[0]
    if m := _NEW_SLUG.match(s):
        return m.group(1)
    if m := _OLD_SLUG.match(s):
        old = parse_arxiv_id(f"{m.group(1).lower()}/{m.group(2)}")
        return old[0] if old else None
    return None


def database_id(text: str) -> int | None:
    """The database id a numeric id or a slug names."""
    m = _DB_ID.match(text.strip())
    if m is None:
        return None
    value = int(m.group(1))
    return value if 0 < value < 2**63 else None


def entity_key(kind: str, text: str) -> str | None:
    """`paper:<arxiv id>`, `researcher:<db id>`, `researcher:s2:<id>`, `institution:ror:<ror>` ..."""
    if kind == "paper":
        found = paper_key(text)
        return f"paper:{found}" if found else None
    s = text.strip()
    if not s or len(s) > MAX_LENGTH:
        return None
    if (db_id := database_id(s)) is not None:
        return f"{kind}:{db_id}"
    if kind == "researcher":
        if m := _S2.match(s):
            return f"researcher:s2:{m.group(1)}"
        if (openalex := normalize_openalex(s)) and openalex.startswith("A"):
            return f"researcher:openalex:{openalex}"
        if orcid := normalize_orcid(s):
            return f"researcher:orcid:{orcid}"
        return None
    if kind == "institution":
        if ror := normalize_ror(s):
            return f"institution:ror:{ror}"
        if not s.isdigit():
            return f"institution:name:{' '.join(s.casefold().split())}"
    return None
