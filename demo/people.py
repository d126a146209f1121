"""The demo's plan and its people: institutions and researchers, by index.

Everything is drawn from `random.Random` streams seeded with the seed and the stream's name, and the
end date is fixed, so a seed always gives the same rows.
"""

from __future__ import annotations

import random
from array import array
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, date, datetime

import demo.words as W
from db.ids import ror_checksum
from db.records import InstitutionRecord, ResearcherRecord

DEFAULT_PAPERS = 20_000
DEFAULT_SEED = 42
START = datetime(1995, 1, 1, tzinfo=UTC)
END = datetime(2026, 11, 27, tzinfo=UTC)  # fixed, so the dataset does not change with the calendar
NEW_STYLE_FROM = date(2007, 4, 1)
FIVE_DIGITS_FROM = date(2015, 1, 1)
UNMATCHED_SHARE = 0.10
INSTITUTIONS = 500
_CROCKFORD = "0123456789abcdefghjkmnpqrstvwxyz"
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
    for _ in range(15):  # keeps the generator's stream as it was (randrange(10) fifteen times)
        rng._randbelow(10)  # type: ignore[attr-defined]
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


def _inverse(multiplier: int, modulus: int) -> Callable[[int], int]:
    inv = pow(multiplier, -1, modulus)
    return lambda v: ((v - 7_919) * inv) % modulus


# S2 ids are a bijection of the researcher index: inverting it per batch keeps no big dict in memory.
_S2_INVERSE = _inverse(982_451_653, 10**9)


def researcher_index(s2_author_id: str) -> int:
    """The index of the researcher a demo S2 author id was made for (`s2_author_id` inverted)."""
    return _S2_INVERSE(int(s2_author_id) - 1_000_000)
