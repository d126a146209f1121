"""The evidence a batch's matching weighs, put together from what is stored, what S2's author records say, and
what the batch's own confident links claim (an OpenAlex id, ORCID or institution found on a position S2 gives
to an author)."""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from db.records import ResearcherRecord
from ingest.matching.links import Evidence, Known, Link
from ingest.matching.names import parse_name
from ingest.parsers.openalex import OAWork


@dataclass(frozen=True, slots=True)
class Stored:
    """What the archive holds of an S2 author."""

    name: str
    openalex_id: str | None
    orcid: str | None
    rors: Sequence[str] = ()


@dataclass(slots=True)
class Claims:
    """Ids and institutions the batch's links found on positions S2 gives to an author: {S2 id: Counter}."""

    openalex: defaultdict[str, Counter[str]] = field(default_factory=lambda: defaultdict(Counter))
    orcid: defaultdict[str, Counter[str]] = field(default_factory=lambda: defaultdict(Counter))
    rors: defaultdict[str, set[str]] = field(default_factory=lambda: defaultdict(set))

    def add(self, links: Iterable[Link]) -> None:
        for link in links:
            if link.s2_id is None or link.oa is None:
                continue
            if link.oa.author_id:
                self.openalex[link.s2_id][link.oa.author_id] += 1
            if link.oa.orcid:
                self.orcid[link.s2_id][link.oa.orcid] += 1
            self.rors[link.s2_id].update(i.ror_id for i in link.oa.institutions)


def _single(values: Counter[str]) -> str | None:
    return next(iter(values)) if len(values) == 1 else None


def repeated_ids(works: Iterable[OAWork]) -> set[str]:
    """OpenAlex author ids and ORCIDs that one work gives to two of its authorships: OpenAlex took two people for
    one (homonyms), so the id is evidence of nobody."""
    out: set[str] = set()
    for w in works:
        seen: set[str] = set()
        for a in w.authorships:
            for value in (a.author_id, a.orcid):
                if value and value in seen:
                    out.add(value)
                elif value:
                    seen.add(value)
    return out


def unique_claims(claims: Claims, contested: set[str]) -> tuple[dict[str, str], dict[str, str], set[str]]:
    """{S2 id: OpenAlex id} and {S2 id: ORCID} claimed alone for each author and for no other author, and the
    values claimed for more than one (contested)."""
    shared = set(contested)
    picked: list[dict[str, str]] = []
    for counters in (claims.openalex, claims.orcid):
        claimed_by = Counter(v for c in counters.values() for v in c)  # how many S2 authors claim each value
        shared.update(v for v, n in claimed_by.items() if n > 1)
        picked.append(
            {s: v for s, c in counters.items() if (v := _single(c)) and v not in shared and claimed_by[v] == 1}
        )
    return picked[0], picked[1], shared


def build_evidence(
    stored: Mapping[str, Stored],
    records: Mapping[str, ResearcherRecord],
    claims: Claims,
    holders: Mapping[tuple[str, str], str | None],
    contested: set[str],
) -> Evidence:
    """`stored`: by S2 id; `records`: S2's author records by (surviving) id; `holders`: {(`openalex`|`orcid`, id):
    the S2 id of the stored researcher holding it (None: one known by that id alone)}."""
    oa_of, orcid_of, shared = unique_claims(claims, contested)
    ev = Evidence(contested=shared)
    for (kind, value), s2 in holders.items():
        if s2 is not None and value not in shared:
            (ev.openalex_owner if kind == "openalex" else ev.orcid_owner)[value] = s2
    for s, v in oa_of.items():
        if holders.get(("openalex", v), s) in (s, None):
            ev.openalex_owner.setdefault(v, s)
    for s, v in orcid_of.items():
        if holders.get(("orcid", v), s) in (s, None):
            ev.orcid_owner.setdefault(v, s)
    for s in {*stored, *records, *claims.rors}:
        st = stored.get(s)
        rec = records.get(s)
        names = tuple(p for n in {st.name if st else None, rec.name if rec else None} if n and (p := parse_name(n)))
        orcid = (rec.orcid if rec else None) or (st.orcid if st else None) or orcid_of.get(s)
        openalex = (st.openalex_id if st else None) or oa_of.get(s)
        rors = frozenset(st.rors if st else ()) | frozenset(claims.rors.get(s, ()))
        ev.authors[s] = Known(names, orcid, openalex, rors)
    return ev
