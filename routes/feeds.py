"""The feeds served next to /graphql, in RSS 2.0 (`/rss/...`) and Atom (`/atom/...`):

    latest.xml                      the newest papers
    categories/<category>.xml       a category's, primary or cross-listed
    researchers/<id-or-slug>.xml    a researcher's (any id form `researcher(id:)` takes)
    institutions/<id-ror-or-slug>.xml
    search.xml?q=...                a keyword search's, newest first
    feed/<token>.xml                a signed-in reader's personal feed (`Viewer.feedUrl`)

Papers come through the query layer `papers` uses. Each feed has an ETag (its bytes' hash) and Last-Modified
(the newest change to an entry) and answers 304 to a matching conditional request. The public feeds are cached in
Redis like the list operations' responses (every write drops them), keyed by what the feed is once resolved (the
category, the entity's id, the search's words) and one of a few sizes (LIMITS); the personal feed is never cached.
A feed costs FEED_COST points of the client's GraphQL budget (edge/ratelimit.py), charged before any work; a
spent budget is a 429 with Retry-After.
"""

from __future__ import annotations

import hashlib
import re
from collections import defaultdict
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from email.utils import format_datetime, parsedate_to_datetime
from typing import TypeVar
from urllib.parse import quote, urlencode

import orjson
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import Route

from db.cache import keys
from db.cache.positions import replayed_invalidations
from db.cache.store import CacheStore, Unavailable
from db.connection import Conn
from db.filters import PAPER_SORTS, PaperFilterSpec, paper_filter_clauses
from db.pool import is_lost_connection, is_recovery_conflict
from db.queries.institutions import InstitutionRow
from db.queries.papers import PaperRow, fetch_authorships, page_papers
from db.queries.researchers import ResearcherRow
from db.queries.search.papers import EmptyQuery, search_papers
from db.queries.search.statement import SEARCH_SORTS
from db.queries.viewers import fetch_viewer_by_feed_token
from db.replicas.routing import Target
from edge.conditional import not_modified
from request_types.state import request_state
from resolvers.context import Context
from resolvers.errors import BadUserInput
from resolvers.ids import parse_institution_id
from resolvers.institutions import resolve_institution
from resolvers.researchers import resolve_researcher
from resolvers.viewer import feed_path, page_followed_papers
from routes.feed_xml import MEDIA_TYPES, FeedFormat, FeedItem, FeedMeta, last_modified, render
from routes.services import services
from telemetry.metrics import count_rejection

DEFAULT_LIMIT = 50
MAX_LIMIT = 200
# The sizes a feed comes in: `?limit=n` is served as the largest within n, so each feed has at most this many cached
# copies per format, whatever limits clients ask for.
LIMITS = (1, 2, 5, 10, 20, 50, 100, 200)
_LIMIT = re.compile(r"[0-9]{1,3}")
# What a feed costs of the client's budget: what `papers(first: 200)` costs (schema/cost.py).
FEED_COST = 1
MAX_QUERY_LENGTH = 200
PUBLIC = "public, max-age=300"
# The personal feed is one reader's: no shared cache may keep it (a rotated token must stop working at once).
PERSONAL = "private, max-age=300"
CACHE_TTL_S = 600
_CATEGORY = re.compile(r"^[a-z][a-z-]{0,19}(?:\.[A-Za-z][A-Za-z-]{0,19})?$")

PaperSource = Callable[[Conn, int], Awaitable[list[PaperRow]]]
Row = TypeVar("Row", ResearcherRow, InstitutionRow)


class FeedError(Exception):
    """A one-line plain-text answer instead of a feed (404 unknown, 400 malformed)."""

    def __init__(self, status: int, reason: str) -> None:
        super().__init__(reason)
        self.status = status
        self.reason = reason


@dataclass(frozen=True, slots=True)
class FeedSource:
    """What a feed URL names, resolved: its papers, its titles and paths, and how it is cached."""

    kind: str
    key: str  # identifies the feed among its kind (a category, a database id, a query; "" for latest)
    title: str
    description: str
    page_path: str  # the site's page for it
    self_path: str  # after /rss or /atom
    papers: PaperSource
    query: Mapping[str, str] = field(default_factory=dict)  # the self link's query string
    personal: bool = False


