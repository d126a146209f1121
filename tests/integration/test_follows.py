"""Follows and the viewer's feed through the API: idempotent mutations, counts that lose no concurrent update,
the per-reader cap, the `following` lists, and a feed of the followed researchers' and institutions' papers,
newest first, each once, paged by cursor or number. Expected values come from the seed definitions."""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import asyncpg
import httpx
import pytest

from app import create_app
from db.filters import FEED_FILTERS, Clause, Fragment
from db.queries.papers import page_papers_scanning
from resolvers.viewer import FEED_SORT
from tests.integration.graph_support import (
    INSTITUTIONS,
    PAPERS,
    RESEARCHERS,
    Seeded,
    seeded_database,
    serving,
    settings_for,
)
from tests.jwt_support import SECRET, bearer, hs256

FOLLOW = """
mutation Follow($id: String!) {
  followResearcher(input: {id: $id}) { researcher { id databaseId viewerIsFollowing followerCount } }
}"""
UNFOLLOW = """
mutation Unfollow($id: String!) {
  unfollowResearcher(input: {id: $id}) { researcher { id databaseId viewerIsFollowing followerCount } }
}"""
FOLLOW_INSTITUTION = """
mutation Follow($id: String!) {
  followInstitution(input: {id: $id}) { institution { databaseId viewerIsFollowing followerCount } }
}"""
UNFOLLOW_INSTITUTION = """
mutation Unfollow($id: String!) {
  unfollowInstitution(input: {id: $id}) { institution { databaseId viewerIsFollowing followerCount } }
}"""
RESEARCHER = "query R($id: String!) { researcher(id: $id) { databaseId followerCount viewerIsFollowing } }"
FEED = """
query Feed($first: Int, $after: String, $page: Int, $filter: PaperFilter) {
  viewer {
    feed(first: $first, after: $after, page: $page, filter: $filter) {
      totalCount
      pageInfo { hasNextPage endCursor page }
      nodes { databaseId arxivId published authors { researcher { databaseId } } }
    }
  }
}"""
FOLLOWING = """
query Following($first: Int, $after: String, $page: Int) {
  viewer {
    following(first: $first, after: $after, page: $page) {
      totalCount
      pageInfo { hasNextPage endCursor }
      nodes { databaseId name viewerIsFollowing followerCount }
    }
    followingInstitutions { totalCount nodes { databaseId rorId viewerIsFollowing } }
  }
}"""


@dataclass
class Api:
    client: httpx.AsyncClient
    seeded: Seeded

    async def run(self, query: str, variables: dict[str, Any] | None = None, *, as_: str | None = None) -> Any:
        headers = bearer(hs256(as_)) if as_ is not None else {}
        body = {"query": query, "variables": variables or {}}
        response = await self.client.post("/graphql", json=body, headers=headers)
        assert response.status_code == 200, response.text
        return response.json()

    async def data(self, query: str, variables: dict[str, Any] | None = None, *, as_: str | None = None) -> Any:
        body = await self.run(query, variables, as_=as_)
        assert "errors" not in body, body["errors"]
        return body["data"]

    def researcher(self, key: str) -> str:
        return str(self.seeded.researcher_ids[key])


def error_code(body: dict[str, Any]) -> str:
    return str(body["errors"][0]["extensions"]["code"])


def reader() -> str:
    return f"reader-{uuid.uuid4().hex[:8]}"


@contextlib.asynccontextmanager
async def api_on(make_database: Any, name: str, **settings: Any) -> AsyncIterator[Api]:
    seeded = await seeded_database(make_database, name)
    app = create_app(settings_for(seeded.dsn, jwt_secret=SECRET, **settings))
    async with serving(app) as client:
        yield Api(client, seeded)


@pytest.fixture(scope="module")
async def shared(make_database: Any) -> AsyncIterator[Api]:
    """One database for the tests that only read what their own readers did (each test has fresh readers)."""
    async with api_on(make_database, "follows") as api:
        yield api


