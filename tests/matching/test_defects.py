"""Each way the matching went wrong, on a world of a few papers served as the upstreams serve them and ingested by
the real harvest and enrichment: homonyms listed in another order, name variants, one initial printed twice, a
namesake without a profile, merged S2 ids, people S2 has no id for."""

from __future__ import annotations

import itertools
import zlib
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import asyncpg
import pytest

from db.migrate import migrate
from db.queries.researchers import fetch_researcher_by_external_id
from tests.matching import score
from tests.matching.world import INSTITUTIONS, T0, Paper, Person, Slot, World

_databases = itertools.count()
Ingest = Callable[[World], Awaitable[asyncpg.Connection]]
DSN: dict[int, str] = {}  # id(connection) -> its database


@pytest.fixture
async def ingested(make_database: Callable[[str], Awaitable[str]]) -> AsyncIterator[Ingest]:
    """Ingest a world (both its phases) into a database of its own; the connection is closed after the test."""
    opened: list[asyncpg.Connection] = []

    async def run(world: World) -> asyncpg.Connection:
        dsn = await make_database(f"defect{next(_databases)}")
        conn = await asyncpg.connect(dsn)
        opened.append(conn)
        DSN[id(conn)] = dsn
        await migrate(conn)
        await score.ingest(dsn, world)
        return conn

    try:
        yield run
    finally:
        for conn in opened:
            await conn.close()


def people(*persons: Person) -> dict[str, Person]:
    return {p.key: p for p in persons}


def person(key: str, given: str, family: str, s2: str | None, **kw: Any) -> Person:
    openalex = f"A{s2 or zlib.crc32(key.encode())}9"
    fields: dict[str, Any] = {"openalex": openalex, "orcid": None, "ror": INSTITUTIONS[0], "kind": "plain"}
    return Person(key, given, family, s2=s2, **(fields | kw))


def at(p: Person, arxiv: str | None = None, s2_name: str | None = None, **kw: Any) -> Slot:
    printed = arxiv or p.name
    return Slot(p.key, kw.pop("kind", "plain"), printed, s2_name or printed, kw.pop("s2_id", p.s2), printed, **kw)


def paper(n: int, *slots: Slot, **kw: Any) -> Paper:
    return Paper(f"2401.{10000 + n:05d}", f"Paper {n}", T0.replace(day=1 + n), slots, **kw)


async def linked(conn: asyncpg.Connection, arxiv_id: str, position: int) -> tuple[str | None, str | None] | None:
    """(S2 id, OpenAlex id) of the researcher at a position, None when it is unlinked."""
    row = await conn.fetchrow(
        "SELECT r.s2_author_id, r.openalex_id FROM authorships a JOIN papers p ON p.id = a.paper_id"
        " JOIN researchers r ON r.id = a.researcher_id WHERE p.arxiv_id = $1 AND a.position = $2",
        arxiv_id,
        position,
    )
    return (row[0], row[1]) if row else None


JANE = person("jane", "Jane", "Doe", "900")
MARKUS = person("markus", "Markus", "Müller", "101", orcid="0000-0001-0000-0101")
MARTIN = person("martin", "Martin", "Müller", "102", orcid="0000-0001-0000-0102")


def homonym_world(*, evidence: bool) -> World:
    """Markus and Martin Müller, each on a paper of their own, then both printed `M. Müller` on one paper whose S2
    list has them in the other order. `evidence`: OpenAlex knows that paper (ids and ORCIDs at each position)."""
    return World(
        people(MARKUS, MARTIN, JANE),
        [
            paper(1, at(MARKUS), at(JANE)),
            paper(2, at(MARTIN), at(JANE)),
            paper(
                3,
                at(MARKUS, "M. Müller", kind="homonym"),
                at(JANE),
                at(MARTIN, "M. Müller", kind="homonym"),
                s2_swap=(0, 2),
                oa_known=evidence,
            ),
        ],
    )