@dataclass(frozen=True, slots=True)
class RenderedFeed:
    body: bytes
    etag: str
    last_modified: datetime | None  # None for an empty feed

    def dumps(self) -> bytes:
        stamp = int(self.last_modified.timestamp()) if self.last_modified else None
        return orjson.dumps({"body": self.body.decode(), "etag": self.etag, "modified": stamp})

    @classmethod
    def loads(cls, raw: bytes) -> RenderedFeed:
        data = orjson.loads(raw)
        modified = datetime.fromtimestamp(data["modified"], UTC) if data["modified"] is not None else None
        return cls(data["body"].encode(), data["etag"], modified)


def _newest(*clauses_of: PaperFilterSpec) -> PaperSource:
    clauses = [c for spec in clauses_of for c in paper_filter_clauses(spec)]

    async def papers(conn: Conn, limit: int) -> list[PaperRow]:
        return await page_papers(conn, clauses, PAPER_SORTS["NEWEST"], limit=limit)

    return papers


async def _latest(ctx: Context, name: str, request: Request) -> FeedSource:
    return FeedSource(
        "latest",
        "",
        "wovepaper: latest papers",
        "The newest papers in the wovepaper archive.",
        "/",
        "/latest.xml",
        _newest(),
    )


async def _category(ctx: Context, name: str, request: Request) -> FeedSource:
    if not _CATEGORY.match(name):
        raise FeedError(404, "No such arXiv category in the archive.")
    return FeedSource(
        "category",
        name,
        f"wovepaper: {name}",
        f"The newest papers in {name}, primary or cross-listed.",
        "/search?" + urlencode({"category": name}),
        f"/categories/{name}.xml",
        _newest(PaperFilterSpec(category=name)),
    )


async def _researcher(ctx: Context, name: str, request: Request) -> FeedSource:
    row = await _found(lambda: resolve_researcher(ctx, name), "researcher")
    return _entity_feed(
        "researcher",
        row,
        f"papers by {row.name}",
        f"The newest papers by {row.name} in the wovepaper archive.",
        PaperFilterSpec(researcher_id=row.id),
    )


async def _institution(ctx: Context, name: str, request: Request) -> FeedSource:
    async def lookup() -> InstitutionRow | None:
        # An id, a slug or a ROR id, not a name: a name could match another institution by similarity.
        return await resolve_institution(ctx, name) if parse_institution_id(name).kind != "name" else None

    row = await _found(lookup, "institution")
    return _entity_feed(
        "institution",
        row,
        f"papers from {row.name}",
        f"The newest papers with an author at {row.name}.",
        PaperFilterSpec(institution_ids=(row.id,)),
    )


async def _found(lookup: Callable[[], Awaitable[Row | None]], kind: str) -> Row:
    try:
        row = await lookup()
    except BadUserInput:
        row = None
    if row is None:
        raise FeedError(404, f"No such {kind} in the archive.")
    return row


def _entity_feed(
    kind: str, row: ResearcherRow | InstitutionRow, title: str, description: str, spec: PaperFilterSpec
) -> FeedSource:
    path = f"/{kind}s/{row.slug}"
    return FeedSource(kind, str(row.id), f"wovepaper: {title}", description, path, f"{path}.xml", _newest(spec))


async def _search(ctx: Context, name: str, request: Request) -> FeedSource:
    text = " ".join(request.query_params.get("q", "").split())
    if not text:
        raise FeedError(400, "Give the words to search for: /rss/search.xml?q=...")
    if len(text) > MAX_QUERY_LENGTH or "\x00" in text:
        raise FeedError(400, f"`q` must be at most {MAX_QUERY_LENGTH} characters of text.")

    async def papers(conn: Conn, limit: int) -> list[PaperRow]:
        try:
            result = await search_papers(
                conn, mode="KEYWORD", text=text, vector=None, clauses=[], sort=SEARCH_SORTS["NEWEST"], limit=limit
            )
        except EmptyQuery:
            raise FeedError(400, "`q` has no searchable word (only stop words or exclusions).") from None
        return [hit.paper for hit in result.hits]

    return FeedSource(
        "search",
        text,
        f"wovepaper: search for {text}",
        f"The newest papers matching the search {text}.",
        "/search?" + urlencode({"q": text}),
        "/search.xml",
        papers,
        query={"q": text},
    )


