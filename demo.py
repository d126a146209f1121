"""The demo dataset: realistic, deterministic (seeded), loaded through the ingest's bulk write path.

`wovepaper demo` loads about 20,000 papers (1995 to late 2026, old-style ids before April 2007),
30,000 researchers, 500 institutions, external works per researcher and citation counts. The same
generator at `--papers 1000000` feeds the benchmarks: papers stream in batches, so memory stays
bounded by the researchers, not the papers. Everything is drawn from `random.Random` streams seeded
with the seed and the stream's name, and the end date is fixed, so a seed always gives the same rows.
"""

from __future__ import annotations

import asyncio
import math
import random
import time
from array import array
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from typing import TYPE_CHECKING, TypeVar, cast

import asyncpg

import demo_words as W
from db.ids import ror_checksum
from db.queries import bulk_load
from db.queries.figures import refresh_institution_figures, refresh_researcher_figures
from db.queries.writes import (
    AnalysisRecord,
    apply_authorship_matches,
    count_papers,
    replace_researcher_works,
    update_citations,
    upsert_analyses,
    upsert_institutions,
    upsert_papers,
    upsert_researchers,
)
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

if TYPE_CHECKING:
    from rich.progress import TaskID

DEFAULT_PAPERS = 20_000
DEFAULT_SEED = 42
START = datetime(1995, 1, 1, tzinfo=UTC)
END = datetime(2026, 11, 27, tzinfo=UTC)  # fixed, so the dataset does not change with the calendar
NEW_STYLE_FROM = date(2007, 4, 1)
FIVE_DIGITS_FROM = date(2015, 1, 1)
UNMATCHED_SHARE = 0.10
INSTITUTIONS = 500
_CROCKFORD = "0123456789abcdefghjkmnpqrstvwxyz"
_T = TypeVar("_T")
_GROWTH = 2.4  # submissions grow roughly exponentially over the years


@dataclass(frozen=True, slots=True)
class Heavy:
    papers: int
    works: int  # distinct external works (some are their own arXiv papers)


@dataclass(frozen=True, slots=True)
class DemoPlan:
    papers: int
    seed: int
    researchers: int
    institutions: int
    heavy: tuple[Heavy, ...]

    @classmethod
    def for_papers(cls, papers: int, seed: int = DEFAULT_SEED) -> DemoPlan:
        if papers < 100:
            raise ValueError("the demo needs at least 100 papers")
        # Bigger archives reuse their authors more: researchers grow slower than papers.
        researchers = min(int(papers * 1.5), max(200, round(30_000 * (papers / 20_000) ** 0.8)))
        heavy: tuple[Heavy, ...]
        if papers >= 20_000:
            heavy = (Heavy(2400, 6200), Heavy(2150, 5600), Heavy(2050, 5100))
        elif papers >= 5_000:
            heavy = tuple(Heavy(int(papers * f), w) for f, w in ((0.12, 5600), (0.1, 5300), (0.09, 5100)))
        else:
            heavy = (Heavy(int(papers * 0.12), 5200),)
        return cls(papers, seed, researchers, INSTITUTIONS, heavy)


@dataclass(slots=True)
class PaperBatch:
    papers: list[PaperRecord]
    matches: list[AuthorshipMatch]
    citations: list[CitationRecord]
    analyses: list[AnalysisRecord]


def _rng(plan: DemoPlan, stream: str) -> random.Random:
    return random.Random(f"wovepaper-demo:{plan.seed}:{plan.papers}:{stream}")


def _permuted(j: int, modulus: int, multiplier: int) -> int:
    """A bijection of range(modulus): unique, random-looking external ids from an index."""
    return (j * multiplier + 7_919) % modulus


# ------------------------------------------------------------------------------------------ institutions


