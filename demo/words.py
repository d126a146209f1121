"""Word banks for the demo dataset (names, institutions, categories, titles and abstracts) and the draws from them.

The banks are data, in words.json beside this module, read once at import. The draws take a seeded
`random.Random` and consume it in a fixed way, so a seed always gives the same words.
"""

from __future__ import annotations

import functools
import itertools
import json
import random
from collections.abc import Sequence
from pathlib import Path
from typing import Any

_DATA: dict[str, Any] = json.loads((Path(__file__).parent / "words.json").read_text(encoding="utf-8"))

# ------------------------------------------------------------------------------------------------ people

# (weight, given names, family names, how the full name is written); weights are shares of researchers.
_CULTURES: list[tuple[float, list[str], list[str], str]] = [(w, g, f, o) for w, g, f, o in _DATA["cultures"]]
_CULTURE_CUMULATIVE = list(itertools.accumulate(c[0] for c in _CULTURES))
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
    _, given, family, order = rng.choices(_CULTURES, cum_weights=_CULTURE_CUMULATIVE)[0]
    g, f = rng.choice(given), rng.choice(family)
    if order == "eastern":
        return f + g
    if order == "vietnamese":
        return f"{g} {f}"
    name = f"{g} {rng.choice(_MIDDLE)}. {f}" if rng.random() < 0.12 else f"{g} {f}"
    if given is _CULTURES[0][1] and rng.random() < 0.15:
        name += " " + rng.choice(_SUFFIXES)
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


def category(rng: random.Random) -> str:
    """A primary category, drawn by its share of arXiv."""
    return rng.choices(_CATEGORY_KEYS, cum_weights=_CATEGORY_CUMULATIVE)[0]


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
_DOI_PREFIXES: list[str] = _DATA["doi_prefixes"]


def _pick(rng: random.Random, items: Sequence[str]) -> str:
    # Cheaper than rng.choice, and the generator draws millions of these.
    return items[int(rng.random() * len(items))]


def _fill(rng: random.Random, template: str, field: str) -> str:
    bank = _BANK[field]
    obj, adj = _pick(rng, bank["object"]), _pick(rng, _ADJ)
    return template.format(
        object=obj,
        Object=obj[0].upper() + obj[1:],
        method=_pick(rng, bank["method"]),
        task=_pick(rng, bank["task"]),
        tex=_pick(rng, bank["tex"]),
        adj=adj.lower(),
        Adj=adj,
    )


def title(rng: random.Random, field: str) -> str:
    return _fill(rng, rng.choice(_TITLE_TEMPLATES), field)


def short_title(rng: random.Random) -> str:
    return title(rng, rng.choice(list(_BANK)))


def abstract(rng: random.Random, field: str) -> str:
    picks = rng.sample(_SENTENCES, rng.randint(4, 7))
    return " ".join(_fill(rng, s, field) for s in picks)


def summary(rng: random.Random, field: str, paper_title: str) -> str:
    return f"The paper addresses {paper_title[0].lower() + paper_title[1:]}. " + _fill(
        rng, rng.choice(_SENTENCES), field
    )


def topics(rng: random.Random, field: str) -> list[str]:
    bank = _BANK[field]
    return sorted(set(rng.sample(bank["object"], 2) + rng.sample(bank["method"], 1)))


def journal_ref(rng: random.Random, field: str, year: int) -> str:
    return f"{rng.choice(_JOURNALS[field])} {rng.randint(1, 120)} ({year + rng.randint(0, 1)}) {rng.randint(1, 9999)}"


def doi_suffix(rng: random.Random) -> str:
    r = rng.random()
    return f"{_DOI_PREFIXES[int(r * 6)]}.{100_000 + int(r * 1e12) % 9_900_000}"
