"""OpenAlex payloads -> rows.

OpenAlex has no arXiv id field: a work is an arXiv paper by its DOI `10.48550/arxiv.<id>`, an
arxiv.org landing page or pdf URL, or a location id `pmh:oai:arXiv.org:<id>`. The same paper can
also be a separate journal work; the preprint always wins.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from db.ids import normalize_arxiv_id, normalize_openalex, normalize_orcid, normalize_ror
from db.records import InstitutionRecord, ResearcherRecord
from ingest.errors import MalformedResponse
from ingest.parsers.values import count, text

WORK_SELECT = "id,doi,type,cited_by_count,authorships,locations,primary_location"
AUTHOR_SELECT = "id,orcid,display_name,works_count,cited_by_count,summary_stats"
ARXIV_SOURCE = "S4306400194"


@dataclass(frozen=True, slots=True)
class OAAuthorship:
    name: str  # the author's name as OpenAlex displays it (its profile's), else as printed
    author_id: str | None  # A5023888391
    orcid: str | None
    institutions: list[InstitutionRecord] = field(default_factory=list)
    raw_name: str | None = None  # as printed on the work (`raw_author_name`)


@dataclass(frozen=True, slots=True)
class OAWork:
    openalex_id: str
    doi: str | None
    cited_by_count: int | None
    is_preprint: bool
    arxiv_id: str | None
    authorships: list[OAAuthorship]


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def arxiv_doi(arxiv_id: str) -> str:
    return f"10.48550/arxiv.{arxiv_id}".lower()


def _bare_doi(value: Any) -> str | None:
    s = (text(value) or "").lower()
    for prefix in ("https://doi.org/", "http://doi.org/", "doi:"):
        s = s.removeprefix(prefix)
    return s or None


def _locations(work: Mapping[str, Any]) -> Iterable[Mapping[str, Any]]:
    for loc in [work.get("primary_location"), *(work.get("locations") or [])]:
        if isinstance(loc, dict):
            yield loc


def work_arxiv_id(work: Mapping[str, Any]) -> str | None:
    """The arXiv id a work carries, from its DOI, arXiv locations or location ids."""
    doi = _bare_doi(work.get("doi")) or _bare_doi((work.get("ids") or {}).get("doi"))
    if doi and doi.startswith("10.48550/arxiv."):
        return normalize_arxiv_id(doi)
    for loc in _locations(work):
        for key in ("landing_page_url", "pdf_url"):
            url = loc.get(key)
            if isinstance(url, str) and "arxiv.org/" in url and (found := normalize_arxiv_id(url)):
                return found
        loc_id = loc.get("id")
        if isinstance(loc_id, str) and loc_id.lower().startswith("pmh:oai:arxiv.org:"):
            if found := normalize_arxiv_id(loc_id.removeprefix("pmh:")):
                return found
    return None


def _is_preprint(work: Mapping[str, Any], doi: str | None) -> bool:
    if doi and doi.startswith("10.48550/arxiv."):
        return True
    primary = work.get("primary_location")
    source = primary.get("source") if isinstance(primary, dict) else None
    if isinstance(source, dict) and isinstance(source.get("id"), str) and source["id"].endswith(ARXIV_SOURCE):
        return True
    return work.get("type") == "preprint" and work_arxiv_id(work) is not None


INSTITUTION_SELECT = "id,ror,display_name,display_name_acronyms,display_name_alternatives,country_code,type"


def institution_from(item: Any) -> InstitutionRecord | None:
    """An OpenAlex institution dict with a valid ROR -> row. `type` is kept as given (even `funder`). An
    `/institutions` answer also carries ROR's acronyms and other names (`MIT`): they become its aliases."""
    if not isinstance(item, dict) or not isinstance(item.get("ror"), str):
        return None
    ror = normalize_ror(item["ror"])
    if not ror:
        return None
    country = text(item.get("country_code"))
    oa_id = item.get("id")
    name = text(item.get("display_name")) or ror
    aliases: list[str] = []
    for key in ("display_name_acronyms", "display_name_alternatives"):
        values = item.get(key)
        for value in values if isinstance(values, list) else []:
            if (alias := text(value)) and alias != name and alias not in aliases:
                aliases.append(alias)
    return InstitutionRecord(
        ror_id=ror,
        name=name,
        aliases=aliases,
        country=country.upper() if country and len(country) == 2 else None,
        type=text(item.get("type")),
        openalex_id=normalize_openalex(oa_id) if isinstance(oa_id, str) else None,
    )


