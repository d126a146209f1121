"""Person names for matching: each form parsed once into tokens, and a score of how well two forms can name one person.

What the sources do to a name, and what the score forgives: accents and their ASCII forms (`Müller` / `Muller` /
`Mueller`), transliteration variants (`Maksim` / `Maxim`, `Yuri` / `Iurii`, `Sergei` / `Sergey`), hyphenated and
multi-part surnames (`Campbell` / `Campbell-White`, `García López` / `García`), family name first (`Fu Haoran` /
`H. Fu`), initials against forenames (`J.-P.` / `Jean-Pierre`), hyphenated or joined given names (`Zhi-wei` /
`Zhiwei`) and TeX left in a name (`M{\\"u}ller`). What it does not forgive: two different forenames, two different
middle initials, two different surnames.

The score is graded so that the closer form wins when two people on one paper have similar names: the same text
(1.0) beats the same letters (`Zhi-wei Du` / `Zhiwei Du`, 0.985), which beats a variant (at most 0.975).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

from anyascii import anyascii
from rapidfuzz.distance import Levenshtein

from ingest.parsers.text import detex

EXACT = 1.0
FOLDED = 0.985  # the same letters; accents, case, hyphens or dots differ
VARIANT_CAP = 0.975  # anything weaker than the same letters stays below FOLDED
THRESHOLD = 0.6  # below this two forms are not taken to name one person

# Token levels.
_SAME = 1.0
_PHONETIC = 0.96  # transliteration or umlaut variant
_FUZZY = 0.88  # one edit apart (two for long names) after the phonetic key
_INITIAL = 0.9  # an initial against a forename, or two equal initials
# Leftover factors.
_EXTRA_INITIAL = 0.95
_EXTRA_GIVEN = 0.88
_EXTRA_FAMILY = 0.9  # `Campbell-White` against `Campbell`, `García López` against `García`
_NO_GIVEN = 0.75  # `Smith` against `John Smith`
_CONFLICTING_INITIALS = 0.5
_REORDERED = 0.97  # family name first on one side only

_SUFFIXES = frozenset({"jr", "sr", "ii", "iii", "iv", "phd", "md"})
_TITLES = frozenset({"dr", "prof", "mr", "mrs", "ms"})
# Lower-case words that lead a surname; optional when one form omits them (`Ludwig van Beethoven` / `Ludwig
# Beethoven`). Only a particle followed by another word counts (`Zhiwei Du` ends in a surname, not a particle).
_PARTICLES = frozenset(
    {"van", "von", "der", "den", "de", "del", "della", "di", "da", "dos", "das", "du", "la", "le", "ter", "ten", "zu"}
)
_WORD_SPLIT = re.compile(r"[\s\u00a0]+")
_PART_SPLIT = re.compile(r"[-\u2010\u2011\u2012\u2013\u2014]+")
_NOT_KEY = re.compile(r"[^a-z0-9]+")
_VOWELS = frozenset("aeiouy")


@dataclass(frozen=True, slots=True)
class Tok:
    key: str  # ASCII, lower case, letters and digits only
    ph: str  # phonetic key: transliteration and umlaut variants agree
    initial: bool
    word: int  # which word of the name (words are split at spaces)
    part: int  # which hyphen part of its word
    parts: int  # how many hyphen parts its word has
    particle: bool


@dataclass(frozen=True, slots=True)
class Name:
    text: str  # detexed, whitespace collapsed, case folded: the form as printed
    folded: str  # the token keys joined: the letters alone
    toks: tuple[Tok, ...]
    words: int

    def __bool__(self) -> bool:
        return bool(self.toks)


def phonetic(key: str) -> str:
    """A key on which common transliteration and umlaut variants agree: `maksim`/`maxim`, `iurii`/`yuri`/`jurij`,
    `sergej`/`sergey`, `mueller`/`muller`, `tschernow`/`chernov`, `yevgeny`/`evgenii`."""
    if len(key) <= 1:
        return key
    k = key
    for a, b in (("tsch", "ch"), ("tch", "ch"), ("sch", "sh"), ("ks", "x"), ("kh", "h"), ("ph", "f"), ("ck", "k")):
        if a in k:
            k = k.replace(a, b)
    k = k.replace("w", "v")
    for a, b in (("ae", "a"), ("oe", "o"), ("ue", "u")):
        if a in k:
            k = k.replace(a, b)
    # A leading y/i/j before a vowel is one sound: Yelena/Elena, Iurii/Yuri/Jurij, Jakov/Yakov.
    if len(k) > 1 and k[0] in "yij" and k[1] in "aeiou":
        k = k[1:] if k[1] == "e" else "y" + k[1:]
    k = k[0] + k[1:].replace("j", "i").replace("y", "i")
    out = [k[0]]
    for ch in k[1:]:
        if ch != out[-1]:
            out.append(ch)
    return "".join(out)


def _clean(name: str) -> str:
    if "\\" in name or "{" in name:
        name = detex(name).replace("{", "").replace("}", "")
    return " ".join(name.split())


def _reorder_comma(s: str) -> str:
    """`Family, Given` (OpenAlex raw names, some S2 names) -> `Given Family`; `John Smith, Jr.` loses the suffix."""
    if "," not in s:
        return s
    head, _, tail = s.partition(",")
    if _NOT_KEY.sub("", anyascii(tail).lower()) in _SUFFIXES or not tail.strip():
        return head
    if "," in tail:
        return s.replace(",", " ")
    return f"{tail.strip()} {head.strip()}"


# A name recurs on every paper of its author, in up to four forms a paper (arXiv's, S2's, OpenAlex's two): parsed
# once. Bounded: PARSED_CACHE names of at most PARSED_NAME_MAX characters (a longer one is parsed each time).
PARSED_CACHE = 16_384
MAX_WORDS = 12
PARSED_NAME_MAX = 160


def parse_name(name: str | None) -> Name:
    """A name's tokens; the same string gives the same (immutable) Name."""
    if not name:
        return _EMPTY
    if len(name) > PARSED_NAME_MAX:
        return _parse(name)
    return _parse_cached(name)


