"""The RSS and Atom feeds as a feed reader sees them: valid for feedparser, the right papers newest first, links
from the settings only (never the request's Host or query string), conditional requests answered 304, unknown
things a one-line 404, and public feeds cached until a write while the personal feed never is."""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from email.utils import format_datetime, parsedate_to_datetime
from typing import Any

import asyncpg
import feedparser
import httpx
import pytest

from app import create_app
from db.cache import keys
from db.cache.client import create_redis
from db.cache.invalidation import invalidate
from db.cache.store import CacheStore
from db.records import Touched
from tests.integration.graph_support import (
    PAPERS,
    RESEARCHERS,
    AuthorSeed,
    PaperSeed,
    Seeded,
    StatementCounter,
    insert_paper,
    seeded_database,
    serving,
    settings_for,
)
from tests.jwt_support import SECRET, bearer, hs256

SITE = "https://site.example"
FEEDS = "https://feeds.example"
FORMATS = ("rss", "atom")
TEX_TITLE = "Bounds for $\\|A\\|_{2} < 1$ & the <b> tag\x0b in $\\mathcal{O}(n \\log n)$"


@dataclass
class Feeds:
    client: httpx.AsyncClient
    seeded: Seeded
    counter: StatementCounter
    cache: CacheStore

    async def get(self, path: str, **headers: str) -> httpx.Response:
        return await self.client.get(path, headers=headers)

    async def parsed(self, path: str) -> Any:
        response = await self.get(path)
        assert response.status_code == 200, response.text
        feed = feedparser.parse(response.content)
        assert feed.bozo == 0, feed.get("bozo_exception")
        return feed


@pytest.fixture(scope="module")
async def feeds(make_database: Any, redis_url: str, cache_namespace: str) -> AsyncIterator[Feeds]:
    async with serving_feeds(make_database, "feeds", redis_url, f"{cache_namespace}feeds") as served:
        yield served


@contextlib.asynccontextmanager
async def serving_feeds(make_database: Any, name: str, redis_url: str, namespace: str) -> AsyncIterator[Feeds]:
    """The feeds of database `name` (seeded, and a paper with a TeX title), served with Redis at `redis_url`."""
    seeded = await seeded_database(make_database, name)
    conn = await asyncpg.connect(seeded.dsn)
    try:
        when = datetime(2023, 6, 1, tzinfo=UTC)
        tex = PaperSeed("2402.00001", TEX_TITLE, ("math.FA",), when, (AuthorSeed("Ann Tex"),))
        await insert_paper(conn, seeded, tex)
    finally:
        await conn.close()
    counter = StatementCounter()
    settings = settings_for(
        seeded.dsn,
        REDIS_URL=redis_url,
        cache_namespace=namespace,
        site_url=SITE,
        feeds_url=FEEDS,
        jwt_secret=SECRET,
    )
    redis = create_redis(redis_url, timeout_s=1)
    cache = CacheStore(redis, namespace=namespace, ttl_s=600)
    async with serving(create_app(settings, query_logger=counter)) as client:
        yield Feeds(client, seeded, counter, cache)
    await redis.aclose()


def newest_first(seeded: Seeded, keep: Callable[[PaperSeed], bool]) -> list[str]:
    chosen = [p for p in PAPERS if keep(p)]
    chosen.sort(key=lambda p: (p.published, seeded.paper_ids[p.arxiv_id]), reverse=True)
    return [f"https://arxiv.org/abs/{p.arxiv_id}" for p in chosen]


def by(key: str) -> Callable[[PaperSeed], bool]:
    return lambda p: any(a.researcher == key for a in p.authors)


def at(key: str) -> Callable[[PaperSeed], bool]:
    return lambda p: any(key in a.institutions for a in p.authors)


def feed_cases(seeded: Seeded) -> list[tuple[str, list[str] | None, str]]:
    """(path, the entries' ids or None when not checked here, the feed's own canonical path)."""
    wumo = seeded.researcher_ids["wumo"]
    s2 = next(r.s2 for r in RESEARCHERS if r.key == "wumo")
    tokyo = seeded.institution_ids["tokyo"]
    wumo_path = f"researchers/{wumo}-wumo-yan.xml"
    tokyo_path = f"institutions/{tokyo}-university-of-tokyo.xml"
    return [
        ("categories/cs.DC.xml", newest_first(seeded, lambda p: "cs.DC" in p.categories), "categories/cs.DC.xml"),
        # Every stat.ML paper has it as a cross-list, never as its primary category.
        ("categories/stat.ML.xml", newest_first(seeded, lambda p: "stat.ML" in p.categories), "categories/stat.ML.xml"),
        (f"researchers/{wumo}.xml", newest_first(seeded, by("wumo")), wumo_path),
        (wumo_path, newest_first(seeded, by("wumo")), wumo_path),
        (f"researchers/s2:{s2}.xml", newest_first(seeded, by("wumo")), wumo_path),
        ("institutions/057zh3y96.xml", newest_first(seeded, at("tokyo")), tokyo_path),
        (tokyo_path, newest_first(seeded, at("tokyo")), tokyo_path),
        ("search.xml?q=cosmic", ["https://arxiv.org/abs/astro-ph/9901001"], "search.xml?q=cosmic"),
        ("latest.xml", None, "latest.xml"),
    ]