async def test_anonymous_readers_see_nulls_and_cannot_write(shared: Api) -> None:
    data = await shared.data(RESEARCHER, {"id": shared.researcher("wumo")})
    assert data["researcher"]["viewerIsFollowing"] is None
    assert data["researcher"]["followerCount"] >= 0
    for query in (FOLLOW, UNFOLLOW, FOLLOW_INSTITUTION):
        body = await shared.run(query, {"id": shared.researcher("wumo")})
        assert error_code(body) == "UNAUTHENTICATED"
    assert error_code(await shared.run("mutation { rotateFeedToken { feedUrl } }")) == "UNAUTHENTICATED"
    assert (await shared.data("{ viewer { id } }")) == {"viewer": None}


async def followers(api: Api, key: str) -> int:
    count: int = (await api.data(RESEARCHER, {"id": api.researcher(key)}))["researcher"]["followerCount"]
    return count


async def test_follow_and_unfollow_are_idempotent_and_counted(make_database: Any) -> None:
    # Its own database: every count here is exact, no other test's readers among them.
    async with api_on(make_database, "follows_count") as api:
        wumo, one, two = api.researcher("wumo"), reader(), reader()
        first = (await api.data(FOLLOW, {"id": wumo}, as_=one))["followResearcher"]["researcher"]
        assert (first["viewerIsFollowing"], first["followerCount"]) == (True, 1)
        again = (await api.data(FOLLOW, {"id": wumo}, as_=one))["followResearcher"]["researcher"]
        assert (again["viewerIsFollowing"], again["followerCount"]) == (True, 1)
        other = (await api.data(FOLLOW, {"id": wumo}, as_=two))["followResearcher"]["researcher"]
        assert other["followerCount"] == 2
        # Each reader sees their own state; everyone sees the count.
        assert (await api.data(RESEARCHER, {"id": wumo}, as_=one))["researcher"]["viewerIsFollowing"] is True
        assert (await api.data(RESEARCHER, {"id": wumo}, as_=reader()))["researcher"]["viewerIsFollowing"] is False
        assert await followers(api, "wumo") == 2
        gone = (await api.data(UNFOLLOW, {"id": wumo}, as_=one))["unfollowResearcher"]["researcher"]
        assert (gone["viewerIsFollowing"], gone["followerCount"]) == (False, 1)
        still = (await api.data(UNFOLLOW, {"id": wumo}, as_=one))["unfollowResearcher"]["researcher"]
        assert (still["viewerIsFollowing"], still["followerCount"]) == (False, 1)
        never = (await api.data(UNFOLLOW, {"id": api.researcher("jose")}, as_=one))["unfollowResearcher"]
        assert never["researcher"]["followerCount"] == 0
        inst = (await api.data(FOLLOW_INSTITUTION, {"id": "0161xgx34"}, as_=one))["followInstitution"]["institution"]
        assert (inst["viewerIsFollowing"], inst["followerCount"]) == (True, 1)
        inst = (await api.data(UNFOLLOW_INSTITUTION, {"id": "0161xgx34"}, as_=one))["unfollowInstitution"]
        assert inst["institution"]["followerCount"] == 0
        # Counts stay right whoever writes: follows moved by a merge, follows gone with their researcher.
        conn = await asyncpg.connect(api.seeded.dsn)
        try:
            await conn.execute(
                "UPDATE follows SET researcher_id = $1 WHERE viewer_id = $2", int(api.researcher("ada")), two
            )
            assert (await followers(api, "wumo"), await followers(api, "ada")) == (0, 1)
            await conn.execute("DELETE FROM researchers WHERE id = $1", int(api.researcher("ada")))
            assert await conn.fetchval("SELECT follow_count FROM viewers WHERE id = $1", two) == 0
        finally:
            await conn.close()