def make_institutions(plan: DemoPlan) -> list[InstitutionRecord]:
    rng = _rng(plan, "institutions")
    names: dict[str, tuple[str, str, str, list[str]]] = {}
    for name, country, kind, aliases in W.REAL_INSTITUTIONS:
        names[name] = (name, country, kind, list(aliases))
    while len(names) < plan.institutions:
        city, country, lang = rng.choice(W.CITIES)
        pattern, kind = rng.choice(W.INSTITUTION_PATTERNS[lang] + W.INSTITUTION_PATTERNS["any"])
        name = pattern.format(city=city)
        if name not in names:
            aliases = [W.acronym(name)] if rng.random() < 0.3 else []
            names[name] = (name, country, kind, aliases)
    rors: set[str] = set()
    out: list[InstitutionRecord] = []
    for i, (name, country, kind, aliases) in enumerate(list(names.values())[: plan.institutions]):
        ror = ""
        while not ror or ror in rors:
            body = "0" + "".join(rng.choice(_CROCKFORD) for _ in range(6))
            ror = body + ror_checksum(body)
        rors.add(ror)
        openalex = f"I{_permuted(i, 10**9, 48_271) + 1_000_000_000}" if rng.random() < 0.9 else None
        out.append(InstitutionRecord(ror, name, aliases, country, kind, openalex))
    return out


# ------------------------------------------------------------------------------------------- researchers


def _orcid(rng: random.Random, j: int) -> str:
    [rng.randrange(10) for _ in range(15)]  # keeps the generator's stream as it was
    # Issued ORCIDs lie in 0000-0001-5000-0007 .. 0000-0003-5000-0001; a bijection of the researcher
    # index keeps them unique (random digits collide by the thousand at a million papers).
    v = _permuted(j, 3 * 10**7, 982_451_653)
    digits = [0] * 7 + [1 + v // 10**7] + [int(c) for c in f"{v % 10**7:07d}"]
    total = 0
    for d in digits:
        total = (total + d) * 2
    check = (12 - total % 11) % 11
    s = "".join(map(str, digits)) + ("X" if check == 10 else str(check))
    return f"{s[0:4]}-{s[4:8]}-{s[8:12]}-{s[12:16]}"


def s2_author_id(j: int) -> str:
    return str(_permuted(j, 10**9, 982_451_653) + 1_000_000)


def openalex_author_id(j: int) -> str:
    return f"A5{_permuted(j, 10**9, 961_748_941):09d}"


@dataclass(slots=True)
class People:
    """Who the researchers are, by index: what the paper and works generators need, compactly."""

    names: list[str]
    home: array[int]  # institution index
    second: array[int]  # a second institution index, or -1
    paper_count: array[int]  # archive papers, counted while papers are generated
    own_paper: array[int]  # index of up to two of their papers (-1: none)
    own_paper2: array[int]


def researcher_records(plan: DemoPlan, people: People) -> Iterator[ResearcherRecord]:
    """The researchers in index order, filling in `people` as they come (records are not kept)."""
    rng = _rng(plan, "researchers")
    for j in range(plan.researchers):
        name = W.person_name(rng)
        people.names.append(name)
        # Institutions are Zipf-like too: a few large ones host many researchers.
        people.home[j] = min(plan.institutions - 1, int(plan.institutions * rng.random() ** 1.8))
        if rng.random() < 0.2:
            people.second[j] = rng.randrange(plan.institutions)
        yield ResearcherRecord(
            name=name,
            s2_author_id=s2_author_id(j),
            openalex_id=openalex_author_id(j) if rng.random() < 0.9 else None,
            orcid=_orcid(rng, j) if rng.random() < 0.4 else None,
        )


def new_people(plan: DemoPlan) -> People:
    n = plan.researchers
    return People([], array("l", [0]) * n, array("l", [-1]) * n, *(array("l", [v]) * n for v in (0, -1, -1)))


def make_researchers(plan: DemoPlan) -> tuple[list[ResearcherRecord], People]:
    people = new_people(plan)
    return list(researcher_records(plan, people)), people


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
        seq = prev + 1 + rng.randrange(step)
        if seq > cap:
            raise ValueError(f"too many papers in {key} for its arXiv id range")
        self.last[key], self.counts[key] = seq, count + 1
        return seq

    def mint(self, when: datetime, category: str, rng: random.Random) -> str:
        yymm = when.strftime("%y%m")
        if when.date() < NEW_STYLE_FROM:
            archive = category.split(".")[0]
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
    for i in range(plan.papers):
        when = _published_at(plan, i, rng)
        cats = _categories(rng, when)
        field = W.field_of(cats[0])
        arxiv_id = minter.mint(when, cats[0], rng)
        arxiv_ids.append(arxiv_id)

        authors: list[AuthorRecord] = []
        matches: list[AuthorshipMatch] = []
        on_paper: set[int] = set()
        if field in ("hep", "astro") and rng.random() < 0.06:
            authors.append(AuthorRecord(1, rng.choice(W.COLLABORATIONS), None, True))
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
                at = min(END, at + timedelta(days=rng.randint(3, 400), seconds=rng.randrange(86_400)))
            versions.append(VersionRecord(v, at, rng.randint(50, 9000), "D" if rng.random() < 0.8 else "P"))
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
            doi=f"10.{rng.randint(1000, 9999)}/{W.doi_suffix(rng)}" if rng.random() < 0.3 else None,
            journal_ref=W.journal_ref(rng, field, when.year) if rng.random() < 0.25 else None,
            comments=f"{rng.randint(4, 60)} pages, {rng.randint(1, 14)} figures" if rng.random() < 0.6 else None,
            license=rng.choice(W.LICENSES) if when.year >= 2004 else None,
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
                paper_type=rng.choice(W.PAPER_TYPES),
                research_field=W.RESEARCH_FIELDS[field],
                novelty=rng.choice(W.NOVELTY),
                significance_score=round(rng.uniform(0.1, 1.0), 2),
                model="demo",
            )
        yield paper, matches, citation, analysis