def parse_work(work: Any) -> OAWork | None:
    if not isinstance(work, dict) or not isinstance(work.get("id"), str):
        return None
    oa_id = normalize_openalex(work["id"])
    if not oa_id:
        return None
    doi = _bare_doi(work.get("doi"))
    authorships: list[OAAuthorship] = []
    for a in work.get("authorships") or []:
        if not isinstance(a, dict):
            continue
        author = _dict(a.get("author"))
        name = text(author.get("display_name")) or text(a.get("raw_author_name")) or ""
        aid = author.get("id")
        orcid = author.get("orcid")
        insts = [i for i in (institution_from(x) for x in a.get("institutions") or []) if i]
        authorships.append(
            OAAuthorship(
                name=name,
                author_id=normalize_openalex(aid) if isinstance(aid, str) else None,
                orcid=normalize_orcid(orcid) if isinstance(orcid, str) else None,
                institutions=insts,
                raw_name=text(a.get("raw_author_name")),
            )
        )
    return OAWork(
        openalex_id=oa_id,
        doi=doi,
        cited_by_count=count(work.get("cited_by_count")),
        is_preprint=_is_preprint(work, doi),
        arxiv_id=work_arxiv_id(work),
        authorships=authorships,
    )


def parse_results(payload: Any) -> list[Any]:
    if not isinstance(payload, dict) or not isinstance(payload.get("results"), list):
        raise MalformedResponse("openalex", "expected a list response with results[]")
    return list(payload["results"])


def match_works(wanted: Mapping[str, str | None], works: Iterable[OAWork]) -> dict[str, list[OAWork]]:
    """Group works by the arXiv paper they are: {arxiv_id: journal doi or None} -> {arxiv_id: works}.

    A work matches by the arXiv id it carries, else by the paper's journal DOI. Each list starts
    with the work that speaks for the paper: the preprint, whichever order OpenAlex sent them in;
    journal duplicates follow and may only fill gaps (institutions), never replace it.
    """
    by_journal_doi = {doi.lower(): aid for aid, doi in wanted.items() if doi}
    grouped: dict[str, list[OAWork]] = {}
    for w in works:
        aid = w.arxiv_id if w.arxiv_id in wanted else None
        if aid is None and w.doi:
            aid = by_journal_doi.get(w.doi)
        if aid is None:
            continue
        group = grouped.setdefault(aid, [])
        if all(g.openalex_id != w.openalex_id for g in group):
            group.append(w)
    for group in grouped.values():
        group.sort(key=lambda w: not w.is_preprint)  # stable: OpenAlex's order otherwise
    return grouped


def researcher_from_author(item: Any) -> ResearcherRecord | None:
    """An OpenAlex author -> its figures (attached to the S2 researcher by the caller)."""
    if not isinstance(item, dict) or not isinstance(item.get("id"), str):
        return None
    oa_id = normalize_openalex(item["id"])
    if not oa_id:
        return None
    stats = _dict(item.get("summary_stats"))
    orcid = item.get("orcid")
    return ResearcherRecord(
        name=text(item.get("display_name")) or oa_id,
        openalex_id=oa_id,
        orcid=normalize_orcid(orcid) if isinstance(orcid, str) else None,
        openalex_works_count=count(item.get("works_count")),
        openalex_cited_by_count=count(item.get("cited_by_count")),
        openalex_h_index=count(stats.get("h_index")),
        openalex_i10_index=count(stats.get("i10_index")),
    )