async def test_every_id_form_names_the_same_researcher_and_unknown_ids_are_not_found(shared: Api) -> None:
    who = reader()
    wumo = next(r for r in RESEARCHERS if r.key == "wumo")
    ids = [shared.researcher("wumo"), f"{shared.researcher('wumo')}-wumo-yan", f"s2:{wumo.s2}", wumo.orcid]
    followed = [await shared.data(FOLLOW, {"id": i}, as_=who) for i in ids]
    assert {f["followResearcher"]["researcher"]["databaseId"] for f in followed} == {int(shared.researcher("wumo"))}
    following = (await shared.data(FOLLOWING, as_=who))["viewer"]["following"]
    assert following["totalCount"] == 1
    for unknown in ("999999999", "s2:1", "0000-0001-5109-3700"):
        assert error_code(await shared.run(FOLLOW, {"id": unknown}, as_=who)) == "NOT_FOUND"
        assert error_code(await shared.run(UNFOLLOW, {"id": unknown}, as_=who)) == "NOT_FOUND"
    assert error_code(await shared.run(FOLLOW, {"id": "not an id"}, as_=who)) == "BAD_USER_INPUT"
    assert error_code(await shared.run(FOLLOW_INSTITUTION, {"id": "0aaaaaa00"}, as_=who)) == "NOT_FOUND"
    by_name = await shared.data(FOLLOW_INSTITUTION, {"id": "Université de Montréal"}, as_=who)
    assert by_name["followInstitution"]["institution"]["databaseId"] == shared.seeded.institution_ids["umontreal"]


async def test_follows_per_reader_are_capped_researchers_and_institutions_together(make_database: Any) -> None:
    async with api_on(make_database, "follows", max_follows=2) as api:
        who = reader()
        await api.data(FOLLOW, {"id": api.researcher("wumo")}, as_=who)
        await api.data(FOLLOW_INSTITUTION, {"id": "042nb2s44"}, as_=who)
        over = await api.run(FOLLOW, {"id": api.researcher("ada")}, as_=who)
        assert error_code(over) == "LIMIT_EXCEEDED" and "2" in over["errors"][0]["message"]
        assert error_code(await api.run(FOLLOW_INSTITUTION, {"id": "057zh3y96"}, as_=who)) == "LIMIT_EXCEEDED"
        # Following again what is already followed is no new follow: fine at the cap.
        await api.data(FOLLOW, {"id": api.researcher("wumo")}, as_=who)
        await api.data(UNFOLLOW, {"id": api.researcher("wumo")}, as_=who)
        await api.data(FOLLOW, {"id": api.researcher("ada")}, as_=who)


async def test_concurrent_follows_lose_no_update(make_database: Any) -> None:
    async with api_on(make_database, "follows", pool_max_size=10) as api:
        target = api.researcher("ada")
        before = await followers(api, "ada")
        readers = [reader() for _ in range(2)]

        async def churn(who: str) -> None:
            for _ in range(10):
                await api.data(FOLLOW, {"id": target}, as_=who)
                await api.data(UNFOLLOW, {"id": target}, as_=who)
            await api.data(FOLLOW, {"id": target}, as_=who)

        await asyncio.gather(*(churn(who) for who in readers), *(churn(reader()) for _ in range(4)))
        count = await followers(api, "ada")
        assert count == before + 6
        conn = await asyncpg.connect(api.seeded.dsn)
        try:
            stored = await conn.fetchval("SELECT count(*) FROM follows WHERE researcher_id = $1", int(target))
        finally:
            await conn.close()
        assert stored == count


async def test_one_reader_racing_past_the_cap_gets_exactly_the_cap(make_database: Any) -> None:
    async with api_on(make_database, "follows", max_follows=2, pool_max_size=10) as api:
        who = reader()
        bodies = await asyncio.gather(
            *(api.run(FOLLOW, {"id": api.researcher(key)}, as_=who) for key in ("wumo", "ada", "jose")),
            api.run(FOLLOW_INSTITUTION, {"id": "057zh3y96"}, as_=who),
        )
        assert sum("errors" not in b for b in bodies) == 2
        assert sum("errors" in b and error_code(b) == "LIMIT_EXCEEDED" for b in bodies) == 2


