"""The demo's papers in submission order (with their matches, citations and analyses) and researchers' works."""

from __future__ import annotations

import math
import random
from collections.abc import Iterator, Sequence
from datetime import datetime, timedelta

import demo.words as W
from db.queries.writes.analyses import AnalysisRecord
from db.records import (
    AuthorRecord,
    AuthorshipMatch,
    CitationRecord,
    InstitutionRecord,
    PaperRecord,
    ResearcherRecord,
    VersionRecord,
    WorkRecord,
)
from demo.people import (
    END,
    FIVE_DIGITS_FROM,
    NEW_STYLE_FROM,
    START,
    UNMATCHED_SHARE,
    DemoPlan,
    People,
    _rng,
    s2_author_id,
)

_GROWTH = 2.4  # submissions grow roughly exponentially over the years


# ------------------------------------------------------------------------------------------------ papers


def _published_at(plan: DemoPlan, i: int, rng: random.Random) -> datetime:
    u = (i + 0.5) / plan.papers
    t = math.log1p(u * math.expm1(_GROWTH)) / _GROWTH
    span = (END - START).total_seconds()
    return START + timedelta(seconds=t * span + rng.uniform(0, 3600))


class _IdMinter:
    """arXiv ids in submission order: `hep-th/9901001` per archive before April 2007, then `0704.0001`.

    The demo holds a sample of arXiv, so numbers advance in random steps sized to the month's
    expected volume: ids spread over the month's range the way a sample of real ids would.
    """

    def __init__(self, plan: DemoPlan) -> None:
        self.plan = plan
        self.last: dict[tuple[str, str], int] = {}
        self.steps: dict[tuple[str, str], int] = {}
        self.counts: dict[tuple[str, str], int] = {}
        self.expected: dict[tuple[int, int], float] = {}

    def _expected(self, when: datetime) -> float:
        key = (when.year, when.month)
        if key not in self.expected:
            self.expected[key] = self._month_volume(when)
        return self.expected[key]

    def _month_volume(self, when: datetime) -> float:
        month_start = when.replace(day=1, hour=0, minute=0, second=0, microsecond=0)
        month_end = (month_start + timedelta(days=32)).replace(day=1)
        span = (END - START).total_seconds()

        def share(at: datetime) -> float:
            t = min(1.0, max(0.0, (at - START).total_seconds() / span))
            return math.expm1(_GROWTH * t) / math.expm1(_GROWTH)

        return self.plan.papers * (share(month_end) - share(month_start))

    def _next(self, key: tuple[str, str], cap: int, expected: float, rng: random.Random) -> int:
        if key not in self.steps:
            self.steps[key] = max(1, int(cap * 0.6 / max(1.0, expected)))
        prev, count = self.last.get(key, 0), self.counts.get(key, 0)
        # Gaps shrink as the range fills, so a busier month than expected still fits.
        still_expected = max(expected - count, expected / 4, 1.0)
        step = max(1, min(self.steps[key], int((cap - prev) / (2 * still_expected))))
        seq = prev + 1 + rng._randbelow(step)  # type: ignore[attr-defined]  # randrange(step), one call less
        if seq > cap:
            raise ValueError(f"too many papers in {key} for its arXiv id range")
        self.last[key], self.counts[key] = seq, count + 1
        return seq  # type: ignore[no-any-return]

    def mint(self, when: datetime, category: str, rng: random.Random) -> str | None:
        """The paper's id, or None when its archive's month already holds 999 papers (old-style numbers)."""
        yymm = f"{when.year % 100:02d}{when.month:02d}"
        if when.date() < NEW_STYLE_FROM:
            archive = category.split(".")[0]
            if self.last.get((archive, yymm), 0) >= 999:
                return None
            # Each archive numbered its own papers.
            seq = self._next((archive, yymm), 999, self._expected(when) * W.archive_share(archive, when.year), rng)
            return f"{archive}/{yymm}{seq:03d}"
        width, cap = (5, 99_999) if when.date() >= FIVE_DIGITS_FROM else (4, 9_999)
        seq = self._next(("", yymm), cap, self._expected(when), rng)
        return f"{yymm}.{seq:0{width}d}"


