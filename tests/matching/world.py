"""A generated world for author matching: people, the papers they write, and how each source prints and
identifies them, with every kind of trouble the matching meets. The ground truth (who is at each position) comes
from these definitions alone.

Kinds (each position carries one, for the figures per kind):
- plain: printed in full or with initials, S2 in full.
- homonym: two people printed alike on one paper (`M. Müller` twice, `Li Li` twice), S2 listing them in the
  other order.
- transliteration: `Maksim` on arXiv, `Maxim` at S2 (and the like).
- accents: `Jürgen Müller` against `Juergen Mueller` / `Jurgen Muller`, arXiv sometimes in TeX.
- hyphenated: `Anna Campbell-White` against `Anna Campbell`, `José García López` against `José García`.
- family_first: `Fu Haoran` on arXiv, `H. Fu` or `Haoran Fu` at S2.
- tex: S2's name still in TeX (`M{\\"u}ller`).
- double_initial: one initial printed twice (`X. Yang` twice), one of the two without an S2 profile.
- namesake: `Zhi-wei Du` beside `Zhiwei Du`, the second without an S2 profile.
- merged: S2 lists an old id of the person, which S2 answers with the survivor's record (in phase 2 for ids that
  had a profile of their own in phase 1, from the start for others).
- no_s2: people S2 knows by no id at all (OpenAlex does).
- dropped: a position S2's list leaves out (OpenAlex has it).
"""

from __future__ import annotations

import hashlib
import random
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta

from db.ids import ror_checksum

KINDS = (
    "plain",
    "homonym",
    "transliteration",
    "accents",
    "hyphenated",
    "family_first",
    "tex",
    "double_initial",
    "namesake",
    "merged",
    "no_s2",
    "dropped",
)

GIVEN = (
    "James Mary Robert Patricia John Jennifer Michael Linda David Elizabeth William Barbara Richard Susan Joseph "
    "Jessica Thomas Sarah Charles Karen Daniel Lisa Matthew Nancy Anthony Betty Mark Sandra Paul Ashley Steven "
    "Emily Andrew Donna Kenneth Michelle Joshua Carol Kevin Amanda Brian Melissa George Deborah Timothy Stephanie "
    "Ronald Rebecca Edward Laura Jason Helen Jeffrey Sharon Ryan Cynthia Jacob Kathleen Gary Amy Nicholas Angela "
    "Eric Shirley Jonathan Anna Stephen Brenda Larry Pamela Justin Emma Scott Nicole Brandon Samantha Benjamin "
    "Katherine Samuel Christine Gregory Debra Frank Carolyn Patrick Janet Raymond Catherine Jack Maria Dennis Heather"
).split()
FAMILY = (
    "Smith Johnson Williams Brown Jones Miller Davis Wilson Anderson Thomas Taylor Moore Jackson Martin Thompson "
    "Harris Clark Lewis Robinson Walker Young Allen King Wright Scott Hill Green Adams Nelson Baker Hall Mitchell "
    "Carter Roberts Fischer Weber Meyer Wagner Becker Schulz Hoffmann Koch Richter Klein Wolf Neumann Schwarz "
    "Zimmermann Braun Hartmann Lange Werner Krause Lehmann Dubois Moreau Laurent Lefebvre Leroy Roux Bertrand Morel "
    "Fournier Girard Bonnet Rossi Russo Ferrari Esposito Bianchi Romano Colombo Ricci Marino Greco Gallo Conti Costa "
    "Giordano Novak Horvat Kowalski Nowak Jensen Hansen Larsen Nilsson Berg Lindqvist Virtanen Korhonen Murphy Kelly"
).split()
CN_FAMILY = (
    "Wang Li Zhang Liu Chen Yang Huang Zhao Wu Zhou Xu Sun Ma Zhu Hu Guo He Lin Luo Gao Zheng Liang Xie Tang Han "
    "Cao Deng Feng Zeng Peng Xiao Cai Pan Tian Dong Yuan Jiang Lu Fu Du"
).split()
CN_GIVEN = (
    "Wei Fang Xiaoming Haoran Yichen Zihan Yuxuan Jiaqi Zhiwei Xinyi Hao Jing Lei Min Tao Yan Qiang Bo Chao Yun "
    "Shuai Ming Xin Jie Kai Rui Peng Hui Ling Yue Tianyu Ruoxi Junjie Mengyao"
).split()
RU_GIVEN = (
    ("Maksim", "Maxim"),
    ("Aleksandr", "Alexander"),
    ("Sergei", "Sergey"),
    ("Dmitry", "Dmitrii"),
    ("Yuri", "Iurii"),
    ("Andrei", "Andrey"),
    ("Aleksei", "Alexey"),
    ("Evgeny", "Yevgeny"),
    ("Nikolai", "Nikolay"),
    ("Mikhail", "Michail"),
    ("Tatiana", "Tatyana"),
    ("Natalia", "Natalya"),
    ("Elena", "Yelena"),
    ("Ksenia", "Kseniya"),
)
RU_FAMILY = (
    "Ivanov Petrov Smirnov Kuznetsov Popov Sokolov Lebedev Kozlov Novikov Morozov Volkov Vasiliev Zaitsev Pavlov "
    "Semenov Golubev Vinogradov Bogdanov Orlov Egorov"
).split()
ACCENTED = (
    ("Jürgen", "Müller"),
    ("Jörg", "Schäfer"),
    ("Zoë", "Dubé"),
    ("José", "Núñez"),
    ("François", "Lefèvre"),
    ("Björn", "Öberg"),
    ("Gérard", "Ménard"),
    ("Ana", "Peña"),
    ("Tomás", "Ruíz"),
    ("Günter", "Köhler"),
    ("Hélène", "Béranger"),
    ("Sören", "Großmann"),
    ("Ülkü", "Öztürk"),
    ("Inés", "Martínez"),
)
HYPHENATED = (
    ("Anna", "Campbell", "White"),
    ("Laura", "Smith", "Jones"),
    ("Claire", "Dupont", "Moretti"),
    ("Sarah", "Lloyd", "Evans"),
    ("Peter", "Weber", "Stein"),
    ("Marta", "Garcia", "Lopez"),
    ("Carlos", "Fernandez", "Ruiz"),
    ("Lucia", "Sanchez", "Vidal"),
    ("Oliver", "Hughes", "Hallett"),
    ("Emma", "Brooke", "Taylor"),
)
HU_NAMES = (("Péter", "Nagy"), ("Zsófia", "Kovács"), ("László", "Tóth"), ("Eszter", "Szabó"), ("Gábor", "Horváth"))
INSTITUTIONS = tuple(f"0mw{n:04d}" + ror_checksum(f"0mw{n:04d}") for n in range(24))

