"""Parsing the id forms callers may give for a paper, a researcher or an institution.

Parsing is pure; a malformed id raises BadUserInput naming the accepted forms, a well-formed one
becomes a key the resolvers look up (and that may name nothing, which is not an error).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from db.ids import normalize_openalex, normalize_orcid, normalize_ror, parse_arxiv_id
from db.paging import TokenError, decode_global_id
from resolvers.errors import BadUserInput

MAX_ID_LENGTH = 300
MAX_DB_ID = 2**63 - 1

PAPER_ID_FORMS = (
    "an arXiv id (2401.01234, 2401.01234v2, arXiv:2401.01234, astro-ph/9901001, astro-ph/9901001v3), "
    "an arXiv abs or pdf URL (https://arxiv.org/abs/2401.01234), the arXiv DOI (10.48550/arXiv.2401.01234), "
    "the journal DOI (10.1038/s42256-024-00832-8 or https://doi.org/...), a Semantic Scholar paper id "
    "(s2:<40 hex digits> or CorpusId:258059792), an OpenAlex work id (W4365597205 or "
    "https://openalex.org/W4365597205), the paper's slug (2401.01234-title-words) or its global `id`"
)
RESEARCHER_ID_FORMS = (
    "a numeric id (1396945), a slug (1396945-wumo-yan), a Semantic Scholar id (s2:2109311836), "
    "an OpenAlex id (A5023888391 or https://openalex.org/A5023888391) "
    "an ORCID (0000-0002-1825-0097 or https://orcid.org/0000-0002-1825-0097) or its global `id`"
)
INSTITUTION_ID_FORMS = (
    "a numeric id (42), a slug (42-universite-de-montreal), a ROR id (0161xgx34 or https://ror.org/0161xgx34), "
    "an OpenAlex institution id (I70931966 or https://openalex.org/I70931966), its global `id` "
    "or a name, alias or acronym (Université de Montréal, UdeM)"
)

_NEW_SLUG = re.compile(r"^(\d{4}\.\d{4,5})(?:v\d+)?(?:-[a-z0-9]+(?:-[a-z0-9]+)*)?$", re.IGNORECASE)
_OLD_SLUG = re.compile(
    r"^([a-z][a-z-]*?(?:\.[a-z]{2})?)-(\d{7})(?:v\d+)?(?:-[a-z0-9]+(?:-[a-z0-9]+)*)?$", re.IGNORECASE
)
_NUMERIC = re.compile(r"^(\d{1,19})$")
_ENTITY_SLUG = re.compile(r"^(\d{1,19})-[a-z0-9]+(?:-[a-z0-9]+)*$", re.IGNORECASE)
_S2 = re.compile(r"^s2:(\d{1,20})$", re.IGNORECASE)
_S2_PAPER = re.compile(r"^s2:([0-9a-f]{40})$", re.IGNORECASE)
_CORPUS = re.compile(r"^corpusid:(\d{1,18})$", re.IGNORECASE)
_DOI = re.compile(r"^(?:(?:https?://(?:dx\.)?doi\.org/)|doi:)?(10\.\d{4,9}/\S+)$", re.IGNORECASE)


PaperKeyKind = Literal["arxiv", "slug", "doi", "s2", "corpus", "openalex", "id"]


@dataclass(frozen=True, slots=True)
class PaperKey:
    """`arxiv`: the arXiv id (version dropped) in `value`. `slug`: a slug in `slug`, with the arXiv id its prefix
    names in `value`. `doi` (lower case), `s2` (paper id), `corpus` (S2 corpus id), `openalex` (W...): that id.
    `id`: the database id of a global id issued before global ids named arXiv ids."""

    kind: PaperKeyKind
    value: str
    slug: str | None = None
    version: int | None = None


@dataclass(frozen=True, slots=True)
class EntityKey:
    kind: Literal["id", "slug", "s2", "openalex", "orcid", "ror", "name"]
    # For `openalex`: an author (A...) for researchers, an institution (I...) for institutions.
    value: str
    db_id: int | None = None


_GLOBAL_ID = re.compile(r"^[A-Za-z0-9_-]{8,}$")


def _global_id(text: str, type_name: str) -> int | str | None:
    """The key of a global id of this type (the `id` this API returns), else None."""
    if not _GLOBAL_ID.match(text):
        return None
    try:
        found_type, key = decode_global_id(text)
    except TokenError:
        return None
    return key if found_type == type_name else None


def _db_id(text: str) -> int | None:
    value = int(text)
    return value if 0 < value <= MAX_DB_ID else None


def parse_paper_id(text: str) -> PaperKey:
    s = text.strip()
    if s and len(s) <= MAX_ID_LENGTH:
        parsed = parse_arxiv_id(s) or parse_arxiv_id(s.lower())
        if parsed:
            return PaperKey("arxiv", parsed[0], version=parsed[1])
        if m := _NEW_SLUG.match(s):
            return PaperKey("slug", m.group(1), slug=s.lower())
        if (m := _OLD_SLUG.match(s)) and (old := parse_arxiv_id(f"{m.group(1).lower()}/{m.group(2)}")):
            return PaperKey("slug", old[0], slug=s)
        if m := _S2_PAPER.match(s):
            return PaperKey("s2", m.group(1).lower())
        if m := _CORPUS.match(s):
            return PaperKey("corpus", m.group(1))
        if (openalex := normalize_openalex(s)) and openalex.startswith("W"):
            return PaperKey("openalex", openalex)
        if m := _DOI.match(s):
            return PaperKey("doi", m.group(1).lower())
        if (key := _global_id(s, "Paper")) is not None:
            return PaperKey("arxiv", key) if isinstance(key, str) else PaperKey("id", str(key))
    raise BadUserInput(f"Malformed paper id {text[:80]!r}: use {PAPER_ID_FORMS}.")


def parse_researcher_id(text: str) -> EntityKey:
    s = text.strip()
    if s and len(s) <= MAX_ID_LENGTH:
        if (m := _NUMERIC.match(s)) and (db_id := _db_id(m.group(1))):
            return EntityKey("id", s, db_id)
        if (m := _ENTITY_SLUG.match(s)) and (db_id := _db_id(m.group(1))):
            return EntityKey("slug", s.lower(), db_id)
        if m := _S2.match(s):
            return EntityKey("s2", m.group(1))
        if (openalex := normalize_openalex(s)) and openalex.startswith("A"):
            return EntityKey("openalex", openalex)
        if orcid := normalize_orcid(s):
            return EntityKey("orcid", orcid)
        if isinstance(key := _global_id(s, "Researcher"), int) and (db_id := _db_id(str(key))):
            return EntityKey("id", str(db_id), db_id)
    raise BadUserInput(f"Malformed researcher id {text[:80]!r}: use {RESEARCHER_ID_FORMS}.")


def parse_institution_id(text: str) -> EntityKey:
    s = text.strip()
    if s and len(s) <= MAX_ID_LENGTH:
        if (m := _NUMERIC.match(s)) and (db_id := _db_id(m.group(1))):
            return EntityKey("id", s, db_id)
        if (m := _ENTITY_SLUG.match(s)) and (db_id := _db_id(m.group(1))):
            return EntityKey("slug", s.lower(), db_id)
        if ror := normalize_ror(s):
            return EntityKey("ror", ror)
        if (openalex := normalize_openalex(s)) and openalex.startswith("I"):
            return EntityKey("openalex", openalex)
        if isinstance(key := _global_id(s, "Institution"), int) and (db_id := _db_id(str(key))):
            return EntityKey("id", str(db_id), db_id)
        if not s.isdigit():
            return EntityKey("name", " ".join(s.split()))
    raise BadUserInput(f"Malformed institution id {text[:80]!r}: use {INSTITUTION_ID_FORMS}.")