# ------------------------------------------------------------------------------------------------- works


def _h_index(counts: Sequence[int]) -> int:
    ranked = sorted(counts, reverse=True)
    return sum(1 for rank, c in enumerate(ranked, 1) if c >= rank)


def generate_works(
    plan: DemoPlan, people: People, arxiv_ids: Sequence[str]
) -> Iterator[tuple[int, list[WorkRecord], ResearcherRecord]]:
    """Each researcher's external works from both sources, with each source's own totals."""
    rng = _rng(plan, "works")
    heavy_rng = _rng(plan, "heavy")
    heavy_papers = [heavy_rng.sample(range(plan.papers), h.papers) for h in plan.heavy]
    # External works' titles come from a fixed pool: they are seen only in lists, and inventing
    # millions of titles would dominate the generation time.
    title_rng = _rng(plan, "work-titles")
    titles = [W.short_title(title_rng) for _ in range(5_000)]
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
        works: list[WorkRecord] = []
        draw = rng.random  # the hot loop of the generator: plain floats are the cheapest draws
        for w in range(max(n, len(own))):
            arxiv_id = arxiv_ids[own[w]] if w < len(own) else None
            year = first_year + int(draw() * span)
            cites = _citations(rng, 2026.9 - year)
            doi = f"10.{1000 + int(draw() * 9000)}/{W.doi_suffix(rng)}" if draw() < 0.5 else None
            title = titles[int(draw() * len(titles))]
            in_s2, in_oa = draw() < 0.85, draw() < 0.75
            if not (in_s2 or in_oa):
                in_s2 = True
            if in_s2:
                c = None if draw() < 0.04 else cites
                works.append(WorkRecord("s2", _hex40(rng), title, year, c, arxiv_id, doi))
            if in_oa:
                # Sources disagree a little on counts, and OpenAlex often lacks the arXiv id.
                c = None if draw() < 0.04 else int(cites * (0.85 + 0.3 * draw()))
                oa_arxiv = arxiv_id if draw() < 0.5 else None
                works.append(
                    WorkRecord("openalex", f"W{2_000_000_000 + int(draw() * 8e9)}", title, year, c, oa_arxiv, doi)
                )
        s2 = [w.citation_count or 0 for w in works if w.source == "s2"]
        oa = [w.citation_count or 0 for w in works if w.source == "openalex"]
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


# ----------------------------------------------------------------------------------------------- loading

Progress = Callable[[str, int, int], None]  # (stage, done, total)


@dataclass(slots=True)
class DemoReport:
    papers: int
    researchers: int
    institutions: int
    works: int
    seconds: float


def _batches(items: Iterator[_T], size: int) -> Iterator[list[_T]]:
    batch: list[_T] = []
    for item in items:
        batch.append(item)
        if len(batch) >= size:
            yield batch
            batch = []
    if batch:
        yield batch