async def test_following_lists_most_recent_first_and_pages(shared: Api) -> None:
    who = reader()
    for key in ("jose", "wumo", "ada"):
        await shared.data(FOLLOW, {"id": shared.researcher(key)}, as_=who)
    await shared.data(FOLLOW_INSTITUTION, {"id": "057zh3y96"}, as_=who)
    data = (await shared.data(FOLLOWING, {"first": 2}, as_=who))["viewer"]
    page = data["following"]
    assert page["totalCount"] == 3 and page["pageInfo"]["hasNextPage"] is True
    assert [n["name"] for n in page["nodes"]] == ["Ada Lovelace", "Wumo Yan"]
    assert all(n["viewerIsFollowing"] is True for n in page["nodes"])
    rest = (await shared.data(FOLLOWING, {"first": 2, "after": page["pageInfo"]["endCursor"]}, as_=who))["viewer"]
    assert [n["name"] for n in rest["following"]["nodes"]] == ["José Núñez"]
    assert rest["following"]["pageInfo"]["hasNextPage"] is False
    numbered = (await shared.data(FOLLOWING, {"first": 2, "page": 2}, as_=who))["viewer"]["following"]
    assert [n["name"] for n in numbered["nodes"]] == ["José Núñez"]
    assert data["followingInstitutions"]["nodes"] == [
        {"databaseId": shared.seeded.institution_ids["tokyo"], "rorId": "057zh3y96", "viewerIsFollowing": True}
    ]
    bad = await shared.run(FOLLOWING, {"after": "bm90IGEgY3Vyc29y"}, as_=who)
    assert error_code(bad) == "BAD_USER_INPUT"


def expected_feed(seeded: Seeded, researchers: set[str], institutions: set[str]) -> list[int]:
    """The feed as the seed defines it: papers with a followed author or author institution, newest first."""
    chosen = [
        p for p in PAPERS if any(a.researcher in researchers or institutions & set(a.institutions) for a in p.authors)
    ]
    chosen.sort(key=lambda p: (p.published, seeded.paper_ids[p.arxiv_id]), reverse=True)
    return [seeded.paper_ids[p.arxiv_id] for p in chosen]


async def test_the_feed_is_the_followed_papers_newest_first_each_once(shared: Api) -> None:
    who = reader()
    # Wumo, Ada and the Université de Montréal share every one of Wumo's papers: each must come once.
    for key in ("wumo", "ada"):
        await shared.data(FOLLOW, {"id": shared.researcher(key)}, as_=who)
    await shared.data(FOLLOW_INSTITUTION, {"id": "0161xgx34"}, as_=who)
    await shared.data(FOLLOW_INSTITUTION, {"id": "057zh3y96"}, as_=who)  # Tokyo: also José's 1999 paper
    expected = expected_feed(shared.seeded, {"wumo", "ada"}, {"umontreal", "tokyo"})
    assert len(expected) == 31
    walked: list[int] = []
    after = None
    while True:
        feed = (await shared.data(FEED, {"first": 7, "after": after}, as_=who))["viewer"]["feed"]
        assert feed["totalCount"] == len(expected)
        walked += [n["databaseId"] for n in feed["nodes"]]
        if not feed["pageInfo"]["hasNextPage"]:
            break
        after = feed["pageInfo"]["endCursor"]
    assert walked == expected
    page3 = (await shared.data(FEED, {"first": 7, "page": 3}, as_=who))["viewer"]["feed"]
    assert [n["databaseId"] for n in page3["nodes"]] == expected[14:21]
    filtered = (await shared.data(FEED, {"first": 100, "filter": {"category": "stat.ML"}}, as_=who))["viewer"]["feed"]
    stat_ml = {shared.seeded.paper_ids[p.arxiv_id] for p in PAPERS if "stat.ML" in p.categories}
    assert [n["databaseId"] for n in filtered["nodes"]] == [i for i in expected if i in stat_ml]
    # A reader following nobody has an empty feed; a papers cursor does not replay into the feed.
    empty = (await shared.data(FEED, as_=reader()))["viewer"]["feed"]
    assert empty["nodes"] == [] and empty["totalCount"] == 0
    papers = await shared.data("{ papers(first: 1) { pageInfo { endCursor } } }")
    foreign = await shared.run(FEED, {"after": papers["papers"]["pageInfo"]["endCursor"]}, as_=who)
    assert error_code(foreign) == "BAD_USER_INPUT"


