"""Pairwise precision and recall of author links against the generated world's truth, per kind.

A pair is two author positions; it is true when one person holds both, predicted when one researcher does (an
unlinked position pairs with nothing). Per kind, the pairs counted are those with at least one position of that
kind. Beside them: wrong links (positions on a researcher most of whose positions are someone else's), wrong
merges (researchers over more than one person), wrong splits (people over more than one researcher), missed links
(unlinked positions of people some source identifies), and merged S2 ids that lead to their survivor.

`python -m tests.matching.score` ingests the world into a database of its own (DATABASE_URL names the server)
through the fake upstreams and prints the table: run it against another checkout for a before/after.
"""

from __future__ import annotations

import asyncio
import os
import sys
from collections import Counter, defaultdict
from dataclasses import dataclass

import asyncpg

from tests.matching.world import KINDS, World, generate

Position = tuple[str, int]


@dataclass
class Figures:
    kind: str
    positions: int = 0
    true_pairs: int = 0
    predicted_pairs: int = 0
    correct_pairs: int = 0
    wrong_links: int = 0
    wrong_merges: int = 0
    wrong_splits: int = 0
    missed: int = 0

    @property
    def precision(self) -> float:
        return self.correct_pairs / self.predicted_pairs if self.predicted_pairs else 1.0

    @property
    def recall(self) -> float:
        return self.correct_pairs / self.true_pairs if self.true_pairs else 1.0


def truth(world: World) -> dict[Position, tuple[str, str]]:
    """(arXiv id, 1-based position) -> (person, kind) for every position that is a person."""
    out: dict[Position, tuple[str, str]] = {}
    for p in world.papers:
        for n, s in enumerate(p.slots, start=1):
            if s.person is not None:
                out[(p.arxiv_id, n)] = (s.person, s.kind)
    return out


def unidentified(world: World) -> set[Position]:
    """Positions no source identifies: S2 lists them without id (or not at all, or knows not the paper) and
    OpenAlex gives no author id (or knows not the paper). No matching can link them; they are left out."""
    out: set[Position] = set()
    for p in world.papers:
        for n, s in enumerate(p.slots, start=1):
            if s.person is None:
                continue
            by_s2 = p.s2_known and s.in_s2 and s.s2_id is not None
            by_oa = p.oa_known and world.people[s.person].openalex is not None
            if not by_s2 and not by_oa:
                out.add((p.arxiv_id, n))
    return out


def _pairs_with(n: int, k: int) -> int:
    """Pairs among n positions with at least one of the k marked."""
    return n * (n - 1) // 2 - (n - k) * (n - k - 1) // 2


def score(world: World, links: dict[Position, int | None], *, s2_only: bool = False) -> dict[str, Figures]:
    """Figures per kind and `all` over the positions some source identifies. `s2_only`: only the positions of
    people who have an S2 profile."""
    dark = unidentified(world)
    facts = {pos: v for pos, v in truth(world).items() if pos not in dark}
    if s2_only:
        facts = {pos: v for pos, v in facts.items() if world.people[v[0]].s2 is not None}
    out: dict[str, Figures] = {}
    for kind in ("all", *KINDS):
        f = Figures(kind)
        marked = {pos for pos, (_, k) in facts.items() if kind in ("all", k)}
        if not marked:
            continue
        f.positions = len(marked)
        by_person: defaultdict[str, list[Position]] = defaultdict(list)
        by_researcher: defaultdict[int, list[Position]] = defaultdict(list)
        cells: Counter[tuple[str, int]] = Counter()
        cells_marked: Counter[tuple[str, int]] = Counter()
        for pos, (person, _) in facts.items():
            by_person[person].append(pos)
            rid = links.get(pos)
            if rid is not None:
                by_researcher[rid].append(pos)
                cells[(person, rid)] += 1
                cells_marked[(person, rid)] += pos in marked
        for positions in by_person.values():
            f.true_pairs += _pairs_with(len(positions), sum(p in marked for p in positions))
        for positions in by_researcher.values():
            f.predicted_pairs += _pairs_with(len(positions), sum(p in marked for p in positions))
        for cell, n in cells.items():
            f.correct_pairs += _pairs_with(n, cells_marked[cell])
        for positions in by_researcher.values():
            people = Counter(facts[p][0] for p in positions)
            owner = people.most_common(1)[0][0]
            if any(p in marked for p in positions) and len(people) > 1:
                f.wrong_merges += 1
            f.wrong_links += sum(1 for p in positions if facts[p][0] != owner and p in marked)
        for person, positions in by_person.items():
            rids = {links[p] for p in positions if links.get(p) is not None}
            if len(rids) > 1 and any(p in marked for p in positions):
                f.wrong_splits += 1
            p_ = world.people[person]
            if p_.s2 or p_.openalex:
                f.missed += sum(1 for p in positions if p in marked and links.get(p) is None)
        out[kind] = f
    return out


