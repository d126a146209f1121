"""Where an arXiv author position is linked to a researcher: the one place that decides, and records why.

A paper's positions are aligned with OpenAlex's authorships and with Semantic Scholar's author list, each as an
optimal assignment over name scores (`ingest.matching.assignment`):

- OpenAlex lists authorships in the byline's order, so among equal names its order decides; it gives each position
  its OpenAlex author id, ORCID, institutions and the name OpenAlex displays.
- Semantic Scholar's order is no evidence (it lists homonyms in another order than arXiv's): order only breaks
  ties between equal readings, and a position that two of its authors fit alike (two `M. Müller`, two `Li Li`) is
  decided by stronger evidence (the ORCID on both sides, OpenAlex's author id agreeing with what is known of the S2
  author, institutions in common, the fuller name either source gives) or left unlinked: a wrong link costs more
  than a missed one.
- A position Semantic Scholar gives no id for (or cannot decide) is linked through OpenAlex's author id: to the
  researcher known to hold it, else to a researcher known by that OpenAlex id alone (which later joins the S2
  profile that turns out to hold the same id).

Nothing here reads the database or the network: the caller gathers the evidence (`Evidence`) and writes the links.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

from db.records import AuthorRecord
from ingest.matching.assignment import Pair, assign
from ingest.matching.names import EXACT, FOLDED, THRESHOLD, Name, parse_name, similarity
from ingest.parsers.names import is_collaboration
from ingest.parsers.openalex import OAAuthorship, OAWork
from ingest.parsers.s2 import S2Paper

# Order breaks ties between equal readings and nothing more: at most ORDER_STEP * ORDER_CAP a pair, far below
# S2_MARGIN even summed over a group of homonyms.
ORDER_STEP = 1e-5
ORDER_CAP = 40
S2_MARGIN = 0.01  # two assignments closer than this are a tie
OA_MARGIN = 1e-7  # OpenAlex's order is the byline's: it decides between equal names
EVIDENCE_WEIGHT = 0.05  # one unit of evidence outweighs a tie, never a clearly better name
FALLBACK_COMPARE_MAX = 300  # a list longer than this is compared only where the names share a token

Status = Literal["linked", "ambiguous", "no_identity", "no_match"]


@dataclass(frozen=True, slots=True)
class Known:
    """What is known of one Semantic Scholar author besides this paper: stored, or seen elsewhere in the batch."""

    names: tuple[Name, ...] = ()
    orcid: str | None = None
    openalex_id: str | None = None
    rors: frozenset[str] = frozenset()


@dataclass(slots=True)
class Evidence:
    authors: dict[str, Known] = field(default_factory=dict)  # by S2 author id (the surviving one)
    # OpenAlex author ids and ORCIDs known to be one S2 author's (stored on their researcher, or claimed for
    # them alone in this batch).
    openalex_owner: dict[str, str] = field(default_factory=dict)
    orcid_owner: dict[str, str] = field(default_factory=dict)
    contested: set[str] = field(default_factory=set)  # ids claimed for two S2 authors: evidence of nothing


@dataclass(frozen=True, slots=True)
class Link:
    """The verdict for one position. `key`: the researcher's S2 author id, or their OpenAlex author id when they
    are known by that alone; None leaves the position unlinked, with `status` saying why."""

    position: int
    key: str | None
    status: Status
    evidence: str | None = None  # why it is linked: `s2/exact`, `s2/variant+orcid`, `openalex/folded`
    candidates: tuple[str, ...] = ()  # an ambiguous position's possible S2 ids (`?` for one S2 lists without id)
    rors: tuple[str, ...] = ()
    oa: OAAuthorship | None = None  # the OpenAlex authorship at this position
    s2_id: str | None = None  # set when Semantic Scholar's list identified the position


@dataclass(frozen=True, slots=True)
class _Entry:
    index: int  # in the source's list
    rank: int  # among the source's people
    forms: tuple[Name, ...]


def _level(score: float) -> str:
    return "exact" if score >= EXACT else "folded" if score >= FOLDED else "variant"


def _block_keys(name: Name) -> set[tuple[str, str]]:
    """What two forms of one name share: a full token (by phonetic key) with the first letter of another token
    (`Smith`+`j` for both `J. Smith` and `John Smith`; `Fu`+`h` for `Fu Haoran` and `H. Fu`). A name of one token
    has that token alone."""
    full = [t for t in name.toks if not t.initial]
    if len(name.toks) == 1:
        return {(t.ph, "") for t in full}
    return {(t.ph, o.key[0]) for t in full for o in name.toks if o is not t}


def _scores(people: Sequence[tuple[int, Name]], entries: Sequence[_Entry]) -> dict[Pair, tuple[float, float]]:
    """{(person rank, entry rank): (name score, order term)} for the pairs that can be one person. Only names that
    share a block key are compared (a long list has a few thousand names), and a person that shares none with
    anyone is compared with everyone when the list is short."""
    by_key: dict[tuple[str, str], list[int]] = {}
    for e in entries:
        for form in e.forms:
            for k in _block_keys(form):
                by_key.setdefault(k, []).append(e.rank)
            for t in form.toks:
                if not t.initial:
                    by_key.setdefault((t.ph, ""), []).append(e.rank)
    out: dict[Pair, tuple[float, float]] = {}
    for rank, name in people:
        keys = _block_keys(name) | ({(t.ph, "") for t in name.toks if not t.initial} if len(name.toks) == 1 else set())
        near = {r for k in keys for r in by_key.get(k, ())}
        if not near and len(entries) <= FALLBACK_COMPARE_MAX:
            near = {e.rank for e in entries}
        for r in near:
            e = entries[r]
            s = max(similarity(name, f) for f in e.forms)
            if s >= THRESHOLD:
                out[(rank, r)] = (s, -ORDER_STEP * min(abs(rank - r), ORDER_CAP))
    return out


def _positional(people: Sequence[tuple[int, Name]], entries: Sequence[_Entry]) -> dict[int, int] | None:
    """The common case decided without scoring: the same texts in the same order, no two alike."""
    if len(people) != len(entries):
        return None
    texts = [n.text for _, n in people]
    if len(set(texts)) != len(texts):
        return None
    for (_, name), e in zip(people, entries, strict=True):
        if all(f.text != name.text for f in e.forms):
            return None
    return {rank: rank for rank, _ in people}


def _entries(names: Sequence[Sequence[str | None]]) -> list[_Entry]:
    """A source's list (each author's name forms) without its collaborations, ranked."""
    out: list[_Entry] = []
    for index, forms in enumerate(names):
        parsed = tuple(p for f in forms if f and (p := parse_name(f)))
        if parsed and not any(is_collaboration(f) for f in forms if f):
            out.append(_Entry(index, len(out), parsed))
    return out


def _align_openalex(people: Sequence[tuple[int, Name]], work: OAWork) -> dict[int, OAAuthorship]:
    """Person rank -> OpenAlex authorship. OpenAlex's order decides between equal names, as long as the authors it
    places by name alone come in arXiv's order (a list in another order is no evidence of who is where)."""
    entries = _entries([(a.raw_name, a.name) for a in work.authorships])
    if not entries:
        return {}
    fixed = _positional(people, entries)
    if fixed is None:
        scored = {p: s + o for p, (s, o) in _scores(people, entries).items()}
        by_name = assign(scored, margin=S2_MARGIN)
        fixed = by_name.pairs
        if by_name.contested and _in_order(by_name.pairs):
            fixed = assign(scored, margin=OA_MARGIN).pairs
    return {rank: work.authorships[entries[r].index] for rank, r in fixed.items()}