async def _personal(ctx: Context, name: str, request: Request) -> FeedSource:
    async with ctx.pool.acquire() as conn:
        viewer = await fetch_viewer_by_feed_token(conn, name)
    if viewer is None and ctx.replicas is not None and ctx.pool is not ctx.write_pool:
        # A token made or rotated moments ago may not have reached the replica yet: the primary has it.
        ctx.use(ctx.replicas.primary)
        async with ctx.pool.acquire() as conn:
            viewer = await fetch_viewer_by_feed_token(conn, name)
    if viewer is None:
        raise FeedError(404, "No such feed: the link is wrong or was replaced by a new one.")

    async def papers(conn: Conn, limit: int) -> list[PaperRow]:
        return await page_followed_papers(conn, viewer, [], None, limit=limit)

    return FeedSource(
        "personal",
        viewer,
        "wovepaper: your feed",
        "The newest papers by the researchers and at the institutions you follow.",
        "/",
        feed_path(name).removeprefix("/rss"),
        papers,
        personal=True,
    )


FEEDS: dict[str, tuple[str, Callable[[Context, str, Request], Awaitable[FeedSource]]]] = {
    "latest": ("/latest.xml", _latest),
    "category": ("/categories/{name}.xml", _category),
    "researcher": ("/researchers/{name}.xml", _researcher),
    "institution": ("/institutions/{name}.xml", _institution),
    "search": ("/search.xml", _search),
    "personal": ("/feed/{name}.xml", _personal),
}


def feed_routes() -> list[Route]:
    return [
        Route(f"/{fmt}{path}", _endpoint(fmt, resolve), methods=["GET", "HEAD"])
        for fmt in ("rss", "atom")
        for path, resolve in FEEDS.values()
    ]


def _limit(request: Request) -> int:
    """The feed's size: the largest of LIMITS within `?limit=` (ASCII digits, 1 to MAX_LIMIT)."""
    raw = request.query_params.get("limit")
    if raw is None:
        return DEFAULT_LIMIT
    # ASCII digits only, and few of them: `str.isdigit` takes "²" and "①", which `int` refuses.
    if not _LIMIT.fullmatch(raw) or not 1 <= int(raw) <= MAX_LIMIT:
        raise FeedError(400, f"`limit` must be a whole number from 1 to {MAX_LIMIT}.")
    wanted = int(raw)
    return max(size for size in LIMITS if size <= wanted)


async def _charged(request: Request) -> Response | None:
    """Charges the feed to the client's points; the 429 to answer when they refuse it."""
    charge = request_state(request.scope).rate_charge
    if charge is None or not charge.enabled:
        return None
    decision = await charge.charge(FEED_COST)
    if decision.allowed:
        return None
    count_rejection("RATE_LIMITED")
    message = (
        f"Rate limited: a feed costs {FEED_COST} point and {decision.remaining} of {decision.limit} remain this "
        f"hour; retry in {decision.retry_after} s.\n"
    )
    headers = {k.decode(): v.decode() for k, v in decision.headers()}
    headers |= {
        "retry-after": str(decision.retry_after),
        "cache-control": "no-store",
        "x-content-type-options": "nosniff",
    }
    return PlainTextResponse(message, 429, headers=headers)


def _endpoint(
    fmt: FeedFormat, resolve: Callable[[Context, str, Request], Awaitable[FeedSource]]
) -> Callable[[Request], Awaitable[Response]]:
    async def endpoint(request: Request) -> Response:
        served = services(request.scope)
        settings = served["settings"]
        ctx = Context.create(served["pool"], settings, cache=served["cache"], replicas=served["replicas"])
        try:
            limit = _limit(request)
            refused = await _charged(request)
            if refused is not None:
                return refused
            source, feed = await _read(ctx, request, resolve, fmt, limit)
        except FeedError as exc:
            return PlainTextResponse(exc.reason + "\n", exc.status, headers={"x-content-type-options": "nosniff"})
        finally:
            ctx.close()  # what the feed read, freed now (Loaders.close)
        return _respond(request, fmt, feed, PERSONAL if source.personal else PUBLIC)

    return endpoint


async def _read(
    ctx: Context,
    request: Request,
    resolve: Callable[[Context, str, Request], Awaitable[FeedSource]],
    fmt: FeedFormat,
    limit: int,
) -> tuple[FeedSource, RenderedFeed]:
    """The feed, read from a replica when one is usable; once more from the primary when that replica's connection
    was lost (it has left the rotation by then) or it cancelled the statement to replay the primary's WAL."""
    replicas = ctx.replicas
    target = replicas.choose() if replicas is not None else None
    try:
        return await _read_from(ctx, target, request, resolve, fmt, limit)
    except Exception as exc:
        if replicas is None or target is None or not target.is_replica:
            raise
        if not (is_lost_connection(exc) or is_recovery_conflict(exc)):
            raise
    return await _read_from(ctx, replicas.primary_read(), request, resolve, fmt, limit)


