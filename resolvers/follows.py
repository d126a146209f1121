"""Following and unfollowing researchers and institutions, and rotating the personal feed's token.

Each write is one statement that commits on its own; then the cache forgets the entity (its follower count
is on its page), so the next request on any worker sees the change. Mutations run on the primary.
"""

from __future__ import annotations

from collections.abc import Sequence

from db.cache.invalidation import invalidate
from db.queries.follows import FollowKind, follow, unfollow
from db.queries.institutions import InstitutionRow, fetch_institutions_by_ids
from db.queries.replication import committed_position
from db.queries.researchers import ResearcherRow, fetch_researchers_by_ids
from db.queries.viewers import rotate_feed_token
from db.records import Touched
from resolvers.context import Context
from resolvers.errors import LimitExceeded, NotFound
from resolvers.institutions import lookup_institution_id
from resolvers.researchers import lookup_researcher_id
from resolvers.viewer import follows_loader, require_viewer


async def _target_id(ctx: Context, kind: FollowKind, reference: str) -> int:
    lookup = lookup_researcher_id if kind == "researcher" else lookup_institution_id
    found = await lookup(ctx, reference)
    if found is None:
        raise NotFound(f"No {kind} {reference[:80]!r} in the archive.")
    return found


async def set_following(
    ctx: Context, kind: FollowKind, reference: str, *, following: bool
) -> ResearcherRow | InstitutionRow:
    """Follow (or unfollow) the researcher or institution `reference` names; idempotent. The entity as it is
    after the write, with its new follower count."""
    vid = require_viewer(ctx)
    target = await _target_id(ctx, kind, reference)
    async with ctx.pool.acquire() as conn:
        outcome: str
        if following:
            outcome = await follow(conn, vid, kind, target, cap=ctx.settings.max_follows)
            changed = outcome == "followed"
        else:
            outcome = "unfollowed"
            changed = await unfollow(conn, vid, kind, target)
        # As it is now, with its new follower count.
        if kind == "researcher":
            researchers = await fetch_researchers_by_ids(conn, [target])
            ctx.loaders.prime_researchers(researchers, force=True)
            rows: Sequence[ResearcherRow | InstitutionRow] = researchers
        else:
            rows = institutions = await fetch_institutions_by_ids(conn, [target])
            ctx.loaders.prime_institutions(institutions, force=True)
        if changed:
            # Where the write is in the WAL: kept with the invalidation and for the reader's next reads.
            ctx.written_at = await committed_position(conn)
    if outcome == "not_found" or not rows:
        raise NotFound(f"No {kind} {reference[:80]!r} in the archive.")
    if outcome == "limit":
        raise LimitExceeded(
            f"You already follow {ctx.settings.max_follows} researchers and institutions, the most one reader may; "
            "unfollow some first."
        )
    if changed:
        # A follower count is neither a name (answers naming the target stay) nor what any list filters or sorts by.
        touched = Touched(lists=False)
        (touched.researcher_figures if kind == "researcher" else touched.institution_figures).add(target)
        await invalidate(ctx.cache, touched, position=ctx.written_at)
    follows_loader(ctx, kind).prime(target, following, force=True)
    return rows[0]


async def set_following_researcher(ctx: Context, reference: str, *, following: bool) -> ResearcherRow:
    row = await set_following(ctx, "researcher", reference, following=following)
    assert isinstance(row, ResearcherRow)
    return row


async def set_following_institution(ctx: Context, reference: str, *, following: bool) -> InstitutionRow:
    row = await set_following(ctx, "institution", reference, following=following)
    assert isinstance(row, InstitutionRow)
    return row


async def resolve_rotate_feed_token(ctx: Context) -> str:
    """A new personal feed token; the old feed URL answers 404 from now on."""
    vid = require_viewer(ctx)
    async with ctx.pool.acquire() as conn:
        return await rotate_feed_token(conn, vid)
