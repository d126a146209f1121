"""Corrections through the API with signed tokens (with and without the ORCID claim): claims, NOT_ME / IS_ME, splits
and merges; what applies at once and what waits for an operator (the CLI); idempotent retries, races, limits; and
every page, count, aggregate, cache and the CDN seeing an applied correction at once. Expected values come from the
seed definitions (graph_support.py), never from responses."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import asyncpg
import httpx
import pytest
from typer.testing import CliRunner

from app import create_app
from cli import app as cli_app
from tests.integration.graph_support import (
    BASE_DAY,
    RESEARCHERS,
    AuthorSeed,
    PaperSeed,
    Seeded,
    StatementCounter,
    insert_paper,
    seed,
    serving,
    settings_for,
)
from tests.jwt_support import SECRET, bearer, hs256

WUMO_ORCID = next(r.orcid for r in RESEARCHERS if r.key == "wumo")
# A paper whose second author is Wumo Yan under an initial, not linked to any profile (the matching missed them),
# and one by José Núñez with nobody named like Wumo on it.
MISSED = PaperSeed(
    "2402.00001",
    "A paper the matching missed",
    ("cs.DC",),
    BASE_DAY + timedelta(days=40),
    (AuthorSeed("Ada Lovelace", "ada", ("mit",)), AuthorSeed("W. Yan", None, ("umontreal",)), AuthorSeed("Zed Z")),
    cited_by_count=50,
)

CLAIM = """mutation($id: String!, $note: String) {
  claimResearcher(input: {researcherId: $id, note: $note}) {
    correction { id kind status summary researchers { databaseId } } researcher { databaseId claimed viewerOwns }
  }
}"""
REPORT = """mutation($paper: String!, $researcher: String!, $kind: AuthorshipReport!, $note: String, $position: Int) {
  reportAuthorship(input: {paperId: $paper, researcherId: $researcher, kind: $kind, note: $note,
                           position: $position}) {
    correction { id kind status summary papers { arxivId } } researcher { databaseId paperCount }
  }
}"""
SPLIT = """mutation($id: String!, $papers: [String!]!) {
  splitResearcher(input: {researcherId: $id, paperIds: $papers}) {
    correction { id kind status newResearcher { databaseId name paperCount } } researcher { databaseId paperCount }
  }
}"""
MERGE = """mutation($ids: [String!]!) {
  requestMerge(input: {researcherIds: $ids}) {
    correction { id kind status newResearcher { databaseId } } researcher { databaseId paperCount mergedIds }
  }
}"""
MINE = """query($first: Int, $after: String) { viewer { orcid corrections(first: $first, after: $after) {
  totalCount pageInfo { hasNextPage endCursor }
  nodes { id kind status reason note summary createdAt decidedAt researchers { databaseId } papers { arxivId } }
} } }"""
PROFILE = """query($id: String!) { researcher(id: $id) {
  databaseId claimed viewerOwns paperCount hIndexInArchive citationCount
  authorPositions { first middle last solo matchedPapers totalPapers }
  fields { category count }
  coauthors(first: 100) { researcher { databaseId } sharedPapers }
  affiliations { institution { rorId } }
  papers(first: 100) { totalCount nodes { arxivId } }
  corrections { kind appliedAt summary papers { arxivId } researchers { databaseId } }
} }"""


def reader() -> str:
    return f"reader-{uuid.uuid4().hex[:8]}"


_databases = itertools.count()


@dataclass
class Api:
    client: httpx.AsyncClient
    seeded: Seeded
    counter: StatementCounter
    env: dict[str, str]

    async def run(self, query: str, variables: dict[str, Any] | None = None, *, as_: str | None = None,
                  orcid: str | None = None) -> Any:
        headers = bearer(hs256(as_, orcid=orcid)) if as_ is not None else {}
        response = await self.client.post("/graphql", json={"query": query, "variables": variables or {}},
                                          headers=headers)
        assert response.status_code == 200, response.text
        return response.json()

    async def data(self, query: str, variables: dict[str, Any] | None = None, **who: Any) -> Any:
        body = await self.run(query, variables, **who)
        assert "errors" not in body, body["errors"]
        return body["data"]

    def rid(self, key: str) -> str:
        return str(self.seeded.researcher_ids[key])

    async def cli(self, *args: str) -> Any:
        """The operator's command, in a thread of its own (it runs its own event loop)."""
        return await asyncio.to_thread(CliRunner().invoke, cli_app, list(args), env=self.env)


