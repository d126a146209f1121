"""An enrichment batch and how its links are decided: what Semantic Scholar and OpenAlex answered for its papers
turned into matches, unlinked positions and citations, without I/O (ingest/pipeline.py asks and writes)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime

from db.queries.ingest_state import QueuedPaper
from db.records import (
    AuthorshipMatch,
    CitationRecord,
    InstitutionRecord,
    ResearcherRecord,
    UnlinkedAuthor,
    WorkRecord,
)
from ingest.matching.evidence import Claims
from ingest.matching.links import Evidence, Link, decide_paper
from ingest.parsers.openalex import OAWork
from ingest.parsers.s2 import S2Paper


@dataclass(slots=True)
class EnrichBatch:
    arxiv_ids: list[str]
    # Papers neither source knows yet stay queued (the sources index new papers days later) until
    # they are older than this; then they leave the queue unmatched.
    give_up_before: datetime
    done: list[str] = field(default_factory=list)
    researchers: dict[str, ResearcherRecord] = field(default_factory=dict)  # by S2 author id
    institutions: dict[str, InstitutionRecord] = field(default_factory=dict)  # by ROR id
    matches: list[AuthorshipMatch] = field(default_factory=list)
    works: dict[str, list[WorkRecord]] = field(default_factory=dict)  # by S2 author id
    citations: list[CitationRecord] = field(default_factory=list)
    # S2 author ids that S2 answers with another (it merged them): {old id: surviving id}; and those it answers as
    # themselves (no redirect may stand for them).
    s2_merged: dict[str, str] = field(default_factory=dict)
    s2_live: list[str] = field(default_factory=list)
    unlinked: list[UnlinkedAuthor] = field(default_factory=list)  # positions left unlinked, with why
    new_researchers: set[str] = field(default_factory=set)  # S2 author ids the archive does not hold yet
    unmatched: set[str] = field(default_factory=set)  # papers neither source could match
    failed: dict[str, str] = field(default_factory=dict)  # papers set aside, with the reason

    def only(self, arxiv_ids: set[str]) -> EnrichBatch:
        """The part of the batch that writes these papers: their matches and citations, and the researchers
        (with their works) and institutions those matches name. The S2 merges go with every part (a merge
        applied twice finds nothing left to merge)."""
        matches = [m for m in self.matches if m.arxiv_id in arxiv_ids]
        people = {m.researcher_key for m in matches}
        rors = {r for m in matches for r in m.institution_rors}
        return EnrichBatch(
            [a for a in self.arxiv_ids if a in arxiv_ids],
            self.give_up_before,
            done=[a for a in self.done if a in arxiv_ids],
            researchers={k: v for k, v in self.researchers.items() if k in people},
            institutions={k: v for k, v in self.institutions.items() if k in rors},
            matches=matches,
            works={k: v for k, v in self.works.items() if k in people},
            citations=[c for c in self.citations if c.arxiv_id in arxiv_ids],
            s2_merged=self.s2_merged,
            s2_live=self.s2_live,
            unlinked=[u for u in self.unlinked if u.arxiv_id in arxiv_ids],
            new_researchers=self.new_researchers & people,
            unmatched=self.unmatched & arxiv_ids,
        )


def canonical(paper: S2Paper, merged: Mapping[str, str]) -> S2Paper:
    """The paper's authors under the ids S2 uses now (it answers an id it merged with the survivor's record)."""
    if not any(a.author_id in merged for a in paper.authors):
        return paper
    authors = [replace(a, author_id=merged.get(a.author_id, a.author_id)) if a.author_id else a for a in paper.authors]
    return replace(paper, authors=authors)


def _decide(
    batch: EnrichBatch,
    queue: Sequence[QueuedPaper],
    s2papers: Mapping[str, S2Paper],
    oa_works: Mapping[str, list[OAWork]],
    ev: Evidence,
    only: set[str] | None = None,
) -> dict[str, list[Link]]:
    """Every paper's links (`ingest.matching.links` decides); a paper whose data makes that fail is set aside."""
    decided: dict[str, list[Link]] = {}
    for q in queue:
        if only is not None and q.arxiv_id not in only:
            continue
        s2 = s2papers.get(q.arxiv_id)
        works = oa_works.get(q.arxiv_id, [])
        if s2 is None and not works:
            continue
        try:
            decided[q.arxiv_id] = decide_paper(q.authors, s2, works, ev)
        except Exception as exc:  # pure code over one paper's data: whatever it raises is that paper's
            batch.failed[q.arxiv_id] = failure_reason(exc)
    return decided


def _settled(links: Sequence[Link]) -> bool:
    """Decided on the paper's own data: nothing the rest of the batch could change."""
    return all(link.status == "linked" and link.s2_id is not None for link in links if link.status != "no_match")


def plan_batch(
    batch: EnrichBatch,
    queue: Sequence[QueuedPaper],
    s2papers: Mapping[str, S2Paper],
    oa_works: Mapping[str, list[OAWork]],
    evidence: Callable[[Claims], Evidence],
) -> dict[str, list[Link]]:
    """The links of every paper, in two passes: the second decides again the papers whose ties or OpenAlex-only
    positions the first pass's confident links (elsewhere in the batch) may settle."""
    first = _decide(batch, queue, s2papers, oa_works, evidence(Claims()))
    claims = Claims()
    for links in first.values():
        claims.add(x for x in links if x.status == "linked" and x.s2_id and "+" not in (x.evidence or ""))
    again = {a for a, links in first.items() if not _settled(links)}
    if not again:
        return first
    return first | _decide(batch, queue, s2papers, oa_works, evidence(claims), only=again)


def record(batch: EnrichBatch, q: QueuedPaper, s2: S2Paper | None, works: list[OAWork], links: list[Link]) -> None:
    """A paper's verdicts into the batch: matches with their institutions, unlinked positions, citations."""
    for link in links:
        for i in _institutions(link, works):
            batch.institutions.setdefault(i.ror_id, i)
        if link.key or link.rors:
            evidence = link.evidence if link.key else None
            batch.matches.append(AuthorshipMatch(q.arxiv_id, link.position, link.key, list(link.rors), evidence))
        if link.key is None:
            batch.unlinked.append(UnlinkedAuthor(q.arxiv_id, link.position, link.status, link.candidates))
    oaw = works[0] if works else None
    preprint_id = oaw.openalex_id if oaw is not None and oaw.is_preprint else None
    if s2 is not None and s2.citation_count is not None:
        batch.citations.append(
            CitationRecord(q.arxiv_id, s2.citation_count, "s2", s2.paper_id, preprint_id, s2.corpus_id)
        )
    elif oaw is not None and oaw.cited_by_count is not None:
        batch.citations.append(
            CitationRecord(
                q.arxiv_id,
                oaw.cited_by_count,
                "openalex",
                s2.paper_id if s2 else None,
                preprint_id,
                s2.corpus_id if s2 else None,
            )
        )


def _institutions(link: Link, works: list[OAWork]) -> list[InstitutionRecord]:
    """The institution records of a link's RORs, from the OpenAlex works that named them."""
    wanted = set(link.rors)
    found: dict[str, InstitutionRecord] = {}
    for w in works:
        for a in w.authorships:
            for i in a.institutions:
                if i.ror_id in wanted:
                    found.setdefault(i.ror_id, i)
    return list(found.values())


def failure_reason(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}".replace("\x00", "")[:500]