T0 = datetime(2023, 1, 2, 9, 0, tzinfo=UTC)


def fold(s: str) -> str:
    table = str.maketrans("äöüÄÖÜéèêëáàíìóòúùñçÉÁÍÓÚßőűøåæ", "aouAOUeeeeaaiioouuncEAIOUsouoaa")
    return s.translate(table).replace("ss", "ss")


def ue_form(s: str) -> str:
    for a, b in (("ä", "ae"), ("ö", "oe"), ("ü", "ue"), ("Ä", "Ae"), ("Ö", "Oe"), ("Ü", "Ue"), ("ß", "ss")):
        s = s.replace(a, b)
    return fold(s)


_TEX = {"ä": '\\"a', "ö": '\\"o', "ü": '\\"u', "é": "\\'e", "è": "\\`e", "á": "\\'a", "í": "\\'i", "ó": "\\'o"}
_TEX |= {"ú": "\\'u", "ñ": "\\~n", "ç": "\\c{c}", "ë": '\\"e', "Ö": '\\"O', "Ü": '\\"U', "ß": "\\ss{}"}


def tex(s: str) -> str:
    """How arXiv and S2 sometimes keep a name: `M{\\"u}ller`."""
    return "".join("{" + _TEX[ch] + "}" if ch in _TEX else ch for ch in s)


def initials(given: str) -> str:
    return " ".join(part[0] + "." for part in given.replace("-", " ").split())


@dataclass(frozen=True)
class Person:
    key: str
    given: str
    family: str
    kind: str
    s2: str | None  # the S2 author id (None: no S2 profile)
    openalex: str | None
    orcid: str | None
    ror: str
    variant: str | None = None  # transliteration: the other form of the given name
    family_first: bool = False  # printed family name first on arXiv
    old_s2: str | None = None  # merged: the old id S2 merged into `s2`
    merged_in_phase: int = 1  # merged: from which phase S2 answers the old id with the survivor

    @property
    def name(self) -> str:
        return f"{self.given} {self.family}"


