"""The signed-in reader: who the request's verified bearer token names (edge/identity.py), what they follow,
and their feed of the followed researchers' and institutions' papers."""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable, Sequence
from typing import TypeVar

from strawberry.dataloader import DataLoader

from db.connection import Conn
from db.filters import FEED_FILTERS, PAPER_SORTS, Clause, paper_filter_clauses
from db.queries.feed import page_feed
from db.queries.follows import (
    FOLLOWED_SORTS,
    FollowKind,
    count_follows,
    fetch_followed_ids,
    page_followed_institutions,
    page_followed_researchers,
)
from db.queries.institutions import InstitutionRow
from db.queries.papers import PaperRow
from db.queries.researchers import ResearcherRow
from db.queries.viewers import feed_token
from resolvers.context import Context, Info
from resolvers.errors import Unauthenticated
from resolvers.pages import ListQuery, read_page
from resolvers.pagination import Connection, Lookahead, page_request, wants_total
from resolvers.papers import PaperFilterArgs, paper_filter_spec, paper_list

Followed = TypeVar("Followed", ResearcherRow, InstitutionRow)
# Newest first, as `papers(sort: NEWEST)`, under its own name: a cursor replays only into the feed.
FEED_SORT = dataclasses.replace(PAPER_SORTS["NEWEST"], name="FEED")


def viewer_id(ctx: Context) -> str | None:
    return ctx.identity.viewer_id


def require_viewer(ctx: Context) -> str:
    vid = ctx.identity.viewer_id
    if vid is None:
        raise Unauthenticated("Sign in first: this needs `Authorization: Bearer <token>` from the site.")
    return vid


def feed_path(token: str) -> str:
    return f"/rss/feed/{token}.xml"


async def resolve_feed_url(ctx: Context, token: str | None = None) -> str:
    """The personal RSS feed's URL; its token is created on first use."""
    if token is None:
        # A write (the token is made on first use), also when the query reads from a replica.
        async with ctx.write_pool.acquire() as conn:
            token = await feed_token(conn, require_viewer(ctx))
    return ctx.settings.feeds_base_url + feed_path(token)


def follows_loader(ctx: Context, kind: FollowKind) -> DataLoader[int, bool]:
    """Whether the signed-in reader follows each researcher (institution) asked about, one statement per batch."""

    def build() -> DataLoader[int, bool]:
        vid = require_viewer(ctx)

        async def load(ids: list[int]) -> list[bool]:
            async with ctx.pool.acquire() as conn:
                followed = await fetch_followed_ids(conn, vid, kind, ids)
            return [i in followed for i in ids]

        return DataLoader(load, max_batch_size=500)

    loader: DataLoader[int, bool] = ctx.loaders.named(f"viewer_follows_{kind}", build)
    return loader


def viewer_is_following(ctx: Context, kind: FollowKind, entity_id: int) -> bool | None | Awaitable[bool]:
    """Null for anonymous readers."""
    if viewer_id(ctx) is None:
        return None
    return follows_loader(ctx, kind).load(entity_id)


async def resolve_following_researchers(
    info: Info, *, first: int | None, after: str | None, page: int | None
) -> Connection[ResearcherRow]:
    """The researchers the reader follows, most recently followed first."""
    connection = await _following(info, "researcher", page_followed_researchers, first=first, after=after, page=page)
    info.context.loaders.prime_researchers(connection.nodes)
    return connection


async def resolve_following_institutions(
    info: Info, *, first: int | None, after: str | None, page: int | None
) -> Connection[InstitutionRow]:
    """The institutions the reader follows, most recently followed first."""
    connection = await _following(info, "institution", page_followed_institutions, first=first, after=after, page=page)
    info.context.loaders.prime_institutions(connection.nodes)
    return connection


async def _following(
    info: Info,
    kind: FollowKind,
    fetch: Callable[..., Awaitable[Sequence[Followed]]],
    *,
    first: int | None,
    after: str | None,
    page: int | None,
) -> Connection[Followed]:
    ctx = info.context
    vid = require_viewer(ctx)
    sort = FOLLOWED_SORTS[kind]
    request = page_request(sort, first=first, after=after, page=page)

    async def rows(conn: Conn, after: Clause | None, limit: int, offset: int) -> Sequence[Followed]:
        return await fetch(conn, vid, after, limit=limit, offset=offset)

    async def count(conn: Conn) -> int:
        return await count_follows(conn, vid, kind)

    async def after_read(nodes: list[Followed]) -> None:
        loader = follows_loader(ctx, kind)
        for row in nodes:
            loader.prime(row.id, True)

    listing = ListQuery(sort, rows, count, after_read)
    # A reader follows a few hundred at most: any numbered page is cheap.
    return await read_page(ctx, listing, request, want_total=wants_total(Lookahead.of(info)), guard_depth=False)


async def resolve_viewer_feed(
    info: Info, args: PaperFilterArgs | None, *, first: int | None, after: str | None, page: int | None
) -> Connection[PaperRow]:
    """Papers by the researchers or at the institutions the reader follows, newest first, each once: one
    statement for the page, about a page of rows per follow (db/queries/feed.py)."""
    ctx = info.context
    vid = require_viewer(ctx)
    request = page_request(FEED_SORT, first=first, after=after, page=page)
    clauses = paper_filter_clauses(await paper_filter_spec(ctx, args))
    followed = [Clause(FEED_FILTERS["followed"], (vid,)), *clauses]
    look = Lookahead.of(info)

    async def rows(conn: Conn, after: Clause | None, limit: int, offset: int) -> list[PaperRow]:
        return await page_followed_papers(conn, vid, clauses, after, limit=limit, offset=offset)

    feed = paper_list(ctx, followed, FEED_SORT, look)
    listing = ListQuery(FEED_SORT, rows, feed.count, feed.after_read)
    return await read_page(ctx, listing, request, want_total=wants_total(look), guard_depth=False)


async def page_followed_papers(
    conn: Conn, vid: str, clauses: Sequence[Clause], after: Clause | None, *, limit: int, offset: int = 0
) -> list[PaperRow]:
    """The statement behind the reader's feed, in GraphQL and in RSS (db/queries/feed.py)."""
    return await page_feed(conn, vid, [*clauses, after] if after is not None else clauses, limit=limit, offset=offset)