async def test_homonyms_listed_in_another_order_are_each_on_their_own_page(ingested: Ingest) -> None:
    conn = await ingested(homonym_world(evidence=True))
    # OpenAlex's ids and ORCIDs at each position agree with what the other papers tell of each S2 author.
    assert await linked(conn, "2401.10003", 1) == ("101", MARKUS.openalex)
    assert await linked(conn, "2401.10003", 3) == ("102", MARTIN.openalex)


async def test_homonyms_without_evidence_are_left_unlinked_not_swapped(ingested: Ingest) -> None:
    conn = await ingested(homonym_world(evidence=False))
    first, last = await linked(conn, "2401.10003", 1), await linked(conn, "2401.10003", 3)
    assert first is None or first[0] == "101"
    assert last is None or last[0] == "102"
    reasons = await conn.fetch(
        "SELECT u.position, u.reason, u.candidates FROM unlinked_authorships u JOIN papers p ON p.id = u.paper_id"
        " WHERE p.arxiv_id = '2401.10003' ORDER BY 1"
    )
    assert [tuple(r) for r in reasons] == [(1, "ambiguous", ["101", "102"]), (3, "ambiguous", ["101", "102"])]


async def test_homonyms_s2_prints_alike_are_told_apart_by_the_names_arxiv_prints(ingested: Ingest) -> None:
    # arXiv prints them in full, S2 lists two `M. Müller` in the other order; OpenAlex does not know the paper. S2's
    # own records name each author in full.
    world = World(
        people(MARKUS, MARTIN, JANE),
        [
            paper(
                1,
                at(MARKUS, s2_name="M. Müller", kind="homonym"),
                at(JANE),
                at(MARTIN, s2_name="M. Müller", kind="homonym"),
                s2_swap=(0, 2),
                oa_known=False,
            )
        ],
    )
    conn = await ingested(world)
    assert await linked(conn, "2401.10001", 1) == ("101", None)
    assert await linked(conn, "2401.10001", 3) == ("102", None)


@pytest.mark.parametrize(
    ("arxiv", "s2"),
    [
        ("Maksim Ivanov", "Maxim Ivanov"),  # transliteration
        ("Iurii Sokolov", "Yuri Sokolov"),
        ("Juergen Mueller", "Jürgen Müller"),  # an umlaut's ASCII form
        ("Anna Campbell-White", "Anna Campbell"),  # a hyphenated surname shortened
        ("Marta Garcia Lopez", "Marta Garcia"),  # a second surname left out
        ("Fu Haoran", "H. Fu"),  # family name first
        ("Nagy Péter", "Péter Nagy"),
        ("Jürgen Müller", 'J{\\"u}rgen M{\\"u}ller'),  # TeX left in S2's name
    ],
)
async def test_name_variants_link_to_the_s2_author(ingested: Ingest, arxiv: str, s2: str) -> None:
    someone = person("someone", "Some", "One", "700")
    # OpenAlex does not know the paper: the names alone must do it.
    world = World(people(someone, JANE), [paper(1, at(JANE), at(someone, arxiv, s2), oa_known=False)])
    conn = await ingested(world)
    assert await linked(conn, "2401.10001", 2) == ("700", None)
    assert await linked(conn, "2401.10001", 1) == ("900", None)


async def test_one_initial_printed_twice_links_the_one_s2_knows(ingested: Ingest) -> None:
    xiaoming = person("xiaoming", "Xiaoming", "Yang", "201")
    xin = person("xin", "Xin", "Yang", None)
    world = World(
        people(xiaoming, xin, JANE),
        [paper(1, at(xiaoming, "X. Yang", kind="double_initial"), at(JANE), at(xin, "X. Yang", kind="double_initial"))],
    )
    conn = await ingested(world)
    # OpenAlex names them in full at their positions: Xiaoming is S2's 201, Xin someone S2 has no id for.
    assert await linked(conn, "2401.10001", 1) == ("201", xiaoming.openalex)
    assert await linked(conn, "2401.10001", 3) == (None, xin.openalex)