@pytest.mark.parametrize("fmt", FORMATS)
async def test_every_feed_is_valid_and_lists_its_papers_newest_first(feeds: Feeds, fmt: str) -> None:
    for path, expected, canonical in feed_cases(feeds.seeded):
        response = await feeds.get(f"/{fmt}/{path}")
        assert response.status_code == 200, (path, response.text)
        assert response.headers["content-type"] == f"application/{fmt}+xml; charset=utf-8"
        assert response.headers["cache-control"] == "public, max-age=300"
        feed = feedparser.parse(response.content)
        assert feed.bozo == 0, (path, feed.get("bozo_exception"))
        ids = [e.id for e in feed.entries]
        if expected is not None:
            assert ids == expected[:50], path
        else:
            assert len(ids) > 30
        published = [parsedate_to_datetime(e.published) if fmt == "rss" else e.published for e in feed.entries]
        assert published == sorted(published, reverse=True), path
        assert feed.feed.link.startswith(SITE + "/")
        assert [link.href for link in feed.feed.links if link.rel == "self"] == [f"{FEEDS}/{fmt}/{canonical}"]


@pytest.mark.parametrize("fmt", FORMATS)
async def test_each_entry_carries_what_a_reader_shows(feeds: Feeds, fmt: str) -> None:
    wumo = feeds.seeded.researcher_ids["wumo"]
    feed = await feeds.parsed(f"/{fmt}/researchers/{wumo}.xml")
    newest = max((p for p in PAPERS if by("wumo")(p)), key=lambda p: (p.published, feeds.seeded.paper_ids[p.arxiv_id]))
    entry = feed.entries[0]
    assert entry.title == newest.title
    assert entry.link == f"{SITE}/papers/{newest.slug}"
    assert entry.id == f"https://arxiv.org/abs/{newest.arxiv_id}"
    assert [t.term for t in entry.tags] == list(newest.categories)
    assert entry.summary == f"Abstract of {newest.title}."
    names = [a.name for a in newest.authors]
    if fmt == "atom":
        assert [a["name"] for a in entry.authors] == names
        assert {link.href: link.rel for link in entry.links}[entry.id] == "related"
    else:
        assert entry.author == ", ".join(names)
    published = parsedate_to_datetime(entry.published) if fmt == "rss" else datetime.fromisoformat(entry.published)
    assert published == newest.published


@pytest.mark.parametrize("fmt", FORMATS)
async def test_tex_in_titles_stays_as_written(feeds: Feeds, fmt: str) -> None:
    feed = await feeds.parsed(f"/{fmt}/categories/math.FA.xml")
    assert [e.title for e in feed.entries] == [TEX_TITLE.replace("\x0b", "")]


async def test_limit_sets_the_length_up_to_200(feeds: Feeds) -> None:
    assert len((await feeds.parsed("/rss/latest.xml?limit=5")).entries) == 5
    assert len((await feeds.parsed("/atom/latest.xml?limit=200")).entries) == 33
    for bad in ("0", "201", "abc", "-1", "5.0"):
        response = await feeds.get(f"/rss/latest.xml?limit={bad}")
        assert response.status_code == 400
        assert response.text.count("\n") == 1 and "limit" in response.text