@dataclass(frozen=True)
class Slot:
    """One author position as each source prints and identifies it."""

    person: str | None  # None: a collaboration
    kind: str
    arxiv: str
    s2_name: str
    s2_id: str | None  # what S2's paper list gives (an old merged id sometimes)
    oa_raw: str
    in_s2: bool = True  # S2's list leaves some positions out


@dataclass(frozen=True)
class Paper:
    arxiv_id: str
    title: str
    published: datetime
    slots: tuple[Slot, ...]
    s2_swap: tuple[int, int] | None = None  # S2 lists these two positions (0-based) in the other order
    s2_known: bool = True
    oa_known: bool = True
    phase: int = 1

    @property
    def s2_paper_id(self) -> str:
        return hashlib.sha1(self.arxiv_id.encode()).hexdigest()

    @property
    def openalex_work(self) -> str:
        return f"W8{int(hashlib.sha1(self.arxiv_id.encode()).hexdigest()[:8], 16)}"


@dataclass
class World:
    people: dict[str, Person] = field(default_factory=dict)
    papers: list[Paper] = field(default_factory=list)

    def papers_in(self, phase: int) -> list[Paper]:
        return [p for p in self.papers if p.phase <= phase]

    def s2_answer(self, asked: str, phase: int) -> str | None:
        """The S2 id S2 answers `asked` with (None: unknown)."""
        for p in self.people.values():
            if p.s2 == asked:
                return asked
            if p.old_s2 == asked:
                return p.s2 if phase >= p.merged_in_phase else asked
        return None


class _Gen:
    def __init__(self, seed: int) -> None:
        self.rnd = random.Random(seed)
        self.world = World()
        self.names: set[str] = set()
        self.next_s2 = 5_000_000
        self.next_oa = 5_000_000

    def _ids(self, *, s2: bool = True) -> tuple[str | None, str | None, str | None]:
        self.next_s2 += self.rnd.randint(1, 40)
        self.next_oa += self.rnd.randint(1, 40)
        openalex = f"A{self.next_oa}" if self.rnd.random() < 0.95 else None
        orcid = None
        if self.rnd.random() < 0.4:
            n = self.rnd.randint(0, 10**12)
            orcid = f"0000-000{n % 10}-{n // 10 % 10000:04d}-{n // 100000 % 10000:04d}"
        return (str(self.next_s2) if s2 else None), openalex, orcid

    def person(self, given: str, family: str, kind: str, *, s2: bool = True, unique: bool = True, **kw: object) -> str:
        name = f"{given} {family}"
        if unique:
            if fold(name).lower() in self.names:
                return ""
            self.names.add(fold(name).lower())
        s2_id, openalex, orcid = self._ids(s2=s2)
        key = f"p{len(self.world.people)}"
        self.world.people[key] = Person(
            key,
            given,
            family,
            kind,
            s2_id,
            openalex,
            orcid,
            self.rnd.choice(INSTITUTIONS),
            **kw,  # type: ignore[arg-type]
        )
        return key

    # -- how each source prints a person ---------------------------------------------------------------------

    def forms(self, p: Person) -> tuple[str, str, str]:
        """(arXiv, S2, OpenAlex raw) for one appearance."""
        r = self.rnd
        full = p.name
        if p.kind == "transliteration":
            arxiv_given, s2_given = (p.given, p.variant) if r.random() < 0.5 else (p.variant, p.given)
            return f"{arxiv_given} {p.family}", f"{s2_given} {p.family}", f"{arxiv_given} {p.family}"
        if p.kind == "accents":
            plain = ue_form(full) if r.random() < 0.5 else fold(full)
            choice = r.random()
            if choice < 0.35:
                return plain, full, plain
            if choice < 0.7:
                return tex(full), plain, full
            return full, plain, full
        if p.kind == "tex":
            return full, tex(full), full
        if p.kind == "hyphenated":
            short = f"{p.given} {p.family.split('-')[0].split(' ')[0]}"
            if r.random() < 0.5:
                return full, short, full
            return short, full, short
        if p.kind == "family_first":
            reversed_ = f"{p.family} {p.given}"
            s2 = f"{p.given[0]}. {p.family}" if r.random() < 0.5 else full
            return reversed_, s2, reversed_
        if r.random() < 0.3:
            short = f"{initials(p.given)} {p.family}"
            return short, full, short
        return full, full, full

    def slot(self, key: str, kind: str | None = None) -> Slot:
        p = self.world.people[key]
        arxiv, s2_name, raw = self.forms(p)
        s2_id = p.s2
        if p.old_s2 and self.rnd.random() < 0.6:
            s2_id = p.old_s2
        return Slot(key, kind or p.kind, arxiv, s2_name, s2_id, raw)