def _in_order(pairs: dict[int, int]) -> bool:
    ranks = [pairs[k] for k in sorted(pairs)]
    return all(a < b for a, b in zip(ranks, ranks[1:], strict=False))


def _evidence(name: Name, oa: OAAuthorship | None, s2_id: str | None, ev: Evidence) -> tuple[float, list[str]]:
    """How strongly what is known of S2 author `s2_id` says they are the person at this position (OpenAlex's
    authorship `oa` there, arXiv's `name`): a sum of units, with the kinds that spoke for it."""
    known = ev.authors.get(s2_id) if s2_id else None
    if known is None:
        return 0.0, []
    score = 0.0
    kinds: list[str] = []
    if oa is not None:
        if oa.orcid and known.orcid == oa.orcid:
            score += 1.0
            kinds.append("orcid")
        if oa.author_id and oa.author_id not in ev.contested:
            owner = ev.openalex_owner.get(oa.author_id)
            if known.openalex_id == oa.author_id or owner == s2_id:
                score += 1.0
                kinds.append("openalex")
            elif owner is not None or known.openalex_id:
                score -= 0.5  # the id is someone else's, or this author is known by another
        if known.rors and known.rors.intersection(i.ror_id for i in oa.institutions):
            score += 0.5
            kinds.append("affiliation")
    if known.names:
        # The names the position has beyond the tie (arXiv's, and the one OpenAlex displays for its author) against
        # the names S2 and the archive hold for the author, not against the forms that tied. The same text counts
        # more than the same letters (`Zhi-wei Du` is not the `Zhiwei Du` beside him).
        forms = [f for f in (name, parse_name(oa.name) if oa is not None else None) if f]
        best = max(similarity(f, k) for f in forms for k in known.names)
        if best >= EXACT:
            score += 1.0
            kinds.append("name")
        elif best >= FOLDED:
            score += 0.5
            kinds.append("name")
        elif best < THRESHOLD:
            score -= 0.5
    return score, kinds


