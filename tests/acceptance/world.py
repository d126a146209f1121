"""A fictional world of papers, researchers and institutions, in two phases, and its ground truth.

Everything the fake upstreams answer (tests/acceptance/upstreams.py) and everything the acceptance run expects
(tests/acceptance/test_world.py) derives from the definitions here; the expected figures are computed by the
functions at the end from these definitions alone, never from the database or the API.

Phase 1: 16 papers. Phase 2: two new papers, a revised version (new title), a withdrawal, Semantic Scholar
merging a duplicate author profile it had (answering the old id with the survivor), and an operator merging two
profiles by hand.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta


@dataclass(frozen=True)
class Institution:
    key: str
    ror: str
    openalex: str
    name: str
    acronyms: tuple[str, ...]
    alternatives: tuple[str, ...]
    country: str
    type: str

    @property
    def aliases(self) -> list[str]:
        return [*self.acronyms, *self.alternatives]


@dataclass(frozen=True)
class Researcher:
    key: str
    name: str
    s2: str
    openalex: str | None = None
    orcid: str | None = None
    # Works outside this archive: (S2 paper id, DOI or None, year, citations).
    other_works: tuple[tuple[str, str | None, int, int], ...] = ()
    # OpenAlex's own figures (works, citations, h-index, i10), when it knows the author.
    openalex_figures: tuple[int, int, int, int] | None = None


@dataclass(frozen=True)
class Author:
    name: str  # as arXiv writes it
    researcher: str | None = None  # a Researcher key; None: no source identifies them
    s2_id: str | None = None  # the id S2's paper lists, when not the researcher's own (a duplicate profile)
    institutions: tuple[str, ...] = ()  # Institution keys, as OpenAlex places them
    affiliation: str | None = None  # arXiv's text
    collaboration: bool = False


@dataclass(frozen=True)
class Version:
    submitted: datetime
    size_kb: int
    source: str = "D"


@dataclass(frozen=True)
class Paper:
    arxiv_id: str
    title: str
    abstract: str
    categories: tuple[str, ...]
    versions: tuple[Version, ...]
    authors: tuple[Author, ...]
    citations: int
    journal_doi: str | None = None
    s2_known: bool = True
    openalex_known: bool = True
    phase: int = 1

    @property
    def withdrawn(self) -> bool:
        return self.versions[-1].source == "I" or self.versions[-1].size_kb == 0

    @property
    def published(self) -> datetime:
        return self.versions[0].submitted

    @property
    def s2_paper_id(self) -> str:
        return hashlib.sha1(self.arxiv_id.encode()).hexdigest()

    @property
    def corpus_id(self) -> int:
        return 900_000 + int(hashlib.sha1(self.arxiv_id.encode()).hexdigest()[:5], 16)

    @property
    def openalex_work(self) -> str:
        return f"W7{int(hashlib.sha1(self.arxiv_id.encode()).hexdigest()[:8], 16)}"


INSTITUTIONS = (
    Institution(
        "nit",
        "0nbt1a211",
        "I1001",
        "Northbridge Institute of Technology",
        ("NIT",),
        ("Northbridge Tech",),
        "US",
        "education",
    ),
    Institution(
        "valmont",
        "0vmt3b441",
        "I1002",
        "Université de Valmont",
        ("UdV",),
        ("University of Valmont",),
        "FR",
        "education",
    ),
    Institution("karsk", "0ksk4c540", "I1003", "Karsk Polytechnic", ("KP",), (), "NO", "education"),
    Institution(
        "helios", "0hms5d684", "I1004", "Helios Research Laboratory", ("HRL",), ("Helios Lab",), "DE", "facility"
    ),
    # Its name is the closest to typos of the others': a look-up must never land here by guessing.
    Institution("madrid", "0mdr6e710", "I1005", "Madrid Research Institute", ("MRI",), (), "ES", "nonprofit"),
)
INSTITUTION = {i.key: i for i in INSTITUTIONS}

RESEARCHERS = (
    Researcher(
        "ada",
        "Ada Kovacs",
        "101",
        "A9101",
        "0000-0001-1111-1111",
        (("e" * 40, "10.9/ada.1", 2019, 40),),
        (30, 900, 12, 14),
    ),
    Researcher("bruno", "Bruno Lemaire", "102", "A9102", None, (("f" * 40, None, 2018, 3),), (8, 50, 4, 2)),
    Researcher("chen", "Chen Wei", "103"),
    Researcher(
        "dana", "Dana Whitfield", "104", "A9104", "0000-0002-2222-2222", (("a1" * 20, "10.9/dana.1", 2020, 25),)
    ),
    Researcher("ines", "Ines Duarte", "105", None, None, (("b2" * 20, None, 2017, 9),)),
    Researcher("jonas", "Jonas Berg", "106"),
    Researcher(
        "mira", "Mira Patel", "107", "A9107", None, (("c3" * 20, "10.9/mira.1", 2016, 60), ("d4" * 20, None, 2015, 1))
    ),
    Researcher("oskar", "Oskar Lind", "108", None, None, (("e5" * 20, None, 2014, 11),)),
    # Oskar's second profile: S2 keeps both; the operator merges them by hand in phase 2.
    Researcher("oskar2", "O. Lind", "1080", None, None, (("f6" * 20, "10.9/oskar.2", 2013, 5),)),
)
RESEARCHER = {r.key: r for r in RESEARCHERS}
# S2 knew Ines under a second id in phase 1 (papers list it); in phase 2 it merged that id into hers.
INES_DUPLICATE = "1050"
# The researchers that survive in the end, and what each absorbed.
ABSORBED = {"ines": ("ines_dup",), "oskar": ("oskar2",)}

T0 = datetime(2024, 3, 1, 9, 0, tzinfo=UTC)


def _v(day: int, size: int = 300, source: str = "D") -> Version:
    return Version(T0 + timedelta(days=day), size, source)


def _a(key: str, *institutions: str, s2_id: str | None = None, affiliation: str | None = None) -> Author:
    return Author(RESEARCHER[key].name, key, s2_id, institutions, affiliation)


TOMAS = Author("Tomas Brevik", None, None, ("karsk",))  # S2 lists him without an id
PRIYA = Author("Priya Nair", None, None, ("nit",))  # no researcher: S2 does not know her papers
# An author no source identifies is unmatched (researcher None), whoever they are elsewhere.
LUMEN = Author("LUMEN Collaboration", collaboration=True)

PAPERS = (
    Paper(
        "2403.00101",
        "Sparse attention for orbital mechanics",
        "We study sparse attention in orbital models.",
        ("cs.LG", "astro-ph.IM"),
        (_v(0),),
        (_a("ada", "nit", affiliation="Northbridge"), _a("bruno", "valmont")),
        12,
    ),
    Paper(
        "2403.00102",
        "Graph kernels on lattice gauge fields",
        "Lattice gauge fields meet graph kernels.",
        ("hep-lat", "cs.LG"),
        (_v(2), _v(30)),
        (_a("chen", "helios"), _a("ada", "nit"), _a("dana", "nit")),
        30,
        journal_doi="10.5555/jlat.2024.7",
    ),
    Paper(
        "2403.00103",
        "Federated optimisation under drift",
        "Drift in federated optimisation.",
        ("cs.LG",),
        (_v(4),),
        (_a("ada", "nit"), _a("mira", "helios")),
        7,
    ),
    Paper(
        "2403.00104",
        "Polymer melts from first principles",
        "Polymer melts, first principles.",
        ("cond-mat.soft",),
        (_v(6),),
        (_a("jonas", "karsk"), TOMAS),
        2,
    ),
    Paper(
        "2403.00105",
        "A flawed bound on sparse recovery",
        "A bound we later withdrew.",
        ("math.ST", "cs.IT"),
        (_v(8),),
        (_a("dana", "nit"), _a("ada", "nit")),
        5,
    ),
    Paper(
        "2403.00106",
        "Neutrino timing at the LUMEN array",
        "Timing neutrinos.",
        ("hep-ex",),
        (_v(10),),
        (LUMEN, _a("chen", "helios"), _a("mira", "helios")),
        40,
    ),
    Paper(
        "2403.00107",
        "Stochastic rounding in training",
        "Rounding stochastically.",
        ("cs.LG", "stat.ML"),
        (_v(12),),
        (_a("bruno", "valmont"), _a("ines", "valmont", s2_id=INES_DUPLICATE)),
        9,
    ),
    Paper(
        "2403.00108",
        "Causal discovery with latent confounders",
        "Latent confounders.",
        ("stat.ML", "cs.LG"),
        (_v(14),),
        (_a("ines", "valmont"), _a("mira", "helios"), _a("ada", "nit")),
        18,
    ),
    Paper(
        "2403.00109",
        "Ice sheet dynamics and basal sliding",
        "Basal sliding.",
        ("physics.geo-ph",),
        (_v(16),),
        (_a("jonas", "karsk"),),
        1,
    ),
    Paper(
        "2403.00110",
        "Small data transfer for glaciology",
        "Transfer learning for glaciers.",
        ("physics.geo-ph", "cs.LG"),
        (_v(18),),
        (PRIYA, Author("Jonas Berg", None, None, ("karsk",))),
        0,
        s2_known=False,
    ),
    Paper(
        "2403.00111",
        "Spectral clustering revisited",
        "Spectra of graphs.",
        ("cs.LG", "math.SP"),
        (_v(20),),
        (_a("oskar", "valmont"), _a("dana", "nit")),
        22,
    ),
    Paper(
        "2403.00112",
        "Robust estimators for heavy tails",
        "Heavy tails.",
        ("math.ST",),
        (_v(22),),
        (_a("oskar2", "valmont", affiliation="Valmont"), _a("chen", "helios")),
        4,
    ),
    Paper(
        "2403.00113",
        "Muon g-2 at low energies",
        "Muons.",
        ("hep-ph", "hep-ex"),
        (_v(24),),
        (_a("chen", "helios", "madrid"),),
        15,
    ),
    Paper(
        "2403.00114",
        "Attention is not explanation, again",
        "Explanations.",
        ("cs.CL", "cs.LG"),
        (_v(26),),
        (_a("mira", "helios"), _a("bruno", "valmont"), _a("ines", "valmont")),
        33,
    ),
    Paper(
        "2403.00115",
        "Quantum walks on expanders",
        "Walks.",
        ("quant-ph", "math.CO"),
        (_v(28),),
        (_a("dana", "nit"),),
        0,
    ),
    Paper(
        "2403.00116",
        "Benchmarks for tabular learning",
        "Tables.",
        ("cs.LG",),
        (_v(29),),
        (_a("ada", "nit"), _a("jonas", "karsk"), _a("oskar", "valmont")),
        11,
    ),
)
# Phase 2: what changed upstream.
PHASE2_NEW = (
    Paper(
        "2406.00201",
        "Drifting federated optimisation, part two",
        "More drift.",
        ("cs.LG", "math.OC"),
        (_v(100),),
        (_a("ines", "valmont", s2_id=INES_DUPLICATE), _a("ada", "nit")),
        3,
        phase=2,
    ),
    Paper(
        "2406.00202",
        "Glacier surges from satellite data",
        "Surges.",
        ("physics.geo-ph",),
        (_v(102),),
        (_a("jonas", "karsk"), TOMAS, PRIYA),
        1,
        phase=2,
    ),
)
PHASE2_REVISED = {
    # A second version with a new title.
    "2403.00103": ("Federated optimisation under concept drift", _v(90)),
    # A withdrawal: a last version of type I, 0 kB.
    "2403.00105": (None, _v(95, 0, "I")),
}


def papers(phase: int) -> list[Paper]:
    """The papers as arXiv has them at the end of `phase`."""
    found = list(PAPERS)
    if phase >= 2:
        found = [_revised(p) for p in found] + list(PHASE2_NEW)
    return found


def _revised(p: Paper) -> Paper:
    if p.arxiv_id not in PHASE2_REVISED:
        return p
    title, version = PHASE2_REVISED[p.arxiv_id]
    return Paper(**{**p.__dict__, "title": title or p.title, "versions": (*p.versions, version), "phase": 2})


# -- what S2 says ------------------------------------------------------------------------------------------------


def s2_author_id(author: Author) -> str | None:
    if author.researcher is None:
        return None
    return author.s2_id or RESEARCHER[author.researcher].s2


def s2_works(s2_id: str, phase: int) -> list[tuple[str, str | None, str | None, int | None, int]]:
    """An S2 author's papers list: (paperId, ArXiv id, DOI, year, citations). After phase 1 S2 merged Ines's
    duplicate profile into hers: her list holds both, and the duplicate's id answers with hers."""
    ids = {s2_id}
    if phase >= 2 and s2_id == RESEARCHER["ines"].s2:
        ids.add(INES_DUPLICATE)
    works: list[tuple[str, str | None, str | None, int | None, int]] = []
    for p in papers(phase):
        if p.s2_known and any(s2_author_id(a) in ids for a in p.authors):
            works.append((p.s2_paper_id, p.arxiv_id, p.journal_doi, p.published.year, p.citations))
    owner = next((r for r in RESEARCHERS if r.s2 in ids), None)
    for paper_id, doi, year, cites in owner.other_works if owner else ():
        works.append((paper_id, None, doi, year, cites))
    return works