async def prefetched(batches: Iterator[_T]) -> AsyncIterator[_T]:
    """The batches, the next one generated in a thread while the database writes this one.

    The generator holds the GIL only while it computes; PostgreSQL works meanwhile, so on a
    machine with two cores generation and writing overlap instead of taking turns.
    """
    upcoming = asyncio.create_task(asyncio.to_thread(next, batches, None))
    while True:
        batch = await upcoming
        if batch is None:
            return
        upcoming = asyncio.create_task(asyncio.to_thread(next, batches, None))
        yield batch


async def load_demo(
    target: asyncpg.Connection | asyncpg.Pool | str,
    *,
    papers: int = DEFAULT_PAPERS,
    seed: int = DEFAULT_SEED,
    batch_size: int = 5_000,
    progress: Progress | None = None,
    bulk: bool | None = None,
) -> DemoReport:
    """Generate the demo dataset and write it, then refresh figures.

    `target` is a migrated database (DSN, pool or connection). Into empty tables the rows are
    COPYed once each with the indexes built after (`demo_bulk`, one transaction); otherwise they go
    through db/queries/writes.py's upserts, batch by batch. Both leave the same rows, and loading the
    same plan twice writes nothing new: every upsert is idempotent. `bulk` forces one path (True
    fails on a database with rows).
    """
    if isinstance(target, str):
        conn = await asyncpg.connect(target)
        try:
            return await load_demo(conn, papers=papers, seed=seed, batch_size=batch_size, progress=progress, bulk=bulk)
        finally:
            await conn.close()
    if isinstance(target, asyncpg.Pool):
        async with target.acquire() as pooled:
            conn = cast(asyncpg.Connection, pooled)
            return await load_demo(conn, papers=papers, seed=seed, batch_size=batch_size, progress=progress, bulk=bulk)
    return await _load(target, DemoPlan.for_papers(papers, seed), batch_size, progress, bulk)


async def _load(
    conn: asyncpg.Connection, plan: DemoPlan, batch_size: int, progress: Progress | None, bulk: bool | None
) -> DemoReport:
    # Large batches make long statements; the loader is not a web request. A crash loses at most the
    # last batches, which a re-run writes again, so commits need not wait for the disk; the full-text
    # index merges its pending entries less often; the figures' sorts stay in memory. The caller's
    # connection (maybe a pooled one) gets its own settings back afterwards.
    await conn.execute(
        "SET statement_timeout = 0; SET synchronous_commit = off; SET gin_pending_list_limit = '32MB';"
        " SET work_mem = '64MB'"
    )
    try:
        import demo_bulk  # noqa: PLC0415 - it builds on this module's generators

        empty = await bulk_load.is_empty(conn, demo_bulk.TABLES)
        if bulk and not empty:
            raise ValueError("a bulk load needs empty tables")
        if bulk or (bulk is None and empty):
            return await _write_bulk(conn, plan, batch_size, progress)
        return await _write(conn, plan, batch_size, progress)
    finally:
        await conn.execute(
            "RESET statement_timeout; RESET synchronous_commit; RESET gin_pending_list_limit; RESET work_mem;"
            " RESET maintenance_work_mem"
        )


async def _write_bulk(
    conn: asyncpg.Connection, plan: DemoPlan, batch_size: int, progress: Progress | None
) -> DemoReport:
    import demo_bulk  # noqa: PLC0415

    started = time.monotonic()
    report = progress or (lambda stage, done, total: None)
    # Index builds sort in memory; one transaction, so an interrupted load leaves the tables empty.
    await conn.execute("SET maintenance_work_mem = '512MB'")
    async with conn.transaction():
        works = await demo_bulk.load(conn, plan, make_institutions(plan), batch_size, report)
    report("statistics", 0, 1)
    await bulk_load.vacuum_analyze(conn)
    report("statistics", 1, 1)
    return DemoReport(plan.papers, plan.researchers, plan.institutions, works, time.monotonic() - started)


