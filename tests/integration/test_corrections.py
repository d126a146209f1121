"""Corrections through the API with signed tokens (with and without the ORCID claim): claims, NOT_ME / IS_ME, splits
and merges; what applies at once and what waits for an operator (the CLI); idempotent retries, races, limits; and
every page, count, aggregate, cache and the CDN seeing an applied correction at once. Expected values come from the
seed definitions (graph_support.py), never from responses."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import itertools
import json
import threading
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import asyncpg
import httpx
import pytest
from typer.testing import CliRunner

from app import create_app
from cli import app as cli_app
from db.paging import decode_global_id, encode_global_id
from db.queries.figures import refresh_institution_figures, refresh_researcher_figures
from db.slugs import entity_slug, slugify
from tests.contract.conftest import operation_text
from tests.integration.graph_support import (
    BASE_DAY,
    PAPERS,
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

    async def run(
        self, query: str, variables: dict[str, Any] | None = None, *, as_: str | None = None, orcid: str | None = None
    ) -> Any:
        headers = bearer(hs256(as_, orcid=orcid)) if as_ is not None else {}
        response = await self.client.post(
            "/graphql", json={"query": query, "variables": variables or {}}, headers=headers
        )
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
        # Every stored figure as the write path leaves it, so that what a correction changes shows.
        await refresh_researcher_figures(conn, None)
        await refresh_institution_figures(conn, None)
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
    # Named by its Semantic Scholar id (read before the write): the answer is the profile as it is after it.
    by_s2 = "s2:" + next(r.s2 for r in RESEARCHERS if r.key == "wumo")
    claimed = (await api.data(CLAIM, {"id": by_s2}, as_=me, orcid=WUMO_ORCID))["claimResearcher"]
    assert (claimed["correction"]["kind"], claimed["correction"]["status"]) == ("CLAIM", "APPLIED")
    assert claimed["researcher"] == {"databaseId": int(wumo), "claimed": True, "viewerOwns": True}
    # Everyone sees that it is claimed; only its owner owns it; the public log never says who.
    assert (await api.data(PROFILE, {"id": wumo}, as_=other))["researcher"]["viewerOwns"] is False
    public = await api.run(PROFILE, {"id": wumo})
    assert public["data"]["researcher"]["claimed"] is True and public["data"]["researcher"]["viewerOwns"] is None
    assert [e["kind"] for e in public["data"]["researcher"]["corrections"]] == ["CLAIM"]
    assert me not in json.dumps(public)
    # The same claim again is the same correction.
    again = (await api.data(CLAIM, {"id": by_s2}, as_=me, orcid=WUMO_ORCID))["claimResearcher"]["correction"]
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
    answers = await asyncio.gather(*(api.data(CLAIM, {"id": wumo}, as_=r, orcid=WUMO_ORCID) for r in readers))
    statuses = sorted(a["claimResearcher"]["correction"]["status"] for a in answers)
    assert statuses == ["APPLIED", "PENDING", "PENDING", "PENDING"]
    owners = [r for r in readers if (await api.data(PROFILE, {"id": wumo}, as_=r))["researcher"]["viewerOwns"]]
    assert len(owners) == 1


def decode(global_id: str) -> int:
    kind, value = decode_global_id(global_id)
    assert kind == "Correction"
    return int(value)


# -- what an applied correction changes ----------------------------------------------------------------------------


def h_index(citations: list[int]) -> int:
    ranked = sorted(citations, reverse=True)
    return sum(1 for i, c in enumerate(ranked) if c >= i + 1)


def expected_profile(papers: list[PaperSeed], key: str) -> dict[str, Any]:
    """What the page shows for the papers the researcher `key` is on (the positions where every author is
    matched), from the seed definitions."""
    positions = {"first": 0, "middle": 0, "last": 0, "solo": 0, "matchedPapers": 0, "totalPapers": len(papers)}
    fields: dict[str, int] = {}
    for p in papers:
        for c in p.categories:
            fields[c] = fields.get(c, 0) + 1
        if all(a.researcher for a in p.authors):
            positions["matchedPapers"] += 1
            at = next(i for i, a in enumerate(p.authors, 1) if a.researcher == key)
            n = len(p.authors)
            positions["solo" if n == 1 else "first" if at == 1 else "last" if at == n else "middle"] += 1
    citations = [p.cited_by_count or 0 for p in papers]
    return {
        "paperCount": len(papers),
        "hIndexInArchive": h_index(citations),
        "citationCount": sum(citations),
        "authorPositions": positions,
        "fields": fields,
        "papers": {p.arxiv_id for p in papers},
    }


def shown(profile: dict[str, Any]) -> dict[str, Any]:
    return {
        "paperCount": profile["paperCount"],
        "hIndexInArchive": profile["hIndexInArchive"],
        "citationCount": profile["citationCount"],
        "authorPositions": profile["authorPositions"],
        "fields": {f["category"]: f["count"] for f in profile["fields"]},
        "papers": {n["arxivId"] for n in profile["papers"]["nodes"]},
    }


def shared_with(profile: dict[str, Any], researcher_id: str) -> int | None:
    return next(
        (c["sharedPapers"] for c in profile["coauthors"] if str(c["researcher"]["databaseId"]) == researcher_id), None
    )


def wumo_papers() -> list[PaperSeed]:
    return [p for p in PAPERS if any(a.researcher == "wumo" for a in p.authors)]


class _Purges(BaseHTTPRequestHandler):
    received: list[list[str]] = []

    def do_POST(self) -> None:  # noqa: N802 (http.server's name)
        body = self.rfile.read(int(self.headers["content-length"]))
        _Purges.received.append(json.loads(body)["tags"])
        self.send_response(204)
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        return None


@pytest.fixture
def purge_url() -> Iterator[str]:
    _Purges.received = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Purges)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/purge"
    finally:
        server.shutdown()
        server.server_close()


async def purged(at_least: int) -> list[str]:
    """The tags the CDN hook received, once `at_least` purges arrived (they run after the answer)."""
    for _ in range(500):
        if len(_Purges.received) >= at_least:
            break
        await asyncio.sleep(0.02)
    return [t for tags in _Purges.received for t in tags]


PAPER_AUTHORS = """query($id: String!) { paper(id: $id) { authors { position name researcher { databaseId } } } }"""
CHANGES = """query($since: DateTime!) { changes(since: $since, first: 100) {
  nodes { kind change databaseId node { ... on Paper { arxivId } } mergedInto { databaseId } } } }"""


async def test_not_me_takes_the_paper_off_every_page_count_and_cache_at_once(
    make_database: Any, redis_url: str, cache_namespace: str, purge_url: str
) -> None:
    async with api_on(make_database, redis_url, cache_namespace, purge_url=purge_url) as api:
        wumo, ada, owner = api.rid("wumo"), api.rid("ada"), reader()
        target = next(p for p in wumo_papers() if p.arxiv_id == "2401.00005")
        # Pages read (and cached, in Redis and as whole responses) before.
        before = (await api.data(PROFILE, {"id": wumo}))["researcher"]
        assert shown(before) == expected_profile(wumo_papers(), "wumo")
        await api.data(PROFILE, {"id": wumo})
        page = await api.client.get(
            "/graphql", params={"documentId": page_document_id(), "variables": json.dumps({"id": wumo})}
        )
        assert page.json()["data"]["researcher"]["paperCount"] == len(wumo_papers())
        ada_before = (await api.data(PROFILE, {"id": ada}))["researcher"]
        await api.data(CLAIM, {"id": wumo}, as_=owner, orcid=WUMO_ORCID)
        since = datetime.now(UTC)
        _Purges.received = []

        report = {"paper": target.arxiv_id, "researcher": wumo, "kind": "NOT_ME", "note": "Another Wumo Yan."}
        done = (await api.data(REPORT, report, as_=owner))["reportAuthorship"]
        assert (done["correction"]["kind"], done["correction"]["status"]) == ("NOT_ME", "APPLIED")
        assert done["researcher"]["paperCount"] == len(wumo_papers()) - 1

        # Every figure, list and aggregate, at once, through the caches that held the old ones.
        after = (await api.data(PROFILE, {"id": wumo}))["researcher"]
        remaining = [p for p in wumo_papers() if p is not target]
        assert shown(after) == expected_profile(remaining, "wumo")
        assert shared_with(after, ada) == shared_with(before, ada) - 1
        ada_after = (await api.data(PROFILE, {"id": ada}))["researcher"]
        assert shared_with(ada_after, wumo) == shared_with(ada_before, wumo) - 1
        assert ada_after["paperCount"] == ada_before["paperCount"]
        page = await api.client.get(
            "/graphql", params={"documentId": page_document_id(), "variables": json.dumps({"id": wumo})}
        )
        assert page.json()["data"]["researcher"]["paperCount"] == len(remaining)
        listed = await api.data("query($r: String!) { papers(filter: {researcher: $r}) { totalCount } }", {"r": wumo})
        assert listed["papers"]["totalCount"] == len(remaining)
        authors = (await api.data(PAPER_AUTHORS, {"id": target.arxiv_id}))["paper"]["authors"]
        wumo_at = next(i for i, a in enumerate(target.authors, 1) if a.researcher == "wumo")
        assert authors[wumo_at - 1]["researcher"] is None
        assert [a["researcher"] is not None for a in authors if a["position"] != wumo_at] == [
            a.researcher is not None for i, a in enumerate(target.authors, 1) if i != wumo_at
        ]
        # The public log says what and when, not who; the changes feed and the CDN see it.
        log = after["corrections"][0]
        assert (log["kind"], log["papers"]) == ("NOT_ME", [{"arxivId": target.arxiv_id}])
        assert target.arxiv_id in log["summary"] and owner not in json.dumps(after)
        changes = (await api.data(CHANGES, {"since": since.isoformat()}))["changes"]["nodes"]
        changed = {(c["kind"], c["databaseId"]) for c in changes}
        assert {("RESEARCHER", int(wumo)), ("RESEARCHER", int(ada))} <= changed
        assert {"arxivId": target.arxiv_id} in [c["node"] for c in changes if c["kind"] == "PAPER"]
        tags = await purged(1)
        assert {f"researcher:{wumo}", f"researcher:{ada}", f"paper:{target.arxiv_id}", "lists"} <= set(tags)


def page_document_id() -> str:
    return "sha256:" + hashlib.sha256(operation_text("ResearcherPage").encode()).hexdigest()


async def test_is_me_puts_a_missed_paper_on_the_profile_and_refuses_a_name_that_does_not_match(api: Api) -> None:
    wumo, owner = api.rid("wumo"), reader()
    await api.data(CLAIM, {"id": wumo}, as_=owner, orcid=WUMO_ORCID)
    # No author of this paper is named like Wumo Yan: refused, saying why, and nothing recorded.
    nobody = next(p for p in PAPERS if p.arxiv_id == "astro-ph/9901001")
    refused = await api.run(REPORT, {"paper": nobody.arxiv_id, "researcher": wumo, "kind": "IS_ME"}, as_=owner)
    assert code(refused) == "BAD_USER_INPUT"
    message = refused["errors"][0]["message"]
    assert all(a.name in message for a in nobody.authors) and "Wumo Yan" in message
    zed = await api.run(
        REPORT, {"paper": MISSED.arxiv_id, "researcher": wumo, "kind": "IS_ME", "position": 3}, as_=owner
    )
    assert code(zed) == "BAD_USER_INPUT" and "Zed Z" in zed["errors"][0]["message"]
    assert (await api.data(MINE, as_=owner))["viewer"]["corrections"]["totalCount"] == 1  # the claim

    # "W. Yan", unmatched on MISSED, is Wumo Yan: the paper joins the profile.
    done = (await api.data(REPORT, {"paper": MISSED.arxiv_id, "researcher": wumo, "kind": "IS_ME"}, as_=owner))[
        "reportAuthorship"
    ]
    assert (done["correction"]["status"], done["researcher"]["paperCount"]) == ("APPLIED", len(wumo_papers()) + 1)
    after = (await api.data(PROFILE, {"id": wumo}))["researcher"]
    as_wumo = PaperSeed(
        **{**MISSED.__dict__, "authors": (MISSED.authors[0], AuthorSeed("W. Yan", "wumo"), MISSED.authors[2])}
    )
    assert shown(after) == expected_profile([*wumo_papers(), as_wumo], "wumo")
    authors = (await api.data(PAPER_AUTHORS, {"id": MISSED.arxiv_id}))["paper"]["authors"]
    assert [a["researcher"] and str(a["researcher"]["databaseId"]) for a in authors] == [api.rid("ada"), wumo, None]


async def test_a_split_makes_a_new_profile_and_a_merge_makes_one(api: Api) -> None:
    wumo, jose, owner = api.rid("wumo"), api.rid("jose"), reader()
    await api.data(CLAIM, {"id": wumo}, as_=owner, orcid=WUMO_ORCID)
    since = datetime.now(UTC)
    moved = ["2401.00001", "2401.00002", "2401.00003"]
    split = (await api.data(SPLIT, {"id": wumo, "papers": moved}, as_=owner))["splitResearcher"]
    new = split["correction"]["newResearcher"]
    assert split["correction"]["status"] == "APPLIED"
    assert (new["name"], new["paperCount"]) == ("Wumo Yan", len(moved))
    assert split["researcher"]["paperCount"] == len(wumo_papers()) - len(moved)
    other = (await api.data(PROFILE, {"id": str(new["databaseId"])}))["researcher"]
    assert {n["arxivId"] for n in other["papers"]["nodes"]} == set(moved)
    assert other["claimed"] is False  # the other person's profile, not the reader's
    assert [e["kind"] for e in other["corrections"]] == ["SPLIT"]
    changes = (await api.data(CHANGES, {"since": since.isoformat()}))["changes"]["nodes"]
    assert ("RESEARCHER", new["databaseId"]) in {(c["kind"], c["databaseId"]) for c in changes}
    sitemap = await api.data("{ sitemap(kind: RESEARCHER, chunk: 0, chunkSize: 1000) { entries { path } } }")
    slug = entity_slug(new["databaseId"], slugify("Wumo Yan"))
    assert f"/researchers/{slug}" in {e["path"] for e in sitemap["sitemap"]["entries"]}

    # A merge of a profile the reader does not own waits for an operator.
    asked = (await api.data(MERGE, {"ids": [wumo, jose]}, as_=owner))["requestMerge"]["correction"]
    assert asked["status"] == "PENDING"
    approved = await api.cli("corrections", "approve", str(decode(asked["id"])))
    assert approved.exit_code == 0, approved.output
    merged = (await api.data(PROFILE, {"id": jose}))["researcher"]
    jose_papers = [p for p in PAPERS if any(a.researcher == "jose" for a in p.authors)]
    assert merged["databaseId"] == int(wumo)
    assert merged["paperCount"] == len(wumo_papers()) - len(moved) + len(jose_papers)
    assert (await api.data(MERGE, {"ids": [wumo, jose]}, as_=owner))["requestMerge"]["correction"]["id"] == asked["id"]
    changes = (await api.data(CHANGES, {"since": since.isoformat()}))["changes"]["nodes"]
    assert {
        "kind": "RESEARCHER",
        "change": "MERGED",
        "databaseId": int(jose),
        "node": None,
        "mergedInto": {"databaseId": int(wumo)},
    } in changes
    path = await api.data(
        "query($p: String!) { resolvePath(path: $p) { matchedBy node { id } } }",
        {"p": f"/researchers/{entity_slug(int(jose), slugify('José Núñez'))}"},
    )
    assert path["resolvePath"] == {"matchedBy": "MERGED", "node": {"id": encode_global_id("Researcher", int(wumo))}}


async def test_the_same_request_twice_is_one_correction(api: Api) -> None:
    wumo, owner, stranger = api.rid("wumo"), reader(), reader()
    report = {"paper": "2401.00007", "researcher": wumo, "kind": "NOT_ME"}
    # Sent four times at once by a reader who does not own the profile: one pending correction.
    answers = await asyncio.gather(*(api.data(REPORT, report, as_=stranger) for _ in range(4)))
    assert len({a["reportAuthorship"]["correction"]["id"] for a in answers}) == 1
    assert (await api.data(MINE, as_=stranger))["viewer"]["corrections"]["totalCount"] == 1
    # Applied for its owner; retried after it applied (the paper is off the profile now): the same correction.
    await api.data(CLAIM, {"id": wumo}, as_=owner, orcid=WUMO_ORCID)
    first = (await api.data(REPORT, report, as_=owner))["reportAuthorship"]["correction"]
    retried = (await api.data(REPORT, report, as_=owner))["reportAuthorship"]["correction"]
    assert retried == first and first["status"] == "APPLIED"
    split = {"id": wumo, "papers": ["2401.00010", "2401.00011"]}
    one = (await api.data(SPLIT, split, as_=owner))["splitResearcher"]["correction"]
    two = await api.data(SPLIT, {**split, "papers": list(reversed(split["papers"]))}, as_=owner)
    assert two["splitResearcher"]["correction"]["id"] == one["id"]
    # Once the reader changes their mind, saying it again is a new correction.
    back = {**report, "kind": "IS_ME"}
    assert (await api.data(REPORT, back, as_=owner))["reportAuthorship"]["correction"]["status"] == "APPLIED"
    again = (await api.data(REPORT, report, as_=owner))["reportAuthorship"]["correction"]
    assert again["id"] != first["id"] and again["status"] == "APPLIED"


async def test_limits_hold_per_reader(make_database: Any, redis_url: str, cache_namespace: str) -> None:
    limits = {"corrections_pending_max": 2, "corrections_daily_max": 4}
    async with api_on(make_database, redis_url, cache_namespace, **limits) as api:
        waiting = reader()
        for key in ("wumo", "ada"):
            assert (await api.data(CLAIM, {"id": api.rid(key)}, as_=waiting))["claimResearcher"]["correction"]
        refused = await api.run(CLAIM, {"id": api.rid("jose")}, as_=waiting)
        assert code(refused) == "LIMIT_EXCEEDED" and "waiting for an operator" in refused["errors"][0]["message"]
        # Asking again for one it has is still that one, past the limit.
        assert "errors" not in await api.run(CLAIM, {"id": api.rid("ada")}, as_=waiting)

        owner = reader()
        await api.data(CLAIM, {"id": api.rid("wumo")}, as_=owner, orcid=WUMO_ORCID)
        for n in (1, 2, 3):
            body = await api.run(
                REPORT, {"paper": f"2401.0000{n}", "researcher": api.rid("wumo"), "kind": "NOT_ME"}, as_=owner
            )
            assert "errors" not in body
        refused = await api.run(
            REPORT, {"paper": "2401.00004", "researcher": api.rid("wumo"), "kind": "NOT_ME"}, as_=owner
        )
        assert code(refused) == "LIMIT_EXCEEDED" and "today" in refused["errors"][0]["message"]

        long_note = await api.run(CLAIM, {"id": api.rid("jose"), "note": "x" * 2001}, as_=reader())
        assert code(long_note) == "BAD_USER_INPUT" and "2000" in long_note["errors"][0]["message"]


async def test_the_site_s_operations_stay_within_their_budgets_applied_too(api: Api) -> None:
    """The contract measures the pending path on the demo data (tests/contract); here each is applied."""
    from tests.contract.conftest import budgets

    wumo, owner = api.rid("wumo"), reader()
    limits = budgets()

    async def counted(name: str, variables: dict[str, Any], **who: Any) -> tuple[Any, int]:
        await api.data("{ __typename }", **who)  # the pool's connections opened, as for the contract's operations
        api.counter.reset()
        data = await api.data(operation_text(name), variables, **who)
        return data, api.counter.count

    seen: dict[str, int] = {}
    data, seen["ClaimResearcher"] = await counted("ClaimResearcher", {"id": wumo}, as_=owner, orcid=WUMO_ORCID)
    assert data["claimResearcher"]["correction"]["status"] == "APPLIED"
    for kind, paper in (("NOT_ME", "2401.00005"), ("IS_ME", MISSED.arxiv_id)):
        variables = {"paperId": paper, "researcherId": wumo, "kind": kind}
        data, seen[f"ReportAuthorship {kind}"] = await counted("ReportAuthorship", variables, as_=owner)
        assert data["reportAuthorship"]["correction"]["status"] == "APPLIED"
    data, seen["ViewerCorrections"] = await counted("ViewerCorrections", {}, as_=owner)
    assert data["viewer"]["corrections"]["totalCount"] == 3
    data, seen["ResearcherCorrections"] = await counted("ResearcherCorrections", {"id": wumo})
    assert len(data["researcher"]["corrections"]) == 3
    data, seen["ViewerResearcherState"] = await counted("ViewerResearcherState", {"id": wumo}, as_=owner)
    assert data["researcher"]["viewerOwns"] is True
    assert all(n <= limits[name.split()[0]] for name, n in seen.items()), seen


async def test_two_readers_profiles_are_not_merged_by_hand_or_by_semantic_scholar(api: Api) -> None:
    wumo, ada = api.rid("wumo"), api.rid("ada")
    first, second = reader(), reader()
    await api.data(CLAIM, {"id": wumo}, as_=first, orcid=WUMO_ORCID)
    asked = (await api.data(CLAIM, {"id": ada}, as_=second))["claimResearcher"]["correction"]
    assert (await api.cli("corrections", "approve", str(decode(asked["id"])))).exit_code == 0
    refused = await api.cli("merge-researchers", ada, wumo)
    assert refused.exit_code == 1 and "two readers' claimed profiles" in refused.output
    for who, key in ((first, "wumo"), (second, "ada")):
        profile = (await api.data(PROFILE, {"id": api.rid(key)}, as_=who))["researcher"]
        assert (profile["databaseId"], profile["viewerOwns"]) == (int(api.rid(key)), True)
    shown = await api.cli("corrections", "show", str(decode(asked["id"])))
    assert "kept from 1 later write(s)" in shown.output