def _parse(name: str) -> Name:
    s = _clean(name)
    if not s:
        return Name("", "", (), 0)
    text = s.casefold()
    s = _reorder_comma(s)
    raw_words = [w for w in _WORD_SPLIT.split(anyascii(s)) if w]
    words: list[list[tuple[str, bool]]] = []  # per word: (key, initial)
    for w in raw_words:
        parts: list[tuple[str, bool]] = []
        for p in _PART_SPLIT.split(w):
            if not p:
                continue
            pieces = [x for x in p.split(".") if x]
            if len(pieces) > 1 or p.endswith("."):
                # `J.P.`, `Ch.`: each piece an initial (an abbreviation counts by its first letter).
                parts += [(k[0], True) for x in pieces if (k := _NOT_KEY.sub("", x.lower()))]
                continue
            letters = _NOT_KEY.sub("", p.lower())
            if not letters:
                continue
            # `JP Smith`: capitals without a vowel are initials; `LI Wei` is a surname in capitals.
            if 1 < len(p) <= 3 and p.isupper() and not (set(letters) & _VOWELS):
                parts += [(ch, True) for ch in letters]
            else:
                parts.append((letters, len(letters) == 1))
        if parts:
            words.append(parts[:MAX_WORDS])
    # No name has more parts than this; a longer string (an upstream's error) is cut, so comparing costs little.
    del words[MAX_WORDS:]
    while words and len(words) > 1 and len(words[-1]) == 1 and words[-1][0][0] in _SUFFIXES:
        words.pop()
    while words and len(words) > 1 and len(words[0]) == 1 and words[0][0][0] in _TITLES:
        words.pop(0)
    toks: list[Tok] = []
    for wi, parts in enumerate(words):
        particle = len(parts) == 1 and parts[0][0] in _PARTICLES and wi < len(words) - 1
        for pi, (key, initial) in enumerate(parts):
            toks.append(Tok(key, phonetic(key), initial, wi, pi, len(parts), particle))
    return Name(text, "".join(t.key for t in toks), tuple(toks), len(words))


_EMPTY = Name("", "", (), 0)
_parse_cached = lru_cache(maxsize=PARSED_CACHE)(_parse)


def _tok_sim(a: Tok, b: Tok) -> float:
    """Two full tokens: the same, a variant, one edit apart, or nothing."""
    if a.key == b.key:
        return _SAME
    if a.ph == b.ph:
        return _PHONETIC
    n = min(len(a.ph), len(b.ph))
    if n >= 5 and a.ph[0] == b.ph[0]:
        limit = 2 if n >= 9 else 1
        if Levenshtein.distance(a.ph, b.ph, score_cutoff=limit) <= limit:
            return _FUZZY
    return 0.0


def _given_sim(a: Tok, b: Tok) -> float:
    if a.initial or b.initial:
        return _INITIAL if a.key[0] == b.key[0] else 0.0
    return _tok_sim(a, b)


def _compounds(left: list[Tok], other: list[Tok]) -> list[tuple[tuple[int, ...], int, float]]:
    """Adjacent full tokens of `left` whose letters joined are one token of `other` (`Zhi wei` / `Zhiwei`)."""
    found: list[tuple[tuple[int, ...], int, float]] = []
    for i in range(len(left) - 1):
        a, b = left[i], left[i + 1]
        if a.initial or b.initial:
            continue
        joined = a.key + b.key
        for j, o in enumerate(other):
            if not o.initial and (o.key == joined or o.ph == phonetic(joined)):
                found.append(((i, i + 1), j, _SAME if o.key == joined else _PHONETIC))
    return found


def _family(left: list[Tok], anchor: Tok) -> set[int]:
    """Indexes of the tokens that are more of the surname: the anchor's hyphen siblings (`White` of
    `Campbell-White`) and, when the surname is not the first word, the words after it (`López` of `García López`)."""
    return {i for i, t in enumerate(left) if t.word == anchor.word or (anchor.word > 0 and t.word > anchor.word)}