def table(figures: dict[str, Figures], title: str) -> str:
    lines = [
        title,
        f"{'kind':<16}{'positions':>10}{'precision':>11}{'recall':>9}{'wrong links':>13}{'wrong merges':>14}"
        f"{'wrong splits':>14}{'missed':>8}",
    ]
    for f in figures.values():
        lines.append(
            f"{f.kind:<16}{f.positions:>10}{f.precision:>11.4f}{f.recall:>9.4f}{f.wrong_links:>13}"
            f"{f.wrong_merges:>14}{f.wrong_splits:>14}{f.missed:>8}"
        )
    return "\n".join(lines)


SELECT_LINKS = """
SELECT p.arxiv_id, a.position, a.researcher_id FROM authorships a JOIN papers p ON p.id = a.paper_id
WHERE NOT a.is_collaboration
"""


async def read_links(conn: asyncpg.Connection) -> dict[Position, int | None]:
    return {(r[0], r[1]): r[2] for r in await conn.fetch(SELECT_LINKS)}


async def merged_ids_resolved(conn: asyncpg.Connection, world: World) -> tuple[int, int]:
    """(old S2 ids that lead to their survivor's researcher, old S2 ids)."""
    from db.queries.researchers import fetch_researcher_by_external_id

    olds = [p for p in world.people.values() if p.old_s2]
    found = 0
    for p in olds:
        row = await fetch_researcher_by_external_id(conn, "s2", p.old_s2 or "")
        found += row is not None and row.s2_author_id == p.s2
    return found, len(olds)


async def ingest(dsn: str, world: World) -> None:
    """Both phases of the world through the real harvest and enrichment, served from loopback."""
    from ingest.runner import run_arxiv, run_enrich
    from settings import Settings
    from tests.matching.upstreams import Upstreams, serving

    state = Upstreams(world)
    with serving(state) as base:
        settings = Settings(
            DATABASE_URL=dsn,
            arxiv_oai_url=f"{base}/oai",
            arxiv_delay_s=0,
            s2_api_url=f"{base}/s2",
            s2_rps=1_000_000,
            openalex_api_url=f"{base}/oa",
            openalex_rps=1_000_000,
        )
        for phase in sorted({1, *(p.phase for p in world.papers)}):
            state.phase = phase
            harvested = await run_arxiv(settings, from_=None, until=None, set_spec=None)
            assert harvested.failed == 0 and harvested.stopped is None, harvested
            enriched = await run_enrich(settings, limit=None)
            assert enriched.failed == 0 and enriched.stopped is None, enriched


async def _main() -> None:
    from db.migrate import migrate

    admin = os.environ.get("DATABASE_URL", "postgresql://postgres@127.0.0.1:5432/postgres")
    name = f"matching_world_{os.getpid()}"
    conn = await asyncpg.connect(admin)
    await conn.execute(f"CREATE DATABASE {name}")
    await conn.close()
    dsn = admin.rsplit("/", 1)[0] + f"/{name}"
    try:
        c = await asyncpg.connect(dsn)
        await migrate(c)
        await c.close()
        world = generate()
        await ingest(dsn, world)
        c = await asyncpg.connect(dsn)
        links = await read_links(c)
        resolved, olds = await merged_ids_resolved(c, world)
        await c.close()
        print(f"positions of people: {len(truth(world))}, of which no source identifies {len(unidentified(world))}")
        print(table(score(world, links), "every person"))
        print(table(score(world, links, s2_only=True), "people with an S2 profile"))
        print(f"merged S2 ids that lead to their survivor: {resolved} of {olds}")
    finally:
        conn = await asyncpg.connect(admin)
        await conn.execute(f"DROP DATABASE IF EXISTS {name}")
        await conn.close()


if __name__ == "__main__":
    sys.exit(asyncio.run(_main()))