def _vetoed(oa: OAAuthorship | None, s2_id: str | None, ev: Evidence) -> bool:
    """Two different ORCIDs: not one person, whatever the names say."""
    known = ev.authors.get(s2_id) if s2_id else None
    return bool(oa and oa.orcid and known and known.orcid and known.orcid != oa.orcid)


def decide_paper(
    authors: Sequence[AuthorRecord], s2: S2Paper | None, works: Sequence[OAWork], ev: Evidence
) -> list[Link]:
    """Every non-collaboration position of one paper, linked or not (with why), in position order. `works`: the
    paper's OpenAlex works, the one that speaks for it first (a journal duplicate only adds institutions)."""
    persons = [a for a in authors if not a.is_collaboration]
    people = [(rank, parse_name(a.name)) for rank, a in enumerate(persons)]
    oa_at = _align_openalex(people, works[0]) if works else {}
    dups = [_align_openalex(people, w) for w in works[1:]]

    s2_pick: dict[int, tuple[int, float, list[str]]] = {}  # rank -> (S2 list index, name score, evidence kinds)
    ambiguous: dict[int, list[int]] = {}
    entries = _entries([(a.name,) for a in s2.authors]) if s2 is not None else []
    if s2 is not None and entries:
        ids = [s2.authors[e.index].author_id for e in entries]
        fixed = _positional(people, entries)
        if fixed is not None:
            s2_pick = {rank: (entries[r].index, EXACT, []) for rank, r in fixed.items()}
        else:
            scored = {p: v for p, v in _scores(people, entries).items() if not _vetoed(oa_at.get(p[0]), ids[p[1]], ev)}
            first = assign({p: s + o for p, (s, o) in scored.items()}, margin=S2_MARGIN)
            s2_pick = {rank: (entries[r].index, scored[(rank, r)][0], []) for rank, r in first.pairs.items()}
            if first.contested:
                # The ties: settle them with evidence, group by group, or leave them.
                kinds: dict[Pair, list[str]] = {}
                weighed: dict[Pair, float] = {}
                for rows, cols in first.contested:
                    for rank in rows:
                        for r in cols:
                            if (rank, r) in scored:
                                s, o = scored[(rank, r)]
                                e, kinds[(rank, r)] = _evidence(people[rank][1], oa_at.get(rank), ids[r], ev)
                                weighed[(rank, r)] = s + o + EVIDENCE_WEIGHT * e
                second = assign(weighed, margin=S2_MARGIN)
                for rows, _ in first.contested:
                    for rank in rows:
                        s2_pick.pop(rank, None)
                for rank, r in second.pairs.items():
                    s2_pick[rank] = (entries[r].index, scored[(rank, r)][0], kinds[(rank, r)])
                ambiguous = {rank: [entries[r].index for r in rs] for rank, rs in second.ambiguous.items()}

    links: list[Link] = []
    for rank, author in enumerate(persons):
        oa = oa_at.get(rank)
        rors = tuple(i.ror_id for i in oa.institutions) if oa is not None else ()
        if not rors:
            for align in dups:
                if rank in align and align[rank].institutions:
                    rors = tuple(i.ror_id for i in align[rank].institutions)
                    break
        pick = s2_pick.get(rank)
        s2_id = s2.authors[pick[0]].author_id if s2 is not None and pick is not None else None
        if pick is not None and s2_id:
            why = "+".join([f"s2/{_level(pick[1])}", *pick[2]])
            links.append(Link(author.position, s2_id, "linked", why, rors=rors, oa=oa, s2_id=s2_id))
            continue
        status: Status = "ambiguous" if rank in ambiguous else "no_identity" if pick is not None else "no_match"
        candidates: tuple[str, ...] = ()
        if rank in ambiguous and s2 is not None:
            candidates = tuple(sorted(s2.authors[i].author_id or "?" for i in ambiguous[rank]))
        if status == "no_match" and oa is not None:
            status = "no_identity"
        links.append(Link(author.position, None, status, None, candidates, rors, oa))
    return _through_openalex(links, people, ev)


