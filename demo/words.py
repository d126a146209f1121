"""Word banks for the demo dataset (names, institutions, categories, titles and abstracts) and the draws from them.

The banks are data, in words.json beside this module, read once at import. The draws take a seeded
`random.Random` and consume it in a fixed way, so a seed always gives the same words. The hot ones call what
`random` itself would (`choice(s)` is `s[_randbelow(len(s))]`, `randint(a, b)` is `a + _randbelow(b - a + 1)`):
the same numbers, without the wrappers' cost over millions of draws.
"""

from __future__ import annotations

import functools
import itertools
import json
import random
from bisect import bisect
from collections.abc import Sequence
from pathlib import Path
from typing import Any

_DATA: dict[str, Any] = json.loads((Path(__file__).parent / "words.json").read_text(encoding="utf-8"))

# ------------------------------------------------------------------------------------------------ people

# (weight, given names, family names, how the full name is written); weights are shares of researchers.
_CULTURES: list[tuple[float, list[str], list[str], str]] = [(w, g, f, o) for w, g, f, o in _DATA["cultures"]]
_CULTURE_CUMULATIVE = list(itertools.accumulate(c[0] for c in _CULTURES))
_CULTURE_TOTAL = _CULTURE_CUMULATIVE[-1] + 0.0
_LAST_CULTURE = len(_CULTURES) - 1
_SUFFIXES: list[str] = _DATA["suffixes"]
_MIDDLE: str = _DATA["middle_initials"]
COLLABORATIONS: list[str] = _DATA["collaborations"]
# [name, country, type, aliases]
REAL_INSTITUTIONS: list[tuple[str, str, str, Sequence[str]]] = [tuple(i) for i in _DATA["real_institutions"]]
# [city, country, language of its institutions' names]
CITIES: list[tuple[str, str, str]] = [tuple(c) for c in _DATA["cities"]]
INSTITUTION_PATTERNS: dict[str, list[tuple[str, str]]] = {
    lang: [tuple(p) for p in patterns] for lang, patterns in _DATA["institution_patterns"].items()
}


def person_name(rng: random.Random) -> str:
    """A real-looking name: diacritics, romanized and native scripts, the odd middle initial or suffix."""
    # rng.choices(_CULTURES, cum_weights=...)[0] and rng.choice(s), with the numbers they draw (see _randbelow).
    rb = rng._randbelow  # type: ignore[attr-defined]
    _, given, family, order = _CULTURES[bisect(_CULTURE_CUMULATIVE, rng.random() * _CULTURE_TOTAL, 0, _LAST_CULTURE)]
    g, f = given[rb(len(given))], family[rb(len(family))]
    if order == "eastern":
        return f + g  # type: ignore[no-any-return]
    if order == "vietnamese":
        return f"{g} {f}"
    name = f"{g} {_MIDDLE[rb(len(_MIDDLE))]}. {f}" if rng.random() < 0.12 else f"{g} {f}"
    if given is _CULTURES[0][1] and rng.random() < 0.15:
        name += " " + _SUFFIXES[rb(len(_SUFFIXES))]
    return name


def initialled(name: str) -> str:
    """`Jana Müller` -> `J. Müller`, the way many papers list authors; names without spaces stay."""
    parts = name.split(" ")
    if len(parts) < 2 or parts[-1] in _SUFFIXES:
        return name
    return " ".join([p if p.endswith(".") else p[0] + "." for p in parts[:-1]] + parts[-1:])


def acronym(name: str) -> str:
    letters = [w[0] for w in name.replace(",", "").split() if w[0].isupper()]
    return "".join(letters) or name[:4].upper()


# ------------------------------------------------------------------------------------------- categories

CATEGORIES: list[tuple[str, float]] = [tuple(c) for c in _DATA["categories"]]  # with their shares of arXiv
CATEGORY_SINCE: dict[str, int] = _DATA["category_since"]
CROSS_LISTS: dict[str, tuple[str, ...]] = {k: tuple(v) for k, v in _DATA["cross_lists"].items()}
_FIELDS: dict[str, str] = _DATA["fields"]


def field_of(category: str) -> str:
    if category in _FIELDS:
        return _FIELDS[category]
    head = category.split(".")[0]
    return {"math": "math", "astro-ph": "astro", "cond-mat": "condmat", "q-bio": "bio"}.get(head, "ml")


