"""Semantic Scholar Graph API payloads -> rows. Unknown fields are ignored; missing ones are None."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from db.ids import normalize_arxiv_id, normalize_orcid
from db.records import ResearcherRecord, WorkRecord
from ingest.errors import MalformedResponse
from ingest.parsers.values import count, text

PAPER_FIELDS = "externalIds,citationCount,authors"
AUTHOR_FIELDS = "name,externalIds,paperCount,citationCount,hIndex"
WORK_FIELDS = "externalIds,title,year,citationCount"


@dataclass(frozen=True, slots=True)
class S2Author:
    author_id: str | None  # S2 sends null for authors it has not disambiguated
    name: str


@dataclass(frozen=True, slots=True)
class S2Paper:
    paper_id: str
    citation_count: int | None
    authors: list[S2Author]
    corpus_id: int | None = None


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def parse_paper_batch(arxiv_ids: Sequence[str], payload: Any) -> dict[str, S2Paper]:
    """POST /paper/batch answer (an array in request order, null for unknown ids) -> {arxiv_id: paper}."""
    if not isinstance(payload, list) or len(payload) != len(arxiv_ids):
        raise MalformedResponse("s2", f"paper batch: expected a list of {len(arxiv_ids)} entries")
    out: dict[str, S2Paper] = {}
    for asked, item in zip(arxiv_ids, payload, strict=True):
        if not isinstance(item, dict) or (paper_id := text(item.get("paperId"))) is None:
            continue
        ext = _dict(item.get("externalIds"))
        # Trust the answer's own arXiv id over the request order when it is there.
        arxiv_id = normalize_arxiv_id(str(ext.get("ArXiv"))) if ext.get("ArXiv") else asked
        if arxiv_id != asked:
            continue
        authors = [
            S2Author(text(a.get("authorId")), text(a.get("name")) or "")
            for a in item.get("authors") or []
            if isinstance(a, dict)
        ]
        out[asked] = S2Paper(paper_id, count(item.get("citationCount")), authors, count(ext.get("CorpusId")))
    return out


def researcher_from_author(item: Any) -> ResearcherRecord | None:
    """One POST /author/batch entry -> the S2 side of a researcher."""
    if not isinstance(item, dict) or (author_id := text(item.get("authorId"))) is None:
        return None
    ext = _dict(item.get("externalIds"))
    orcid = ext.get("ORCID")
    return ResearcherRecord(
        name=text(item.get("name")) or author_id,
        s2_author_id=author_id,
        orcid=normalize_orcid(orcid) if isinstance(orcid, str) else None,
        s2_paper_count=count(item.get("paperCount")),
        s2_citation_count=count(item.get("citationCount")),
        s2_h_index=count(item.get("hIndex")),
    )


def parse_author_papers_page(payload: Any) -> tuple[list[WorkRecord], int | None]:
    """GET /author/{id}/papers page -> (works, next offset or None on the last page)."""
    if not isinstance(payload, dict) or not isinstance(payload.get("data"), list):
        raise MalformedResponse("s2", "author papers: expected {data: [...]}")
    works: list[WorkRecord] = []
    for p in payload["data"]:
        if not isinstance(p, dict) or (paper_id := text(p.get("paperId"))) is None:
            continue
        ext = _dict(p.get("externalIds"))
        arxiv = ext.get("ArXiv")
        doi = text(ext.get("DOI"))
        works.append(
            WorkRecord(
                source="s2",
                external_id=paper_id,
                title=text(p.get("title")),
                year=count(p.get("year")),
                citation_count=count(p.get("citationCount")),
                arxiv_id=normalize_arxiv_id(arxiv) if isinstance(arxiv, str) else None,
                doi=doi.lower() if doi else None,
            )
        )
    nxt = payload.get("next")
    return works, nxt if isinstance(nxt, int) else None