@pytest.mark.parametrize("fmt", FORMATS)
async def test_conditional_requests_get_304(feeds: Feeds, fmt: str) -> None:
    path = f"/{fmt}/latest.xml"
    first = await feeds.get(path)
    etag, modified = first.headers["etag"], first.headers["last-modified"]
    newest_write = max(parsedate_to_datetime(modified), datetime(1970, 1, 1, tzinfo=UTC))
    assert (await feeds.get(path)).content == first.content
    not_modified = await feeds.get(path, **{"if-none-match": etag})
    assert not_modified.status_code == 304 and not_modified.content == b""
    assert not_modified.headers["etag"] == etag
    assert (await feeds.get(path, **{"if-none-match": f'"other", W/{etag}'})).status_code == 304
    assert (await feeds.get(path, **{"if-modified-since": modified})).status_code == 304
    later = format_datetime(newest_write.replace(year=newest_write.year + 1), usegmt=True)
    assert (await feeds.get(path, **{"if-modified-since": later})).status_code == 304
    earlier = format_datetime(newest_write.replace(year=newest_write.year - 1), usegmt=True)
    assert (await feeds.get(path, **{"if-modified-since": earlier})).status_code == 200
    # A different ETag wins over a matching date.
    assert (await feeds.get(path, **{"if-none-match": '"other"', "if-modified-since": modified})).status_code == 200
    assert (await feeds.get(path, **{"if-modified-since": "not a date"})).status_code == 200
    head = await feeds.client.head(path)
    assert head.status_code == 200 and head.headers["etag"] == etag


@pytest.mark.parametrize("fmt", FORMATS)
async def test_the_request_never_writes_the_links(feeds: Feeds, fmt: str) -> None:
    for path, _, _ in feed_cases(feeds.seeded):
        plain = await feeds.get(f"/{fmt}/{path}")
        joiner = "&" if "?" in path else "?"
        forged = await feeds.client.get(
            f"/{fmt}/{path}{joiner}a=%22&b=%22%3E%3Cscript%3E",
            headers={"host": "evil.example", "x-forwarded-host": "evil.example", "x-forwarded-proto": "http"},
        )
        assert forged.status_code == 200
        assert forged.content == plain.content, path
        assert b"evil.example" not in forged.content and b"<script" not in forged.content


async def test_unknown_things_are_a_one_line_404(feeds: Feeds) -> None:
    for path in (
        "/rss/categories/cs.XX.xml",
        "/atom/categories/%3Cscript%3E.xml",
        "/rss/researchers/999999999.xml",
        "/rss/researchers/not%20an%20id.xml",
        "/atom/institutions/0aaaaaa00.xml",
        "/rss/institutions/University%20of%20Tokyo.xml",
        f"/rss/feed/{'A' * 43}.xml",
        "/atom/feed/short.xml",
    ):
        response = await feeds.get(path)
        assert response.status_code == 404, path
        assert response.headers["content-type"].startswith("text/plain")
        assert response.text.endswith("\n") and response.text.count("\n") == 1, response.text
        assert "<" not in response.text
    for path in ("/rss/search.xml", "/rss/search.xml?q=%20", "/atom/search.xml?q=the%20of", "/rss/search.xml?q=a%00b"):
        response = await feeds.get(path)
        assert response.status_code == 400 and response.text.count("\n") == 1, path


async def test_public_feeds_are_cached_until_a_write(feeds: Feeds) -> None:
    await invalidate(feeds.cache, Touched(papers={0}))  # whatever earlier tests cached
    feeds.counter.reset()
    first = await feeds.get("/rss/latest.xml?limit=3")
    assert feeds.counter.count >= 2  # the papers and their authors
    feeds.counter.reset()
    again = await feeds.get("/rss/latest.xml?limit=3")
    assert feeds.counter.count == 0 and again.content == first.content
    # The ingest writes a newer paper, commits, invalidates.
    conn = await asyncpg.connect(feeds.seeded.dsn)
    try:
        when = datetime(2025, 1, 1, tzinfo=UTC)
        seed = PaperSeed("2501.00001", "A newer paper", ("cs.DC",), when, (AuthorSeed("N"),))
        paper_id = await insert_paper(conn, feeds.seeded, seed)
    finally:
        await conn.close()
    await invalidate(feeds.cache, Touched(papers={paper_id}))
    fresh = await feeds.parsed("/rss/latest.xml?limit=3")
    assert fresh.entries[0].title == "A newer paper"
    assert fresh.entries[0].id == "https://arxiv.org/abs/2501.00001"


async def test_a_cached_feed_whose_tag_set_redis_evicted_is_rendered_again(
    make_database: Any, evicting_redis_url: str, cache_namespace: str
) -> None:
    """Redis under `maxmemory` may evict the set an invalidation drops a feed by: a feed it no longer lists is
    rendered again, not served."""
    async with serving_feeds(make_database, "evfeeds", evicting_redis_url, f"{cache_namespace}evfeeds") as feeds:
        await _evicted_set_is_seen(feeds)


async def _evicted_set_is_seen(feeds: Feeds) -> None:
    path = "/rss/latest.xml?limit=2"
    await feeds.get(path)
    feeds.counter.reset()
    await feeds.get(path)
    assert feeds.counter.count == 0
    redis = feeds.cache.redis
    assert redis is not None
    assert await redis.delete(*keys.lists_tags(feeds.cache.namespace)) >= 1  # evicted
    await feeds.get(path)
    assert feeds.counter.count >= 2  # rendered from PostgreSQL again
    feeds.counter.reset()
    await feeds.get(path)
    assert feeds.counter.count == 0  # listed again