@pytest.mark.parametrize(
    ("researchers", "institutions"), [({"jose"}, {"umontreal"}), ({"jose"}, set()), (set(), {"tokyo"})]
)
async def test_every_way_of_reading_the_feed_gives_the_same_pages(
    shared: Api, researchers: set[str], institutions: set[str]
) -> None:
    """Collected (M estimated 0), walked newest first (M estimated huge: a walk of at most 4 * rows papers), and
    walked but falling back to the collected set when the walk finds too few (José's one paper is the oldest)."""
    who = reader()
    for key in researchers:
        await shared.data(FOLLOW, {"id": shared.researcher(key)}, as_=who)
    for key in institutions:
        ror = next(i.ror_id for i in INSTITUTIONS if i.key == key)
        await shared.data(FOLLOW_INSTITUTION, {"id": ror}, as_=who)
    expected = expected_feed(shared.seeded, researchers, institutions)
    conn = await asyncpg.connect(shared.seeded.dsn)
    try:
        for estimate in ("0", "1e12", None):
            for size in (1, 5, 40):
                got: list[int] = []
                matches = Clause(FEED_FILTERS["followed_count"], (who,))
                if estimate is not None:
                    matches = Clause(Fragment(estimate, 0), ())
                for offset in range(0, len(expected) + size, size):
                    rows = await page_papers_scanning(
                        conn,
                        matches=matches,
                        scan=Clause(FEED_FILTERS["followed_scan"], (who,)),
                        collect=Clause(FEED_FILTERS["followed"], (who,)),
                        clauses=[],
                        sort=FEED_SORT,
                        limit=size,
                        offset=offset,
                    )
                    got += [r.id for r in rows]
                assert got == expected, (estimate, size)
    finally:
        await conn.close()


async def test_feed_url_is_stable_until_rotated_and_the_old_url_stops_at_once(shared: Api) -> None:
    who = reader()
    await shared.data(FOLLOW, {"id": shared.researcher("jose")}, as_=who)
    url = (await shared.data("{ viewer { feedUrl } }", as_=who))["viewer"]["feedUrl"]
    assert url.startswith("https://www.wovepaper.com/rss/feed/") and url.endswith(".xml")
    assert (await shared.data("{ viewer { feedUrl } }", as_=who))["viewer"]["feedUrl"] == url
    path = url.removeprefix("https://www.wovepaper.com")
    feed = await shared.client.get(path)
    assert feed.status_code == 200 and "Cosmic rays from old times" in feed.text
    rotated = (await shared.data("mutation { rotateFeedToken { id feedUrl } }", as_=who))["rotateFeedToken"]
    assert rotated["id"] == who and rotated["feedUrl"] != url
    assert (await shared.data("{ viewer { feedUrl } }", as_=who))["viewer"]["feedUrl"] == rotated["feedUrl"]
    gone = await shared.client.get(path)
    assert gone.status_code == 404 and gone.headers["content-type"].startswith("text/plain")
    assert (await shared.client.get(rotated["feedUrl"].removeprefix("https://www.wovepaper.com"))).status_code == 200
    # Another reader's token is theirs: a reader's feed never shows someone else's follows.
    other = (await shared.data("{ viewer { feedUrl } }", as_=reader()))["viewer"]["feedUrl"]
    assert "Cosmic rays" not in (await shared.client.get(other.removeprefix("https://www.wovepaper.com"))).text


async def test_signed_in_responses_are_private(shared: Api) -> None:
    response = await shared.client.post(
        "/graphql", json={"query": RESEARCHER, "variables": {"id": "1"}}, headers=bearer(hs256(reader()))
    )
    assert response.headers["cache-control"] == "private, no-store"
    follow = await shared.client.post(
        "/graphql", json={"query": FOLLOW, "variables": {"id": shared.researcher("jose")}}, headers=bearer(hs256())
    )
    assert follow.headers["cache-control"] == "private, no-store"


async def test_mutations_are_post_only(shared: Api) -> None:
    response = await shared.client.get(
        "/graphql", params={"query": "mutation { rotateFeedToken { id } }"}, headers=bearer(hs256())
    )
    assert response.status_code in (400, 405)