def code(body: dict[str, Any]) -> str:
    return str(body["errors"][0]["extensions"]["code"])


@contextlib.asynccontextmanager
async def api_on(make_database: Any, redis_url: str, cache_namespace: str, **settings: Any) -> AsyncIterator[Api]:
    """A database of the test's own (corrections change it), the seed plus MISSED, served with Redis."""
    seeded = await seed(await make_database(f"corrections_{next(_databases)}"))
    conn = await asyncpg.connect(seeded.dsn)
    try:
        await insert_paper(conn, seeded, MISSED)
    finally:
        await conn.close()
    namespace = f"{cache_namespace}-corr{uuid.uuid4().hex[:6]}"
    counter = StatementCounter()
    options: dict[str, Any] = {"jwt_secret": SECRET, "REDIS_URL": redis_url, "cache_namespace": namespace}
    app = create_app(settings_for(seeded.dsn, **options, **settings), query_logger=counter)
    env = {"DATABASE_URL": seeded.dsn, "REDIS_URL": redis_url, "WOVEPAPER_CACHE_NAMESPACE": namespace}
    env |= {f"WOVEPAPER_{k.upper()}": str(v) for k, v in settings.items()}
    async with serving(app) as client:
        yield Api(client, seeded, counter, env)


@pytest.fixture
async def api(make_database: Any, redis_url: str, cache_namespace: str) -> AsyncIterator[Api]:
    async with api_on(make_database, redis_url, cache_namespace) as api:
        yield api


async def test_anonymous_readers_are_unauthenticated(api: Api) -> None:
    wumo = api.rid("wumo")
    for query, variables in (
        (CLAIM, {"id": wumo}),
        (REPORT, {"paper": "2401.00001", "researcher": wumo, "kind": "NOT_ME"}),
        (SPLIT, {"id": wumo, "papers": ["2401.00001"]}),
        (MERGE, {"ids": [wumo, api.rid("ada")]}),
    ):
        assert code(await api.run(query, variables)) == "UNAUTHENTICATED"
    profile = (await api.data(PROFILE, {"id": wumo}))["researcher"]
    assert (profile["claimed"], profile["viewerOwns"], profile["corrections"]) == (False, None, [])
    assert await api.data("{ viewer { id } }") == {"viewer": None}


async def test_a_claim_by_the_profile_s_orcid_applies_at_once(api: Api) -> None:
    wumo, me, other = api.rid("wumo"), reader(), reader()
    mine = await api.data(MINE, as_=me, orcid=WUMO_ORCID)
    assert mine["viewer"]["orcid"] == WUMO_ORCID and mine["viewer"]["corrections"]["totalCount"] == 0
    claimed = (await api.data(CLAIM, {"id": wumo}, as_=me, orcid=WUMO_ORCID))["claimResearcher"]
    assert (claimed["correction"]["kind"], claimed["correction"]["status"]) == ("CLAIM", "APPLIED")
    assert claimed["researcher"] == {"databaseId": int(wumo), "claimed": True, "viewerOwns": True}
    # Everyone sees that it is claimed; only its owner owns it; the public log never says who.
    assert (await api.data(PROFILE, {"id": wumo}, as_=other))["researcher"]["viewerOwns"] is False
    public = await api.run(PROFILE, {"id": wumo})
    assert public["data"]["researcher"]["claimed"] is True and public["data"]["researcher"]["viewerOwns"] is None
    assert [e["kind"] for e in public["data"]["researcher"]["corrections"]] == ["CLAIM"]
    assert me not in json.dumps(public)
    # The same claim again is the same correction.
    again = (await api.data(CLAIM, {"id": wumo}, as_=me, orcid=WUMO_ORCID))["claimResearcher"]["correction"]
    assert again["id"] == claimed["correction"]["id"]
    assert (await api.data(MINE, as_=me))["viewer"]["corrections"]["totalCount"] == 1