def _through_openalex(links: list[Link], people: Sequence[tuple[int, Name]], ev: Evidence) -> list[Link]:
    """Positions Semantic Scholar left unlinked, linked by OpenAlex's author id (or ORCID) at that position: to
    the S2 author known to hold it, else to a researcher known by the OpenAlex id alone. Then no researcher may
    hold two positions of one paper: both are left unlinked."""
    taken = {link.key for link in links if link.key}
    out: list[Link] = []
    for link, (_, name) in zip(links, people, strict=True):
        oa = link.oa
        if link.key is not None or oa is None or not oa.author_id or oa.author_id in ev.contested:
            out.append(link)
            continue
        owner = ev.openalex_owner.get(oa.author_id) or (
            ev.orcid_owner.get(oa.orcid) if oa.orcid and oa.orcid not in ev.contested else None
        )
        if owner is not None and owner in taken:
            out.append(link)  # that researcher is at another position of this paper: OpenAlex and S2 disagree
            continue
        score = max(similarity(name, f) for f in (parse_name(oa.raw_name), parse_name(oa.name)))
        known = ev.authors.get(owner) if owner is not None else None
        if known is not None and known.names:
            score = min(score, max(similarity(name, k) for k in known.names))
        if score < THRESHOLD:
            out.append(link)
            continue
        key = owner or oa.author_id
        out.append(Link(link.position, key, "linked", f"openalex/{_level(score)}", rors=link.rors, oa=oa, s2_id=owner))
    counts: dict[str, int] = {}
    for link in out:
        if link.key:
            counts[link.key] = counts.get(link.key, 0) + 1
    return [
        Link(x.position, None, "ambiguous", None, (x.key,), x.rors, x.oa) if x.key and counts[x.key] > 1 else x
        for x in out
    ]