def _categories(rng: random.Random, when: datetime) -> list[str]:
    while True:
        primary = W.category(rng)
        if W.CATEGORY_SINCE.get(primary, 1995) <= when.year:
            break
    if primary.startswith("astro-ph.") and when.year < 2009:
        return ["astro-ph"]  # astro-ph had no subject classes before 2009
    cats = [primary]
    for cross in W.CROSS_LISTS.get(primary, ()):
        if rng.random() < 0.25 and W.CATEGORY_SINCE.get(cross, 1995) <= when.year and cross not in cats:
            cats.append(cross)
    return cats


def _author_count(rng: random.Random, category: str) -> int:
    if category.startswith(("hep-ex", "astro-ph.HE")) and rng.random() < 0.1:
        return rng.randint(20, 60)
    # Mostly 1-6 authors, with a tail.
    return min(40, 1 + int(rng.expovariate(0.45)))


_PARETO = -1.0 / 1.15  # random.paretovariate(1.15) is (1 - random()) ** _PARETO


def _citations(rng: random.Random, age_years: float) -> int:
    # Pareto-tailed, growing with age: most papers have a handful, a few have thousands.
    base = (rng.paretovariate(1.15) - 1) * 4 * min(1.0, 0.15 + age_years / 8)
    return min(int(base), 40_000)


def _hex40(rng: random.Random) -> str:
    return f"{rng.getrandbits(160):040x}"