async def test_a_claim_without_the_orcid_waits_for_an_operator_who_approves_or_rejects(api: Api) -> None:
    wumo, ada, me, other = api.rid("wumo"), api.rid("ada"), reader(), reader()
    # A token without the claim, or with another ORCID iD: pending.
    pending = (await api.data(CLAIM, {"id": wumo, "note": "It is me."}, as_=me))["claimResearcher"]
    assert pending["correction"]["status"] == "PENDING" and pending["researcher"]["claimed"] is False
    wrong = await api.data(CLAIM, {"id": ada}, as_=other, orcid="0000-0001-5109-3700")
    assert wrong["claimResearcher"]["correction"]["status"] == "PENDING"

    listed = await api.cli("corrections", "list", "--status", "pending")
    assert listed.exit_code == 0, listed.output
    assert f"\tCLAIM\tpending\t{me}\t{wumo}\t" in listed.output and f"\t{other}\t{ada}\t" in listed.output
    first = decode(pending["correction"]["id"])
    shown = await api.cli("corrections", "show", str(first))
    assert shown.exit_code == 0, shown.output
    assert "It is me." in shown.output and "approving would: make the reader the profile's owner" in shown.output

    approved = await api.cli("corrections", "approve", str(first), "--operator", "olga")
    assert approved.exit_code == 0, approved.output
    assert f"applied correction {first} (CLAIM): researcher {wumo} (Wumo Yan) is now owned by reader {me}" in (
        approved.output
    )
    assert (await api.data(PROFILE, {"id": wumo}, as_=me))["researcher"]["viewerOwns"] is True
    second = decode(wrong["claimResearcher"]["correction"]["id"])
    why = "Not the same ORCID iD."
    rejected = await api.cli("corrections", "reject", str(second), "--reason", why, "--operator", "olga")
    assert rejected.exit_code == 0, rejected.output
    assert "nothing in the archive changed" in rejected.output
    assert (await api.data(PROFILE, {"id": ada}))["researcher"]["claimed"] is False
    theirs = (await api.data(MINE, as_=other))["viewer"]["corrections"]["nodes"]
    assert [(n["status"], n["reason"]) for n in theirs] == [("REJECTED", "Not the same ORCID iD.")]
    assert theirs[0]["decidedAt"] is not None
    # Decided once: a second decision is refused; every decision is logged with who and why.
    assert (await api.cli("corrections", "approve", str(second))).exit_code == 1
    shown = await api.cli("corrections", "show", str(second))
    assert "rejected by olga at" in shown.output and "reason: Not the same ORCID iD." in shown.output


async def test_a_claim_on_an_owned_profile_waits_and_never_takes_it_over(api: Api) -> None:
    wumo, owner, second = api.rid("wumo"), reader(), reader()
    await api.data(CLAIM, {"id": wumo}, as_=owner, orcid=WUMO_ORCID)
    later = (await api.data(CLAIM, {"id": wumo}, as_=second, orcid=WUMO_ORCID))["claimResearcher"]
    assert later["correction"]["status"] == "PENDING"
    assert later["researcher"]["viewerOwns"] is False
    assert (await api.data(PROFILE, {"id": wumo}, as_=owner))["researcher"]["viewerOwns"] is True


async def test_two_readers_racing_to_claim_one_profile_leave_one_owner(api: Api) -> None:
    wumo = api.rid("wumo")
    readers = [reader() for _ in range(4)]
    answers = await asyncio.gather(
        *(api.data(CLAIM, {"id": wumo}, as_=r, orcid=WUMO_ORCID) for r in readers)
    )
    statuses = sorted(a["claimResearcher"]["correction"]["status"] for a in answers)
    assert statuses == ["APPLIED", "PENDING", "PENDING", "PENDING"]
    owners = [r for r in readers if (await api.data(PROFILE, {"id": wumo}, as_=r))["researcher"]["viewerOwns"]]
    assert len(owners) == 1


def decode(global_id: str) -> int:
    from db.paging import decode_global_id

    kind, value = decode_global_id(global_id)
    assert kind == "Correction"
    return int(value)