# -- ground truth, from the definitions above ------------------------------------------------------------------


def survivor(key: str) -> str:
    """The researcher a key ends as (Oskar's second profile is merged into Oskar)."""
    return "oskar" if key == "oskar2" else key


def live(phase: int = 2) -> list[Paper]:
    return [p for p in papers(phase) if not p.withdrawn]


def papers_of(key: str, phase: int = 2, *, withdrawn: bool = False) -> list[Paper]:
    return [
        p
        for p in papers(phase)
        if (withdrawn or not p.withdrawn) and any(a.researcher and survivor(a.researcher) == key for a in p.authors)
    ]


def fields_of(ps: list[Paper]) -> dict[str, tuple[int, int]]:
    """{category: (papers listed in it, papers whose primary category it is)}."""
    out: dict[str, tuple[int, int]] = {}
    for p in ps:
        for c in p.categories:
            n, primary = out.get(c, (0, 0))
            out[c] = (n + 1, primary + (c == p.categories[0]))
    return out


def career(key: str) -> list[int]:
    """Citations of each work of the researcher's whole career, each work once: the archive papers (withdrawn
    ones too: S2 lists them) and S2's works lists of every profile they absorbed, a work being its arXiv id, else
    its DOI, else its S2 id; an archive paper counts its own citations."""
    profiles = [RESEARCHER[key].s2] + [RESEARCHER[k].s2 for k in ABSORBED.get(key, ()) if k in RESEARCHER]
    works: dict[str, int] = {}
    for s2_id in profiles:
        for paper_id, arxiv_id, doi, _, cites in s2_works(s2_id, 2):
            k = f"a:{arxiv_id}" if arxiv_id else (f"d:{doi}" if doi else f"x:{paper_id}")
            works[k] = max(works.get(k, 0), cites)
    for p in papers_of(key, withdrawn=True):
        works[f"a:{p.arxiv_id}"] = p.citations
    return sorted(works.values(), reverse=True)