def generate_papers(
    plan: DemoPlan, people: People, institutions: Sequence[InstitutionRecord], arxiv_ids: list[str]
) -> Iterator[tuple[PaperRecord, list[AuthorshipMatch], CitationRecord | None, AnalysisRecord | None]]:
    """Papers in submission order, each with its authorship matches, citation count and analysis.

    Fills `arxiv_ids` (by paper index) and the people's archive paper counts as it goes.
    """
    rng = _rng(plan, "papers")
    heavy_rng = _rng(plan, "heavy")
    heavy_sets = [set(heavy_rng.sample(range(plan.papers), h.papers)) for h in plan.heavy]
    first_regular = len(plan.heavy)
    regular = plan.researchers - first_regular
    unseen = list(range(first_regular, plan.researchers))
    heavy_rng.shuffle(unseen)
    matched_slots_left = int(plan.papers * 2.4)  # about the matched author slots to come
    minter = _IdMinter(plan)
    # randint(a, b), randrange(n) and choice(s) are a + _randbelow(b - a + 1), _randbelow(n) and
    # s[_randbelow(len(s))] (CPython's random module): the same numbers for two Python calls less each.
    rb = rng._randbelow  # type: ignore[attr-defined]
    for i in range(plan.papers):
        when = _published_at(plan, i, rng)
        cats = _categories(rng, when)
        field = W.field_of(cats[0])
        arxiv_id = minter.mint(when, cats[0], rng)
        while arxiv_id is None:
            # Today's category shares put more than 999 cs papers in some months before 2007 from about 2M papers
            # on, more than arXiv's old-style numbers hold (arXiv had a few hundred then): such a paper is drawn
            # another category. Smaller demos never get here, so their rows are unchanged.
            cats = _categories(rng, when)
            field = W.field_of(cats[0])
            arxiv_id = minter.mint(when, cats[0], rng)
        arxiv_ids.append(arxiv_id)

        authors: list[AuthorRecord] = []
        matches: list[AuthorshipMatch] = []
        on_paper: set[int] = set()
        if field in ("hep", "astro") and rng.random() < 0.06:
            authors.append(AuthorRecord(1, W.COLLABORATIONS[rb(len(W.COLLABORATIONS))], None, True))
        wanted = [j for j, s in enumerate(heavy_sets) if i in s]
        n_people = max(_author_count(rng, cats[0]), len(wanted))
        for _ in range(n_people):
            position = len(authors) + 1
            if wanted:
                j = wanted.pop(0)
            elif rng.random() < UNMATCHED_SHARE:
                authors.append(AuthorRecord(position, W.person_name(rng)))
                continue
            else:
                # New faces debut at an even pace; the rest is Zipf-like: a few prolific researchers.
                if unseen and rng.random() < len(unseen) / max(1, matched_slots_left):
                    j = unseen.pop()
                else:
                    j = first_regular + int(regular * rng.random() ** 2.2)
                matched_slots_left -= 1
                if j in on_paper:
                    continue
            on_paper.add(j)
            name = people.names[j]
            if rng.random() < 0.15:
                name = W.initialled(name)
            rors = [institutions[people.home[j]].ror_id]
            if people.second[j] >= 0 and rng.random() < 0.3:
                rors.append(institutions[people.second[j]].ror_id)
            affiliation = institutions[people.home[j]].name if rng.random() < 0.15 else None
            authors.append(AuthorRecord(position, name, affiliation))
            matches.append(AuthorshipMatch(arxiv_id, position, s2_author_id(j), rors))
            people.paper_count[j] += 1
            if people.own_paper[j] < 0:
                people.own_paper[j] = i
            elif people.own_paper2[j] < 0 or rng.random() < 0.1:
                people.own_paper2[j] = i

        n_versions = 1 + min(4, int(rng.expovariate(1.3)))
        versions, at = [], when
        for v in range(1, n_versions + 1):
            if v > 1:
                at = min(END, at + timedelta(days=3 + rb(398), seconds=rb(86_400)))
            versions.append(VersionRecord(v, at, 50 + rb(8951), "D" if rng.random() < 0.8 else "P"))
        title = W.title(rng, field)
        paper = PaperRecord(
            arxiv_id=arxiv_id,
            version=n_versions,
            title=title,
            abstract=W.abstract(rng, field),
            categories=cats,
            published=when,
            updated=versions[-1].submitted_at,
            authors=authors,
            versions=versions,
            doi=f"10.{1000 + rb(9000)}/{W.doi_suffix(rng)}" if rng.random() < 0.3 else None,
            journal_ref=W.journal_ref(rng, field, when.year) if rng.random() < 0.25 else None,
            comments=f"{4 + rb(57)} pages, {1 + rb(14)} figures" if rng.random() < 0.6 else None,
            license=W.LICENSES[rb(len(W.LICENSES))] if when.year >= 2004 else None,
            withdrawn=rng.random() < 0.003,
        )
        age = (END - when).days / 365.25
        citation = None
        if rng.random() < 0.85:
            source = "s2" if rng.random() < 0.6 else "openalex"
            citation = CitationRecord(
                arxiv_id,
                _citations(rng, age),
                source,
                s2_paper_id=_hex40(rng) if source == "s2" or rng.random() < 0.5 else None,
                openalex_id=f"W{4_000_000_000 + i}" if source == "openalex" or rng.random() < 0.5 else None,
            )
        analysis = None
        if rng.random() < 0.35:
            analysis = AnalysisRecord(
                arxiv_id,
                summary=W.summary(rng, field, title),
                topics=W.topics(rng, field),
                paper_type=W.PAPER_TYPES[rb(len(W.PAPER_TYPES))],
                research_field=W.RESEARCH_FIELDS[field],
                novelty=W.NOVELTY[rb(len(W.NOVELTY))],
                significance_score=round(rng.uniform(0.1, 1.0), 2),
                model="demo",
            )
        yield paper, matches, citation, analysis


# ------------------------------------------------------------------------------------------------- works


def _h_index(counts: Sequence[int]) -> int:
    ranked = sorted(counts, reverse=True)
    return sum(1 for rank, c in enumerate(ranked, 1) if c >= rank)


# A work as generate_work_rows gives it: WorkRecord's fields, in its order.
WorkRow = tuple[str, str, str, int, int | None, str | None, str | None]