async def test_the_personal_feed_is_private_and_never_cached(feeds: Feeds) -> None:
    who = f"reader-{uuid.uuid4().hex[:8]}"
    wumo = feeds.seeded.researcher_ids["wumo"]
    follow = "mutation($id: String!) { followResearcher(input: {id: $id}) { researcher { id } } }"
    signed_in = bearer(hs256(who))
    await feeds.client.post("/graphql", json={"query": follow, "variables": {"id": str(wumo)}}, headers=signed_in)
    viewer = await feeds.client.post("/graphql", json={"query": "{ viewer { feedUrl } }"}, headers=signed_in)
    url = viewer.json()["data"]["viewer"]["feedUrl"]
    assert url.startswith(f"{FEEDS}/rss/feed/")
    path = url.removeprefix(FEEDS)
    for fmt_path in (path, path.replace("/rss/", "/atom/", 1)):
        response = await feeds.get(fmt_path)
        assert response.status_code == 200
        assert response.headers["cache-control"] == "private, max-age=300"
        feed = feedparser.parse(response.content)
        assert feed.bozo == 0
        assert [e.id for e in feed.entries] == newest_first(feeds.seeded, by("wumo"))
        assert (await feeds.get(fmt_path, **{"if-none-match": response.headers["etag"]})).status_code == 304
    feeds.counter.reset()
    await feeds.get(path)
    assert feeds.counter.count >= 2  # read again: nothing of a reader's is kept in the shared cache


@pytest.mark.parametrize("bad", ["²", "①", "٥", "5" * 5000, "+5", " 5", "5 ", "5\n", "0x10", "1e2", "", "0", "201"])
async def test_a_limit_that_is_not_plain_digits_in_range_is_a_400(feeds: Feeds, bad: str) -> None:
    response = await feeds.client.get("/rss/latest.xml", params={"limit": bad})
    assert response.status_code == 400, response.text
    assert response.text.count("\n") == 1 and "limit" in response.text and len(response.text) < 200


async def test_limits_come_in_a_few_sizes_so_a_feed_has_a_few_cached_forms(feeds: Feeds) -> None:
    """`?limit=191..200` over a few feeds cannot make a cached copy each: a limit is served as the largest of
    1, 2, 5, 10, 20, 50, 100 and 200 within it."""
    redis = feeds.cache.redis
    assert redis is not None
    pattern = f"{feeds.cache.namespace}:feed:*"
    before = {key async for key in redis.scan_iter(match=pattern)}
    paths = [
        f"/{fmt}/{feed}?limit={n}"
        for fmt in FORMATS
        for feed in ("latest.xml", "categories/cs.DC.xml")
        for n in range(191, 201)
    ]
    for path in paths:
        assert (await feeds.get(path)).status_code == 200, path
    made = {key async for key in redis.scan_iter(match=pattern)} - before
    assert len(made) <= 2 * 2 * 2  # (100 and 200) x two feeds x two formats
    assert len((await feeds.parsed("/rss/latest.xml?limit=7")).entries) == 5
    assert len((await feeds.parsed("/rss/latest.xml?limit=20")).entries) == 20
    assert "limit=5" in (await feeds.get("/atom/latest.xml?limit=9")).text  # the self link names what it holds


async def test_feeds_spend_the_same_budget_as_graphql(feeds: Feeds, redis_url: str, cache_namespace: str) -> None:
    settings = settings_for(
        feeds.seeded.dsn,
        REDIS_URL=redis_url,
        cache_namespace=f"{cache_namespace}feeds-budget",
        anon_points_per_hour=3,
        jwt_secret=SECRET,
    )
    async with serving(create_app(settings)) as client:
        for path in ("/rss/latest.xml", "/atom/categories/cs.DC.xml", "/rss/search.xml?q=cosmic"):
            assert (await client.get(path)).status_code == 200, path
        refused = await client.get("/rss/latest.xml")
        assert refused.status_code == 429 and int(refused.headers["retry-after"]) >= 1
        assert refused.headers["x-ratelimit-remaining"] == "0" and refused.text.count("\n") == 1
        assert refused.headers["cache-control"] == "no-store"
        graphql = await client.post("/graphql", json={"query": "{ __typename }"})
        assert graphql.status_code == 429
        assert graphql.json()["errors"][0]["extensions"]["code"] == "RATE_LIMITED"