async def _read_from(
    ctx: Context,
    target: Target | None,
    request: Request,
    resolve: Callable[[Context, str, Request], Awaitable[FeedSource]],
    fmt: FeedFormat,
    limit: int,
) -> tuple[FeedSource, RenderedFeed]:
    if target is not None:
        ctx.use(target)
    source = await resolve(ctx, request.path_params.get("name", ""), request)
    return source, await _feed(ctx, source, fmt, limit, target.replayed if target is not None else None)


async def _feed(
    ctx: Context, source: FeedSource, fmt: FeedFormat, limit: int, replayed: int | None = None
) -> RenderedFeed:
    """`replayed`: how far the replica read from had replayed (None: the primary), which decides whether the feed
    may be cached."""
    settings = ctx.settings
    store = ctx.cache if isinstance(ctx.cache, CacheStore) and ctx.cache.redis is not None else None
    if store is None or source.personal:
        return await _render(ctx, source, fmt, limit)
    key = keys.feed(
        store.namespace,
        kind=source.kind,
        key=source.key,
        fmt=fmt,
        limit=limit,
        variant=f"{settings.site_url} {settings.feeds_base_url}",
    )
    epoch_key = keys.response_epoch(store.namespace, key)
    got = await store.fetch_guarded(key, epoch_key)
    if isinstance(got, Unavailable):
        return await _render(ctx, source, fmt, limit)
    cached, epoch = got
    # Tagged like a list response: any write drops it (its entries may be any papers).
    tags = [keys.lists_tag(store.namespace, key)]
    if cached is not None and await store.listed(key, lambda: tags) is True:
        try:
            return RenderedFeed.loads(cached)
        except (orjson.JSONDecodeError, KeyError, TypeError, ValueError):
            pass
    feed = await _render(ctx, source, fmt, limit)
    if replayed is not None and not await replayed_invalidations(store, tags, replayed):
        return feed  # a replica that may not have the latest write yet: served, not kept
    ttl_s = min(settings.cache_ttl_s, CACHE_TTL_S)
    await store.store_guarded(
        key, feed.dumps(), guard_key=epoch_key, guard_value=epoch, tag_keys=tags, ttl_s=ttl_s, by_tags=True
    )
    return feed


async def _render(ctx: Context, source: FeedSource, fmt: FeedFormat, limit: int) -> RenderedFeed:
    settings = ctx.settings
    async with ctx.pool.acquire() as conn:
        papers = await source.papers(conn, limit)
        authorships = await fetch_authorships(conn, [p.id for p in papers]) if papers else []
    if source.kind == "category" and not papers:
        raise FeedError(404, "No such arXiv category in the archive.")
    names: defaultdict[int, list[str]] = defaultdict(list)
    for a in authorships:
        names[a.paper_id].append(a.name)
    items = [FeedItem(p, names.get(p.id, [])) for p in papers]
    query = dict(source.query)
    if limit != DEFAULT_LIMIT:
        query["limit"] = str(limit)
    self_url = f"{settings.feeds_base_url}/{fmt}{quote(source.self_path)}" + (f"?{urlencode(query)}" if query else "")
    meta = FeedMeta(source.title, source.description, settings.site_url + source.page_path, self_url)
    body = render(fmt, meta, items, site_url=settings.site_url)
    etag = '"' + hashlib.sha256(body).hexdigest()[:32] + '"'
    return RenderedFeed(body, etag, last_modified(items) if items else None)


def _not_modified(request: Request, feed: RenderedFeed) -> bool:
    match = request.headers.get("if-none-match")
    if match is not None:
        # If-Modified-Since is then ignored (RFC 9110 13.1.3).
        return not_modified(match.encode("latin-1"), feed.etag.encode())
    since = request.headers.get("if-modified-since")
    if since is None or feed.last_modified is None:
        return False
    try:
        when = parsedate_to_datetime(since)
    except (TypeError, ValueError):
        return False
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return feed.last_modified <= when


def _respond(request: Request, fmt: FeedFormat, feed: RenderedFeed, cache_control: str) -> Response:
    headers = {"etag": feed.etag, "cache-control": cache_control, "x-content-type-options": "nosniff"}
    if feed.last_modified is not None:
        headers["last-modified"] = format_datetime(feed.last_modified, usegmt=True)
    if _not_modified(request, feed):
        return Response(status_code=304, headers=headers)
    return Response(feed.body, media_type=MEDIA_TYPES[fmt], headers=headers)