@functools.cache
def archive_share(archive: str, year: int) -> float:
    """The share of a year's papers whose primary category is in `archive` (`cs`, `hep-th`, ...)."""
    live = [(c, w) for c, w in CATEGORIES if CATEGORY_SINCE.get(c, 1995) <= year]
    return sum(w for c, w in live if c.split(".")[0] == archive) / sum(w for _, w in live)


_CATEGORY_KEYS = [k for k, _ in CATEGORIES]
_CATEGORY_CUMULATIVE = list(itertools.accumulate(w for _, w in CATEGORIES))
_CATEGORY_TOTAL = _CATEGORY_CUMULATIVE[-1] + 0.0


def category(rng: random.Random) -> str:
    """A primary category, drawn by its share of arXiv."""
    return _CATEGORY_KEYS[bisect(_CATEGORY_CUMULATIVE, rng.random() * _CATEGORY_TOTAL, 0, len(_CATEGORY_KEYS) - 1)]


# --------------------------------------------------------------------------------------------- text

_BANK: dict[str, dict[str, list[str]]] = _DATA["bank"]
_ADJ: list[str] = _DATA["adjectives"]
_TITLE_TEMPLATES: list[str] = _DATA["title_templates"]
_SENTENCES: list[str] = _DATA["sentences"]
# Kinds from db.records.PAPER_TYPES; six of them, as many as before, so the generator draws the same numbers.
PAPER_TYPES: list[str] = _DATA["paper_types"]
NOVELTY: list[str] = _DATA["novelty"]
RESEARCH_FIELDS: dict[str, str] = _DATA["research_fields"]
LICENSES: list[str] = _DATA["licenses"]
_JOURNALS: dict[str, list[str]] = _DATA["journals"]
DOI_PREFIXES: list[str] = _DATA["doi_prefixes"]


def _pick(rng: random.Random, items: Sequence[str]) -> str:
    # Cheaper than rng.choice, and the generator draws millions of these.
    return items[int(rng.random() * len(items))]


def _fill(rng: random.Random, template: str, field: str) -> str:
    # Five draws whatever the template uses, in this order (`_pick`, inlined: millions of calls).
    bank = _BANK[field]
    r = rng.random
    objects, methods, tasks, texs = bank["object"], bank["method"], bank["task"], bank["tex"]
    obj, adj = objects[int(r() * len(objects))], _ADJ[int(r() * len(_ADJ))]
    return template.format(
        object=obj,
        Object=obj[0].upper() + obj[1:],
        method=methods[int(r() * len(methods))],
        task=tasks[int(r() * len(tasks))],
        tex=texs[int(r() * len(texs))],
        adj=adj.lower(),
        Adj=adj,
    )


def title(rng: random.Random, field: str) -> str:
    return _fill(rng, _TITLE_TEMPLATES[rng._randbelow(len(_TITLE_TEMPLATES))], field)  # type: ignore[attr-defined]


def short_title(rng: random.Random) -> str:
    return title(rng, rng.choice(list(_BANK)))


def abstract(rng: random.Random, field: str) -> str:
    picks = rng.sample(_SENTENCES, 4 + rng._randbelow(4))  # type: ignore[attr-defined]  # randint(4, 7)
    return " ".join(_fill(rng, s, field) for s in picks)


def summary(rng: random.Random, field: str, paper_title: str) -> str:
    return f"The paper addresses {paper_title[0].lower() + paper_title[1:]}. " + _fill(
        rng, rng.choice(_SENTENCES), field
    )


def topics(rng: random.Random, field: str) -> list[str]:
    bank = _BANK[field]
    return sorted(set(rng.sample(bank["object"], 2) + rng.sample(bank["method"], 1)))


def journal_ref(rng: random.Random, field: str, year: int) -> str:
    rb, journals = rng._randbelow, _JOURNALS[field]  # type: ignore[attr-defined]
    return f"{journals[rb(len(journals))]} {1 + rb(120)} ({year + rb(2)}) {1 + rb(9999)}"


def doi_suffix(rng: random.Random) -> str:
    r = rng.random()
    return f"{DOI_PREFIXES[int(r * 6)]}.{100_000 + int(r * 1e12) % 9_900_000}"