def generate_works(
    plan: DemoPlan, people: People, arxiv_ids: Sequence[str]
) -> Iterator[tuple[int, list[WorkRecord], ResearcherRecord]]:
    """Each researcher's external works from both sources, with each source's own totals."""
    for j, works, totals in generate_work_rows(plan, people, arxiv_ids):
        yield j, [WorkRecord(*w) for w in works], totals


def generate_work_rows(
    plan: DemoPlan, people: People, arxiv_ids: Sequence[str]
) -> Iterator[tuple[int, list[WorkRow], ResearcherRecord]]:
    """`generate_works` with each work a tuple of WorkRecord's fields: what the bulk load COPYs, without building
    tens of millions of records (a frozen dataclass costs 1.8 µs to make, a tuple 0.08)."""
    rng = _rng(plan, "works")
    heavy_rng = _rng(plan, "heavy")
    heavy_papers = [heavy_rng.sample(range(plan.papers), h.papers) for h in plan.heavy]
    # External works' titles come from a fixed pool: they are seen only in lists, and inventing
    # millions of titles would dominate the generation time.
    title_rng = _rng(plan, "work-titles")
    titles = [W.short_title(title_rng) for _ in range(5_000)]
    n_titles = len(titles)
    draw, bits, doi_prefixes = rng.random, rng.getrandbits, W.DOI_PREFIXES
    for j in range(plan.researchers):
        own: list[int] = []
        if j < len(plan.heavy):
            n = plan.heavy[j].works
            own = sorted(heavy_papers[j])[: int(len(heavy_papers[j]) * 0.6)]
        else:
            n = people.paper_count[j] + min(600, int((rng.paretovariate(1.5) - 1) * 3))
            own = [k for k in (people.own_paper[j], people.own_paper2[j]) if k >= 0 and rng.random() < 0.7]
        first_year = rng.randint(1975, 2024)
        span = 2027 - first_year
        works: list[WorkRow] = []
        # The hot loop of the generator (tens of millions of works): the draws are inlined (the same numbers in
        # the same order as `_citations`, `W.doi_suffix` and `_hex40` draw them) and the callables are locals.
        for w in range(max(n, len(own))):
            arxiv_id = arxiv_ids[own[w]] if w < len(own) else None
            year = first_year + int(draw() * span)
            cites = min(int(((1.0 - draw()) ** _PARETO - 1) * 4 * min(1.0, 0.15 + (2026.9 - year) / 8)), 40_000)
            doi = None
            if draw() < 0.5:
                prefix = 1000 + int(draw() * 9000)
                r = draw()
                doi = f"10.{prefix}/{doi_prefixes[int(r * 6)]}.{100_000 + int(r * 1e12) % 9_900_000}"
            title = titles[int(draw() * n_titles)]
            in_s2, in_oa = draw() < 0.85, draw() < 0.75
            if not (in_s2 or in_oa):
                in_s2 = True
            if in_s2:
                c = None if draw() < 0.04 else cites
                works.append(("s2", f"{bits(160):040x}", title, year, c, arxiv_id, doi))
            if in_oa:
                # Sources disagree a little on counts, and OpenAlex often lacks the arXiv id.
                c = None if draw() < 0.04 else int(cites * (0.85 + 0.3 * draw()))
                oa_arxiv = arxiv_id if draw() < 0.5 else None
                works.append(("openalex", f"W{2_000_000_000 + int(draw() * 8e9)}", title, year, c, oa_arxiv, doi))
        s2 = [w[4] or 0 for w in works if w[0] == "s2"]
        oa = [w[4] or 0 for w in works if w[0] == "openalex"]
        totals = ResearcherRecord(
            name=people.names[j],
            s2_author_id=s2_author_id(j),
            s2_paper_count=len(s2) + rng.randint(0, 3),
            s2_citation_count=sum(s2),
            s2_h_index=_h_index(s2),
            openalex_works_count=len(oa),
            openalex_cited_by_count=sum(oa),
            openalex_h_index=_h_index(oa),
            openalex_i10_index=sum(1 for c in oa if c >= 10),
        )
        yield j, works, totals
