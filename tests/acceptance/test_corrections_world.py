"""Acceptance: researchers of the fictional world (world.py) correct their profiles through the API with signed
tokens, an operator decides what they cannot (the command), and then the world's second phase is ingested and every
paper enriched again by the real pipeline from the loopback upstreams: every correction holds, and `wovepaper
ingest status` counts the writes it was kept from."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import asyncpg
import pytest
from typer.testing import CliRunner

from app import create_app
from cli import app as cli_app
from db.migrate import migrate
from db.paging import decode_global_id
from settings import Settings
from tests.acceptance import world
from tests.acceptance.test_world import Api, ingest, settings_for
from tests.acceptance.upstreams import World, serving
from tests.integration.graph_support import serving as serving_app
from tests.jwt_support import SECRET, bearer, hs256

PROFILE = """query($id: String!) { researcher(id: $id) {
  databaseId claimed paperCount papers(first: 100) { totalCount nodes { arxivId } }
  corrections { kind summary }
} }"""
CLAIM = "mutation($id: String!) { claimResearcher(input: {researcherId: $id}) { correction { id status } } }"
REPORT = """mutation($paper: String!, $id: String!, $kind: AuthorshipReport!) {
  reportAuthorship(input: {paperId: $paper, researcherId: $id, kind: $kind}) { correction { id status } }
}"""
SPLIT = """mutation($id: String!, $papers: [String!]!) {
  splitResearcher(input: {researcherId: $id, paperIds: $papers}) { correction { status newResearcher { databaseId } } }
}"""


class Readers:
    """The API as each researcher signs in to it (their token carries their ORCID iD when they have one)."""

    def __init__(self, api: Api, env: dict[str, str]) -> None:
        self.api = api
        self.env = env

    async def as_(self, key: str, query: str, **variables: Any) -> dict[str, Any]:
        token = hs256(f"reader-{key}", orcid=world.RESEARCHER[key].orcid)
        response = await self.api.client.post(
            "/graphql", json={"query": query, "variables": variables}, headers=bearer(token)
        )
        body: dict[str, Any] = response.json()
        assert "errors" not in body, body["errors"]
        return dict(body["data"])

    async def operator(self, *args: str) -> str:
        result = await asyncio.to_thread(CliRunner().invoke, cli_app, list(args), env=self.env)
        assert result.exit_code == 0, result.output
        return str(result.output)


def s2(key: str) -> str:
    return f"s2:{world.RESEARCHER[key].s2}"


@pytest.fixture(scope="module")
async def corrected(make_database, redis_url: str, cache_namespace: str) -> AsyncIterator[dict[str, Any]]:
    dsn = await make_database("world_corrections")
    conn = await asyncpg.connect(dsn)
    try:
        await migrate(conn)
    finally:
        await conn.close()
    state = World()
    with serving(state) as base:
        settings = settings_for(dsn, base, redis_url, f"{cache_namespace}-worldfix")
        settings = Settings(**{**settings.model_dump(), "jwt_secret": SECRET})
        env = {"DATABASE_URL": dsn, "REDIS_URL": redis_url, "WOVEPAPER_CACHE_NAMESPACE": settings.cache_namespace}
        async with serving_app(create_app(settings)) as client:
            api = Api(client)
            await ingest(settings)
            readers = Readers(api, env)
            seen: dict[str, Any] = {"api": api, "readers": readers}
            # Ada and Dana sign in with their ORCID iD: their claims apply at once. Oskar and Jonas have none: the
            # operator approves their claims (Oskar's two profiles: S2 keeps his second one, O. Lind).
            for key in ("ada", "dana"):
                claimed = await readers.as_(key, CLAIM, id=s2(key))
                assert claimed["claimResearcher"]["correction"]["status"] == "APPLIED"
            for key in ("oskar", "oskar2", "jonas"):
                who = "oskar" if key == "oskar2" else key
                asked = await readers.as_(who, CLAIM, id=s2(key))
                pending = asked["claimResearcher"]["correction"]
                assert pending["status"] == "PENDING"
                await readers.operator("corrections", "approve", str(decode_global_id(pending["id"])[1]))
            # Ada is not an author of the tabular benchmarks; the O. Lind of the heavy tails is Oskar; Jonas Berg,
            # unmatched on the glaciology paper S2 does not know, is Jonas; Dana's quantum walks are another Dana's.
            for who, paper, key, kind in (
                ("ada", "2403.00116", "ada", "NOT_ME"),
                ("oskar", "2403.00112", "oskar", "IS_ME"),
                ("jonas", "2403.00110", "jonas", "IS_ME"),
            ):
                done = await readers.as_(who, REPORT, paper=paper, id=s2(key), kind=kind)
                assert done["reportAuthorship"]["correction"]["status"] == "APPLIED", (who, paper)
            split = await readers.as_("dana", SPLIT, id=s2("dana"), papers=["2403.00115"])
            assert split["splitResearcher"]["correction"]["status"] == "APPLIED"
            seen["other_dana"] = split["splitResearcher"]["correction"]["newResearcher"]["databaseId"]

            # The world moves on (phase 2), and every paper is enriched again from scratch.
            state.phase = 2
            await ingest(settings)
            conn = await asyncpg.connect(dsn)
            try:
                await conn.execute("UPDATE papers SET enriched_at = NULL")
            finally:
                await conn.close()
            await ingest(settings)
            yield seen


async def papers_of(api: Api, reference: str) -> set[str]:
    got = (await api.data(PROFILE, id=reference))["researcher"]
    assert got["paperCount"] == got["papers"]["totalCount"]
    return {n["arxivId"] for n in got["papers"]["nodes"]}


def world_papers(key: str) -> set[str]:
    return {p.arxiv_id for p in world.papers_of(key)}


async def test_not_me_holds(corrected: dict[str, Any]) -> None:
    api = corrected["api"]
    assert await papers_of(api, s2("ada")) == world_papers("ada") - {"2403.00116"}


async def test_is_me_holds_against_the_profile_s_2_puts_it_on_and_against_s2_not_knowing_the_paper(
    corrected: dict[str, Any],
) -> None:
    api = corrected["api"]
    oskar = await papers_of(api, s2("oskar"))
    # S2 still names O. Lind (his second profile) on the heavy tails paper: it stays Oskar's.
    assert "2403.00112" in oskar and "2403.00112" not in await papers_of(api, s2("oskar2"))
    assert await papers_of(api, s2("jonas")) == world_papers("jonas") | {"2403.00110"}


async def test_the_split_holds(corrected: dict[str, Any]) -> None:
    api = corrected["api"]
    assert await papers_of(api, s2("dana")) == {p for p in world_papers("dana") if p != "2403.00115"}
    assert await papers_of(api, str(corrected["other_dana"])) == {"2403.00115"}


async def test_the_claims_hold_and_the_log_and_the_status_say_what_happened(corrected: dict[str, Any]) -> None:
    api, readers = corrected["api"], corrected["readers"]
    for key in ("ada", "dana", "oskar", "jonas"):
        assert (await api.data(PROFILE, id=s2(key)))["researcher"]["claimed"] is True, key
    log = (await api.data(PROFILE, id=s2("ada")))["researcher"]["corrections"]
    assert [e["kind"] for e in log] == ["NOT_ME", "CLAIM"]
    status = await readers.operator("ingest", "status")
    line = next(line for line in status.splitlines() if line.startswith("corrections:"))
    assert "ingest write(s) kept from undoing" in line, line