async def test_a_namesake_without_a_profile_beside_the_one_with(ingested: Ingest) -> None:
    one = person("one", "Zhi-wei", "Du", "301")
    other = person("other", "Zhiwei", "Du", None)
    # S2 lists them the other way round; OpenAlex does not know the paper.
    world = World(people(one, other, JANE), [paper(1, at(one), at(JANE), at(other), s2_swap=(0, 2), oa_known=False)])
    conn = await ingested(world)
    assert await linked(conn, "2401.10001", 1) == ("301", None)
    assert await linked(conn, "2401.10001", 3) is None


async def test_an_old_s2_id_never_stored_leads_to_the_survivor(ingested: Ingest) -> None:
    merged = person("merged", "Ravi", "Menon", "401", old_s2="400", merged_in_phase=1)
    world = World(people(merged, JANE), [paper(1, at(merged, s2_id="400"), at(JANE))])
    conn = await ingested(world)
    found = await fetch_researcher_by_external_id(conn, "s2", "400")
    assert found is not None and found.s2_author_id == "401"
    assert await linked(conn, "2401.10001", 1) == ("401", merged.openalex)


async def test_an_old_s2_id_whose_profile_took_the_new_id_still_leads_there(ingested: Ingest) -> None:
    # Phase 1: S2 answers 500 as itself (a profile is stored under it); phase 2: it answers 500 with 501, an id
    # the archive has never seen, and the stored profile takes it.
    merged = person("merged", "Ravi", "Menon", "501", old_s2="500", merged_in_phase=2)
    world = World(
        people(merged, JANE),
        [paper(1, at(merged, s2_id="500"), at(JANE)), paper(2, at(merged, s2_id="500"), at(JANE), phase=2)],
    )
    conn = await ingested(world)
    found = await fetch_researcher_by_external_id(conn, "s2", "500")
    assert found is not None and found.s2_author_id == "501"
    assert await linked(conn, "2401.10001", 1) == ("501", merged.openalex)
    assert await linked(conn, "2401.10002", 1) == ("501", merged.openalex)


async def test_a_person_s2_has_no_id_for_is_linked_by_openalex(ingested: Ingest) -> None:
    nobody = person("nobody", "Priya", "Nair", None)
    world = World(people(nobody, JANE), [paper(1, at(nobody), at(JANE)), paper(2, at(JANE), at(nobody))])
    conn = await ingested(world)
    assert await linked(conn, "2401.10001", 1) == (None, nobody.openalex)
    assert await linked(conn, "2401.10002", 2) == (None, nobody.openalex)
    assert await conn.fetchval("SELECT count(*) FROM researchers WHERE openalex_id = $1", nobody.openalex) == 1


async def test_ingest_status_reports_unlinked_positions_and_ambiguous_ties(ingested: Ingest) -> None:
    import asyncio
    import json

    from typer.testing import CliRunner

    from cli import app as cli_app

    conn = await ingested(homonym_world(evidence=False))
    url = DSN[id(conn)]
    runner = CliRunner()
    result = await asyncio.to_thread(runner.invoke, cli_app, ["ingest", "status", "--json"], env={"DATABASE_URL": url})
    assert result.exit_code == 0, result.output
    matching = json.loads(result.output)["matching"]
    assert (matching["unlinked"], matching["ambiguous"]) == (2, 2)
    listed = [(p["arxiv_id"], p["position"], p["reason"], p["candidates"]) for p in matching["positions"]]
    assert listed == [("2401.10003", 1, "ambiguous", ["101", "102"]), ("2401.10003", 3, "ambiguous", ["101", "102"])]
    text = await asyncio.to_thread(runner.invoke, cli_app, ["ingest", "status"], env={"DATABASE_URL": url})
    assert "author matching: 2 positions unlinked (2 ambiguous, 0 no identity, 0 no match)" in text.output
    assert "2401.10003 #1 M. Müller: ambiguous between 101, 102" in text.output