async def _write(conn: asyncpg.Connection, plan: DemoPlan, batch_size: int, progress: Progress | None) -> DemoReport:
    started = time.monotonic()
    report = progress or (lambda stage, done, total: None)

    institutions = make_institutions(plan)
    people = new_people(plan)
    report("researchers", 0, plan.researchers)
    async with conn.transaction():
        inst_ids = await upsert_institutions(conn, institutions)
        rids = array("q", [0]) * plan.researchers
        done = 0
        for chunk in _batches(researcher_records(plan, people), 50_000):
            ids = await upsert_researchers(conn, chunk)
            for k, rec in enumerate(chunk, done):
                rids[k] = ids[rec.s2_author_id or ""]
            done += len(chunk)
            report("researchers", done, plan.researchers)

    arxiv_ids: list[str] = []
    done = 0
    report("papers", 0, plan.papers)
    async for papers in prefetched(_batches(generate_papers(plan, people, institutions, arxiv_ids), batch_size)):
        keys = {m.researcher_key for _, ms, _, _ in papers for m in ms if m.researcher_key is not None}
        key_ids = {k: rids[researcher_index(k)] for k in keys}
        async with conn.transaction():
            await upsert_papers(conn, [p for p, _, _, _ in papers])
            await apply_authorship_matches(conn, [m for _, ms, _, _ in papers for m in ms], key_ids, inst_ids)
            await update_citations(conn, [c for _, _, c, _ in papers if c is not None])
            await upsert_analyses(conn, [a for _, _, _, a in papers if a is not None])
        done += len(papers)
        report("papers", done, plan.papers)

    works_total = 0
    report("works", 0, plan.researchers)
    async for careers in prefetched(_batches(generate_works(plan, people, arxiv_ids), 2_000)):
        async with conn.transaction():
            await upsert_researchers(conn, [totals for _, _, totals in careers])
            await replace_researcher_works(conn, {rids[j]: works for j, works, _ in careers})
        works_total += sum(len(works) for _, works, _ in careers)
        report("works", careers[-1][0] + 1, plan.researchers)

    report("figures", 0, 1)
    async with conn.transaction():
        await refresh_researcher_figures(conn, None)
        await refresh_institution_figures(conn, None)
    await conn.execute("ANALYZE")
    report("figures", 1, 1)
    return DemoReport(plan.papers, plan.researchers, plan.institutions, works_total, time.monotonic() - started)


def _inverse(multiplier: int, modulus: int) -> Callable[[int], int]:
    inv = pow(multiplier, -1, modulus)
    return lambda v: ((v - 7_919) * inv) % modulus


# S2 ids are a bijection of the researcher index: inverting it per batch keeps no big dict in memory.
_S2_INVERSE = _inverse(982_451_653, 10**9)


def researcher_index(s2_author_id: str) -> int:
    """The index of the researcher a demo S2 author id was made for (`s2_author_id` inverted)."""
    return _S2_INVERSE(int(s2_author_id) - 1_000_000)


# ------------------------------------------------------------------------------------------------ command


async def run_demo_command(dsn: str, *, papers: int, seed: int, if_empty: bool, echo: Callable[[str], None]) -> int:
    """`wovepaper demo`: a progress bar on a terminal, plain lines otherwise; returns the exit code."""
    import sys

    conn = await asyncpg.connect(dsn)
    try:
        if if_empty and await count_papers(conn):
            echo("demo: the database already has papers; nothing to do (--if-empty)")
            return 0
        if sys.stderr.isatty():
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

            columns = (TextColumn("{task.description:<12}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
            with Progress(*columns, transient=False) as bar:
                tasks: dict[str, TaskID] = {}

                def show(stage: str, done: int, total: int) -> None:
                    if stage not in tasks:
                        tasks[stage] = bar.add_task(stage, total=total)
                    bar.update(tasks[stage], completed=done)

                result = await load_demo(conn, papers=papers, seed=seed, progress=show)
        else:
            last: dict[str, float] = {}

            def show(stage: str, done: int, total: int) -> None:
                # A line per stage start, end, and every ~10%, not a line per batch.
                step = done / total if total else 1.0
                if done in (0, total) or step - last.get(stage, 0.0) >= 0.1:
                    last[stage] = step
                    echo(f"demo: {stage} {done}/{total}")

            result = await load_demo(conn, papers=papers, seed=seed, progress=show)
    finally:
        await conn.close()
    echo(
        f"demo: {result.papers} papers, {result.researchers} researchers, {result.institutions} institutions, "
        f"{result.works} external works in {result.seconds:.1f} s"
    )
    return 0