def h_index(citations: list[int]) -> int:
    ordered = sorted(citations, reverse=True)
    return sum(1 for i, c in enumerate(ordered) if c >= i + 1)


def positions(key: str) -> dict[str, int]:
    """First / middle / last / solo over the researcher's live papers where every (non-collaboration) author
    is matched; a collaboration is an unmatched author, so its papers never count."""
    out = {"first": 0, "middle": 0, "last": 0, "solo": 0, "matchedPapers": 0, "totalPapers": 0}
    for p in papers_of(key):
        out["totalPapers"] += 1
        if any(a.researcher is None for a in p.authors):
            continue
        out["matchedPapers"] += 1
        pos = next(i for i, a in enumerate(p.authors, 1) if survivor(a.researcher or "") == key)
        n = len(p.authors)
        kind = "solo" if n == 1 else "first" if pos == 1 else "last" if pos == n else "middle"
        out[kind] += 1
    return out


def institution_papers(key: str, phase: int = 2) -> list[Paper]:
    """Live papers with any author (matched to a researcher or not) that OpenAlex places at the institution."""
    return [p for p in live(phase) if p.openalex_known and any(key in a.institutions for a in p.authors)]


def institution_researchers(key: str) -> set[str]:
    """Researchers matched on an authorship at the institution, on any paper."""
    return {
        survivor(a.researcher)
        for p in papers(2)
        if p.openalex_known and p.s2_known
        for a in p.authors
        if a.researcher and key in a.institutions
    }


def coauthors(key: str) -> dict[str, int]:
    """Researchers sharing live papers with this one: {key: shared papers}."""
    shared: dict[str, int] = {}
    for p in papers_of(key):
        others = {survivor(a.researcher) for a in p.authors if a.researcher} - {key}
        for o in others:
            shared[o] = shared.get(o, 0) + 1
    return shared


SURVIVORS = [r.key for r in RESEARCHERS if r.key != "oskar2"]