def _rest(a: Name, ai: int, b: Name, bj: int) -> float:
    """How well everything but the anchor (the surname tokens a[ai] and b[bj]) agrees: a factor in 0..1."""
    anchor_a, anchor_b = a.toks[ai], b.toks[bj]
    # The anchor's hyphen siblings are the rest of the surname (`White` of `Campbell-White`).
    la = [t for i, t in enumerate(a.toks) if i != ai]
    lb = [t for j, t in enumerate(b.toks) if j != bj]
    family_a = _family(la, anchor_a)
    family_b = _family(lb, anchor_b)
    pairs: list[tuple[float, tuple[int, ...], tuple[int, ...]]] = []
    for i, x in enumerate(la):
        for j, y in enumerate(lb):
            s = _given_sim(x, y)
            if s:
                pairs.append((s, (i,), (j,)))
    for ii, j, s in _compounds(la, lb):
        pairs.append((s, ii, (j,)))
    for jj, i, s in _compounds(lb, la):
        pairs.append((s, (i,), jj))
    # Greedy, best first, then in order: a handful of tokens.
    pairs.sort(key=lambda p: (-p[0], abs(p[1][0] - p[2][0]), p[1][0]))
    used_a: set[int] = set()
    used_b: set[int] = set()
    # Tokens matched by an initial only: the other parts of their hyphenated word need no counterpart.
    by_initial_a: set[int] = set()
    by_initial_b: set[int] = set()
    matched: list[tuple[float, int, int]] = []
    for s, ii, jj in pairs:
        if used_a.intersection(ii) or used_b.intersection(jj):
            continue
        used_a.update(ii)
        used_b.update(jj)
        matched.append((s, ii[0], jj[0]))
        if len(ii) == 1 and len(jj) == 1:
            if lb[jj[0]].initial:
                by_initial_a.add(ii[0])
            if la[ii[0]].initial:
                by_initial_b.add(jj[0])
    factor = min((s for s, _, _ in matched), default=1.0)
    ua = [(i, t) for i, t in enumerate(la) if i not in used_a and not t.particle]
    ub = [(j, t) for j, t in enumerate(lb) if j not in used_b and not t.particle]

    def loose(i: int, t: Tok, side: list[Tok], by_initial: set[int], family: set[int]) -> str:
        """What an unmatched token is: `part` of a hyphenated word whose first part an initial stands for
        (`wei` of `Zhi-wei` against `Z.`), `family` (a further surname), `initial` or `given`."""
        if t.parts > 1 and any(side[k].word == t.word for k in by_initial):
            return "part"
        if i in family:
            return "family"
        return "initial" if t.initial else "given"

    kinds_a = [loose(i, t, la, by_initial_a, family_a) for i, t in ua]
    kinds_b = [loose(j, t, lb, by_initial_b, family_b) for j, t in ub]
    real_a = [k for k in kinds_a if k != "part"]
    real_b = [k for k in kinds_b if k != "part"]
    if real_a and real_b:
        # Both forms have something the other lacks: two different people, unless it is only middle initials.
        if all(k == "initial" for k in real_a + real_b) and matched:
            return factor * _CONFLICTING_INITIALS
        return 0.0
    extra = real_a or real_b
    for k in extra:
        factor *= {"initial": _EXTRA_INITIAL, "given": _EXTRA_GIVEN, "family": _EXTRA_FAMILY}[k]
    given_a = any(not t.particle for i, t in enumerate(la) if i not in family_a)
    given_b = any(not t.particle for j, t in enumerate(lb) if j not in family_b)
    if not any(i not in family_a for _, i, _ in matched) and (given_a or given_b):
        factor = min(factor, _NO_GIVEN)
    # Family name first on one side only (`Fu Haoran` / `Haoran Fu`), or given names in another order.
    first_a, first_b = anchor_a.word == 0 and a.words > 1, anchor_b.word == 0 and b.words > 1
    if first_a != first_b:
        factor *= _REORDERED
    order = sorted(matched, key=lambda m: m[1])
    if any(order[k][2] > order[k + 1][2] for k in range(len(order) - 1)):
        factor *= _REORDERED
    return factor


def similarity(a: Name, b: Name) -> float:
    """0..1: EXACT for the same text, FOLDED for the same letters, at most VARIANT_CAP for anything looser;
    THRESHOLD and above means the two forms can name one person."""
    if not a or not b:
        return 0.0
    if a.text == b.text:
        return EXACT
    if a.folded == b.folded and a.folded:
        return FOLDED
    best = 0.0
    for i, x in enumerate(a.toks):
        if x.initial or x.particle:
            continue
        for j, y in enumerate(b.toks):
            if y.initial or y.particle:
                continue
            s = _tok_sim(x, y)
            if s == 0.0 or s * 1.0 <= best:
                continue
            best = max(best, s * _rest(a, i, b, j))
    return min(best, VARIANT_CAP)


def name_similarity(a: str | None, b: str | None) -> float:
    """`similarity` of two strings (parsing each; callers comparing many names parse once)."""
    return similarity(parse_name(a), parse_name(b))


def names_match(a: str, b: str) -> bool:
    """Whether two spellings can name the same person, as the matching judges them (a correction that puts a paper
    on a profile is held to it too)."""
    return name_similarity(a, b) >= THRESHOLD
