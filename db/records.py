"""Rows as the write path takes them: what the ingest and the demo generator produce.

The bulk write path (`db/queries/writes.py`) COPYs lists of these into staging tables and upserts
from there, so the ingest and `wovepaper demo` load through the same statements.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from types import MappingProxyType
from typing import Final

# The kinds of paper an analysis names (`papers.paper_type`, held to these by a CHECK); the API serves them as
# the enum PaperType, with these descriptions, and the analysis prompt offers them with the same words.
PAPER_TYPES: Final = MappingProxyType(
    {
        "THEORY": "Mainly theorems, proofs, derivations or formal models.",
        "METHOD": "A new method, algorithm, architecture or technique, with its evaluation.",
        "EMPIRICAL": "Measurements, experiments, observations or analyses of data that test or characterise something.",
        "SURVEY": "A review or tutorial that organises existing work.",
        "DATASET": "A new dataset, corpus or catalogue is the main contribution.",
        "BENCHMARK": "A benchmark, evaluation suite or systematic comparison of existing methods.",
        "SYSTEM": "A software system, tool, library or instrument: its design and implementation.",
        "POSITION": "An argument, perspective, vision or critique.",
        "OTHER": "None of the above (errata, lecture notes, proceedings front matter, ...).",
    }
)
# The scale of `papers.significance_score`: given to the model, and the API's description of `significanceScore`.
SIGNIFICANCE_SCALE = (
    "0.0-0.2: a minor or narrow result (a small variation, a note, a confirmation); "
    "0.2-0.4: a solid contribution of interest within its subfield; "
    "0.4-0.6: a notable advance that others in the field are likely to build on; "
    "0.6-0.8: a major contribution likely to influence neighbouring fields; "
    "0.8-1.0: exceptional, field-changing. Judged from the abstract alone; most papers fall between 0.2 and 0.6."
)


# The harvest builds a few of these per record, millions in a full run: not frozen, since a frozen
# dataclass's __init__ sets each field through object.__setattr__ (three times slower). Treat them as read-only.
@dataclass(slots=True)
class VersionRecord:
    version: int
    submitted_at: datetime
    size_kb: int | None = None
    source_type: str | None = None


@dataclass(slots=True)
class AuthorRecord:
    position: int  # 1-based
    name: str  # as arXiv gives it
    affiliation: str | None = None
    is_collaboration: bool = False


@dataclass(slots=True)
class PaperRecord:
    """One arXiv paper at its latest version, keyed by its normalized arXiv id."""

    arxiv_id: str
    version: int
    title: str
    abstract: str
    categories: list[str]  # primary first
    published: datetime  # v1 date
    updated: datetime  # latest version date
    authors: list[AuthorRecord]
    versions: list[VersionRecord] = field(default_factory=list)
    doi: str | None = None
    journal_ref: str | None = None
    comments: str | None = None
    license: str | None = None
    withdrawn: bool = False

    @property
    def primary_category(self) -> str:
        return self.categories[0]

    @property
    def authors_text(self) -> str:
        return ", ".join(a.name for a in self.authors)


@dataclass(frozen=True, slots=True)
class ResearcherRecord:
    """A researcher as a source knows them; keyed by s2_author_id, else openalex_id, else orcid."""

    name: str
    s2_author_id: str | None = None
    openalex_id: str | None = None
    orcid: str | None = None
    s2_paper_count: int | None = None
    s2_citation_count: int | None = None
    s2_h_index: int | None = None
    openalex_works_count: int | None = None
    openalex_cited_by_count: int | None = None
    openalex_h_index: int | None = None
    openalex_i10_index: int | None = None


@dataclass(frozen=True, slots=True)
class InstitutionRecord:
    ror_id: str  # bare: 05gq02987
    name: str
    aliases: list[str] = field(default_factory=list)
    country: str | None = None  # ISO 3166-1 alpha-2
    type: str | None = None
    openalex_id: str | None = None


@dataclass(frozen=True, slots=True)
class WorkRecord:
    """One work of a researcher's whole career, as a source lists it."""

    source: str  # 's2' | 'openalex'
    external_id: str
    title: str | None
    year: int | None
    citation_count: int | None
    arxiv_id: str | None = None
    doi: str | None = None


@dataclass(frozen=True, slots=True)
class AuthorshipMatch:
    """Enrichment's verdict for one authorship: which researcher and institutions it is. An author no source
    identifies (no researcher) still has the institutions OpenAlex gives for them."""

    arxiv_id: str
    position: int
    # The matched researcher's S2 author id, or OpenAlex author id when they are known by that alone; None: the
    # author stays unmatched.
    researcher_key: str | None
    institution_rors: list[str] = field(default_factory=list)
    evidence: str | None = None  # why the researcher is linked (authorships.link_evidence)


@dataclass(frozen=True, slots=True)
class UnlinkedAuthor:
    """An author position the enrichment left unlinked, and why (unlinked_authorships)."""

    arxiv_id: str
    position: int
    reason: str  # ambiguous, no_identity, no_match
    candidates: tuple[str, ...] = ()  # an ambiguous position's possible S2 ids


@dataclass(frozen=True, slots=True)
class CitationRecord:
    arxiv_id: str
    cited_by_count: int
    source: str  # 's2' | 'openalex'
    s2_paper_id: str | None = None
    openalex_id: str | None = None
    s2_corpus_id: int | None = None


@dataclass(slots=True)
class Touched:
    """Database ids a write touched: what the cache must forget once the transaction commits.

    `paper_keys` are the touched papers' arXiv ids: a paper's global id (and so a cached response's tag)
    names its arXiv id, not its row. The write path records them with the papers' ids."""

    papers: set[int] = field(default_factory=set)
    researchers: set[int] = field(default_factory=set)
    institutions: set[int] = field(default_factory=set)
    paper_keys: set[str] = field(default_factory=set)
    # arXiv ids of papers new to the archive: responses that looked them up and found nothing are dropped.
    new_papers: set[str] = field(default_factory=set)
    # Researchers and institutions whose figures, papers or links alone changed, or that are new: what names them
    # (edge/cacheable.py NAMING_FIELDS) is as it was, so answers showing only that (a paper's authors) are kept. A
    # write that cannot tell puts them in `researchers` / `institutions`, which drops those answers too.
    researcher_figures: set[int] = field(default_factory=set)
    institution_figures: set[int] = field(default_factory=set)
    # Whether the write may change which entities a list (a search, a category, a path, a sitemap) holds or their
    # order, so that every list answer goes: every write but a follow, whose follower count no list filters or
    # sorts by (the lists showing the entity in full are dropped by its own tag).
    lists: bool = True

    def update(self, other: Touched) -> None:
        self.papers |= other.papers
        self.researchers |= other.researchers
        self.institutions |= other.institutions
        self.paper_keys |= other.paper_keys
        self.new_papers |= other.new_papers
        self.researcher_figures |= other.researcher_figures
        self.institution_figures |= other.institution_figures
        self.lists = self.lists or other.lists

    def all_researchers(self) -> set[int]:
        return self.researchers | self.researcher_figures

    def all_institutions(self) -> set[int]:
        return self.institutions | self.institution_figures

    def __bool__(self) -> bool:
        return bool(
            self.papers
            or self.researchers
            or self.institutions
            or self.paper_keys
            or self.new_papers
            or self.researcher_figures
            or self.institution_figures
        )