def generate(seed: int = 39, papers: int = 300, plain_people: int = 260) -> World:
    g = _Gen(seed)
    r = g.rnd
    w = g.world
    plain: list[str] = []
    while len(plain) < plain_people:
        if r.random() < 0.3:
            k = g.person(r.choice(CN_GIVEN), r.choice(CN_FAMILY), "plain")
        else:
            k = g.person(r.choice(GIVEN), r.choice(FAMILY), "plain")
        if k:
            plain.append(k)
    special: list[str] = []
    for given, variant in RU_GIVEN:
        k = g.person(given, r.choice(RU_FAMILY), "transliteration", variant=variant)
        special += [k] if k else []
    for given, family in ACCENTED:
        special.append(g.person(given, family, "accents"))
    for given, family in ACCENTED[:6]:
        special.append(g.person(given, family + "er", "tex"))
    for given, a, b in HYPHENATED:
        special.append(g.person(given, f"{a}-{b}" if r.random() < 0.7 else f"{a} {b}", "hyphenated"))
    for _ in range(10):
        k = g.person(r.choice(CN_GIVEN), r.choice(CN_FAMILY), "family_first", family_first=True)
        special += [k] if k else []
    for given, family in HU_NAMES:
        special.append(g.person(given, family, "family_first", family_first=True))
    no_s2 = [k for k in (g.person(r.choice(GIVEN), r.choice(FAMILY), "no_s2", s2=False) for _ in range(18)) if k]
    merged: list[str] = []
    for n in range(12):
        k = g.person(r.choice(GIVEN), r.choice(FAMILY), "merged")
        if not k:
            continue
        p = w.people[k]
        g.next_s2 += 3
        w.people[k] = replace(p, old_s2=str(g.next_s2), merged_in_phase=2 if n % 2 else 1)
        merged.append(k)
    everyone = plain + [k for k in special if k] + no_s2 + merged

    def draw(n: int, avoid: set[str]) -> list[str]:
        picked: list[str] = []
        taken = {(fold(w.people[k].family).lower(), w.people[k].given[0]) for k in avoid}
        while len(picked) < n:
            k = r.choice(everyone)
            p = w.people[k]
            sig = (fold(p.family).lower().split("-")[0].split(" ")[0], p.given[0])
            if k in avoid or k in picked or sig in taken:
                continue
            taken.add(sig)
            picked.append(k)
        return picked

    def add(slots: list[Slot], **kw: object) -> None:
        n = len(w.papers)
        phase = int(kw.pop("phase", 1))  # type: ignore[call-overload]
        day = n if phase == 1 else 400 + n
        arxiv_id = f"{23 + day // 300:02d}{(day % 12) + 1:02d}.{10000 + n:05d}"
        w.papers.append(
            Paper(
                arxiv_id,
                f"On problem {n} of the matching world",
                T0 + timedelta(days=day, hours=n % 24),
                tuple(slots),
                s2_known=r.random() < 0.96,
                oa_known=r.random() < 0.92,
                phase=phase,
                **kw,  # type: ignore[arg-type]
            )
        )

    # Ordinary papers: every person on several.
    for n in range(papers):
        phase = 2 if n >= papers * 0.85 else 1
        members = draw(r.randint(2, 6), set())
        slots = [g.slot(k) for k in members]
        if r.random() < 0.05:
            slots.insert(
                r.randrange(len(slots) + 1), Slot(None, "plain", "The NOVA Collaboration", "NOVA Collab", None, "")
            )
        if r.random() < 0.04 and len(slots) > 2:
            i = r.randrange(len(slots))
            if slots[i].person is not None:
                slots[i] = replace(slots[i], in_s2=False, kind="dropped")
        add(slots, phase=phase)
    # People who must appear more: the special kinds, on a few papers of their own each.
    for k in [k for k in special if k] + no_s2 + merged:
        for _ in range(r.randint(1, 3)):
            add([g.slot(x) for x in [k, *draw(r.randint(1, 3), {k})]], phase=1 if r.random() < 0.8 else 2)
    # Merged ids: old ids on phase-2 papers too (S2 still lists them there).
    for k in merged:
        p = w.people[k]
        add([replace(g.slot(k), s2_id=p.old_s2), *(g.slot(x) for x in draw(2, {k}))], phase=2)
    # Homonyms: two people printed alike on one paper, S2 listing them swapped.
    pairs = [
        (("Markus", "Müller"), ("Martin", "Müller"), "M. Müller"),
        (("Li", "Li"), ("Li", "Li"), "Li Li"),
        (("María", "García"), ("María", "García"), "María García"),
        (("Wei", "Zhang"), ("Wei", "Zhang"), "Wei Zhang"),
        (("Jian", "Wang"), ("Jun", "Wang"), "J. Wang"),
        (("Hiroshi", "Tanaka"), ("Hiroshi", "Tanaka"), "Hiroshi Tanaka"),
        (("Sarah", "Kim"), ("Soo", "Kim"), "S. Kim"),
        (("Anna", "Nowak"), ("Agnieszka", "Nowak"), "A. Nowak"),
    ]
    for (g1, f1), (g2, f2), printed in pairs:
        a = g.person(g1, f1, "plain", unique=False)
        b = g.person(g2, f2, "plain", unique=False)
        for k in (a, b):
            for _ in range(r.randint(2, 3)):
                add([g.slot(k), *(g.slot(x) for x in draw(r.randint(1, 3), {a, b}))])
        for _ in range(r.randint(1, 2)):
            others = draw(r.randint(1, 3), {a, b})
            slots = [g.slot(x) for x in others]
            i, j = sorted(r.sample(range(len(slots) + 2), 2))
            homs = [
                Slot(a, "homonym", printed, printed, w.people[a].s2, printed),
                Slot(b, "homonym", printed, printed, w.people[b].s2, printed),
            ]
            slots.insert(i, homs[0])
            slots.insert(j, homs[1])
            add(slots, s2_swap=(i, j), phase=1 if r.random() < 0.7 else 2)
    # One initial printed twice, one of the two without an S2 profile.
    for g1, g2, family in (
        ("Xiaoming", "Xin", "Yang"),
        ("Jianhua", "Jing", "Liu"),
        ("Robert", "Rachel", "Keller"),
        ("Daniel", "David", "Ortega"),
        ("Haoyu", "Hong", "Sun"),
        ("Pierre", "Paul", "Martel"),
    ):
        a = g.person(g1, family, "plain", unique=False)
        b = g.person(g2, family, "no_s2", s2=False, unique=False)
        for k in (a, b):
            for _ in range(r.randint(1, 3)):
                add([g.slot(k), *(g.slot(x) for x in draw(r.randint(1, 3), {a, b}))])
        printed = f"{g1[0]}. {family}"
        others = [g.slot(x) for x in draw(r.randint(1, 3), {a, b})]
        i, j = sorted(r.sample(range(len(others) + 2), 2))
        others.insert(i, Slot(a, "double_initial", printed, printed, w.people[a].s2, printed))
        others.insert(j, Slot(b, "double_initial", printed, printed, None, printed))
        add(others, s2_swap=(i, j) if r.random() < 0.5 else None)
    # A namesake without a profile beside the one with.
    for (g1, f1), g2 in (
        (("Zhi-wei", "Du"), "Zhiwei"),
        (("Xiao-Li", "Meng"), "Xiaoli"),
        (("Jae-Hoon", "Park"), "Jaehoon"),
        (("Yu-Ting", "Chen"), "Yuting"),
        (("Hai-Bo", "Lin"), "Haibo"),
    ):
        a = g.person(g1, f1, "plain", unique=False)
        b = g.person(g2, f1, "no_s2", s2=False, unique=False)
        for k in (a, b):
            for _ in range(r.randint(1, 3)):
                add([g.slot(k), *(g.slot(x) for x in draw(r.randint(1, 3), {a, b}))])
        others = [g.slot(x) for x in draw(r.randint(1, 3), {a, b})]
        i, j = sorted(r.sample(range(len(others) + 2), 2))
        pa, pb = w.people[a], w.people[b]
        others.insert(i, Slot(a, "namesake", pa.name, pa.name, pa.s2, pa.name))
        others.insert(j, Slot(b, "namesake", pb.name, pb.name, None, pb.name))
        add(others)
    return w
