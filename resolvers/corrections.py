"""Corrections by signed-in researchers: claiming a profile, reporting a paper as not theirs (NOT_ME) or theirs
(IS_ME), splitting a profile, asking for profiles to be merged; the reader's own corrections, whether the reader owns
a profile, and a profile's public log.

A request is checked here (its ids, and for IS_ME the paper's authors against the names the profile is known by, as
the ingest's alignment compares names), then recorded and, when the reader owns every profile it concerns, applied
at once, in one transaction (db/queries/writes/corrections.py). What it changed is dropped from every cache and
purged from the CDN as soon as it commits, like an ingest write.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Final

from strawberry.dataloader import DataLoader

from db.cache.invalidation import invalidate
from db.connection import Conn
from db.filters import Clause
from db.queries.corrections import (
    CORRECTION_SORT,
    AuthorshipCheck,
    CorrectionLogRow,
    CorrectionRow,
    PaperAuthorRow,
    count_viewer_corrections,
    fetch_authorship_check,
    fetch_correction_logs,
    fetch_linked_papers,
    fetch_live_correction,
    fetch_owned_ids,
    fetch_profiles,
    page_viewer_corrections,
)
from db.queries.papers import PaperRow
from db.queries.researchers import ResearcherRow
from db.queries.writes.corrections import (
    CannotApply,
    CorrectionLimits,
    CorrectionRequest,
    submit_correction,
)
from ingest.matching.names import names_match
from resolvers.context import Context, Info
from resolvers.errors import BadUserInput, LimitExceeded, NotFound
from resolvers.pages import ListQuery, read_page
from resolvers.pagination import Connection, Lookahead, page_request, wants_total
from resolvers.papers import resolve_paper
from resolvers.researchers import lookup_researcher_id
from resolvers.viewer import require_viewer, viewer_id

MAX_NOTE_LENGTH: Final = 2000
MAX_SPLIT_PAPERS: Final = 100
MAX_MERGE_PROFILES: Final = 10
MAX_CORRECTIONS_PAGE: Final = 100
MAX_LOG: Final = 100
# Names listed in a refusal, at most.
SHOWN_NAMES: Final = 8


@dataclass(slots=True)
class CorrectionResult:
    """What a correction mutation answers: the correction, and the profile it concerns as it is now."""

    correction: CorrectionRow
    researcher_id: int | None


def _note(note: str | None) -> str | None:
    if note is None or not note.strip():
        return None
    if len(note) > MAX_NOTE_LENGTH:
        raise BadUserInput(f"`note` has at most {MAX_NOTE_LENGTH} characters; got {len(note)}.")
    return note.strip()


async def _researcher_id(ctx: Context, reference: str) -> int:
    found = await lookup_researcher_id(ctx, reference)
    if found is None:
        raise NotFound(f"No researcher {reference[:80]!r} in the archive.")
    return found


async def _paper(ctx: Context, reference: str) -> PaperRow:
    found = await resolve_paper(ctx, reference)
    if found is None:
        raise NotFound(f"No paper {reference[:80]!r} in the archive.")
    return found


def _listed(names: Sequence[str]) -> str:
    shown = ", ".join(names[:SHOWN_NAMES])
    return shown + (f" and {len(names) - SHOWN_NAMES} more" if len(names) > SHOWN_NAMES else "")


async def _correct(
    ctx: Context, fingerprint: str, check: Callable[[Conn], Awaitable[CorrectionRequest]]
) -> CorrectionRow:
    """Check the request, record it and apply it when the reader may; the same request again is the same
    correction (also once it applied and its check would now fail: the paper is off the profile already)."""
    vid = require_viewer(ctx)
    limits = CorrectionLimits(ctx.settings.corrections_pending_max, ctx.settings.corrections_daily_max)
    async with ctx.pool.acquire() as conn:
        try:
            request = await check(conn)
        except BadUserInput:
            existing = await fetch_live_correction(conn, vid, fingerprint)
            if existing is not None:
                return existing
            raise
        try:
            submitted = await submit_correction(conn, vid, request, orcid=ctx.identity.viewer_orcid, limits=limits)
        except CannotApply as exc:
            raise BadUserInput(f"The archive changed while this was asked: {exc}. Nothing was recorded.") from None
    if submitted.outcome == "pending_limit":
        raise LimitExceeded(
            f"You have {limits.pending} corrections waiting for an operator, the most one reader may; wait until "
            "some are decided."
        )
    if submitted.outcome == "daily_limit":
        raise LimitExceeded(
            f"You have asked for {limits.daily} corrections today (UTC), the most one reader may in a day; try "
            "again tomorrow."
        )
    assert submitted.correction is not None
    if submitted.touched:
        # Committed: every worker's next request, and the CDN, see the change; so does the rest of this operation
        # (rows its look-ups read before are not answered again).
        await invalidate(ctx.cache, submitted.touched, position=await ctx.committed_position(), purge=ctx.purge)
        ctx.renew()
    return submitted.correction


# -- the mutations --------------------------------------------------------------------------------------------


async def resolve_claim_researcher(ctx: Context, researcher: str, note: str | None) -> CorrectionResult:
    """Claim a profile: applied at once when its ORCID iD is the reader's verified one and nobody owns it."""
    require_viewer(ctx)
    text = _note(note)
    rid = await _researcher_id(ctx, researcher)

    async def check(conn: Conn) -> CorrectionRequest:
        if rid not in await fetch_profiles(conn, [rid]):
            raise NotFound(f"No researcher {researcher[:80]!r} in the archive.")
        return CorrectionRequest("CLAIM", f"CLAIM:{rid}", (rid,), note=text)

    correction = await _correct(ctx, f"CLAIM:{rid}", check)
    return CorrectionResult(correction, rid)


async def resolve_report_authorship(
    ctx: Context, paper: str, researcher: str, kind: str, note: str | None, position: int | None
) -> CorrectionResult:
    """NOT_ME: the paper leaves the profile. IS_ME: the author position whose name is one of the profile's names
    joins it (`position` says which when several are)."""
    require_viewer(ctx)
    text = _note(note)
    if position is not None and not 1 <= position <= 100_000:
        raise BadUserInput(f"`position` is an author's place on the paper, from 1; got {position}.")
    rid, row = await asyncio.gather(_researcher_id(ctx, researcher), _paper(ctx, paper))
    fingerprint = f"{kind}:{rid}:{row.id}:{position or ''}"

    async def check(conn: Conn) -> CorrectionRequest:
        found = await fetch_authorship_check(conn, rid, row.id, with_names=kind == "IS_ME")
        if found is None:
            raise NotFound(f"No researcher {researcher[:80]!r} in the archive.")
        if kind == "NOT_ME":
            if not any(a.researcher_id == found.profile.id for a in found.authors):
                raise BadUserInput(
                    f"arXiv:{row.arxiv_id} is not on profile {found.profile.id} ({found.profile.name}): there is "
                    "nothing to take off."
                )
            return CorrectionRequest("NOT_ME", fingerprint, (rid,), (row.id,), note=text)
        author = _is_me_author(row, found, position)
        return CorrectionRequest(
            "IS_ME", fingerprint, (rid,), (row.id,), position=author.position, author_name=author.name, note=text
        )

    correction = await _correct(ctx, fingerprint, check)
    return CorrectionResult(correction, rid)


def _is_me_author(paper: PaperRow, found: AuthorshipCheck, position: int | None) -> PaperAuthorRow:
    """The author an IS_ME report names: at `position`, or the one author (not yet on another profile, when several
    are) whose name is one of the profile's names."""
    profile, names = found.profile, found.names
    known = f"the profile's names are {_listed(names)}"

    def named_like(a: PaperAuthorRow) -> bool:
        return not a.is_collaboration and any(names_match(a.name, n) for n in names)

    if position is not None:
        author = next((a for a in found.authors if a.position == position), None)
        if author is None:
            raise BadUserInput(f"arXiv:{paper.arxiv_id} has no author {position}; it has {len(found.authors)}.")
        if author.is_collaboration:
            raise BadUserInput(
                f"Author {position} of arXiv:{paper.arxiv_id} is a collaboration ({author.name}), never a researcher."
            )
        if not named_like(author):
            raise BadUserInput(
                f"Author {position} of arXiv:{paper.arxiv_id} is {author.name}, a name that matches none of this "
                f"profile's: {known}."
            )
        return author
    mine = [a for a in found.authors if a.researcher_id == profile.id]
    if mine:
        return mine[0]  # on the profile already: the report pins it there
    candidates = [a for a in found.authors if named_like(a)]
    if not candidates:
        authors = [a.name for a in found.authors] or ["none"]
        raise BadUserInput(
            f"No author of arXiv:{paper.arxiv_id} is named like this profile ({profile.name}): its authors are "
            f"{_listed(authors)}; {known}."
        )
    free = [a for a in candidates if a.researcher_id is None]
    if len(candidates) > 1 and len(free) == 1:
        return free[0]
    if len(candidates) > 1:
        listed = _listed([f"{a.position}: {a.name}" for a in candidates])
        raise BadUserInput(
            f"Several authors of arXiv:{paper.arxiv_id} are named like this profile ({listed}): say which with "
            "`position`."
        )
    return candidates[0]


async def resolve_split_researcher(
    ctx: Context, researcher: str, papers: Sequence[str], note: str | None
) -> CorrectionResult:
    """These papers (another person's, under the same name) move to a new profile of their own."""
    require_viewer(ctx)
    text = _note(note)
    if not 1 <= len(papers) <= MAX_SPLIT_PAPERS:
        raise BadUserInput(f"`paperIds` names 1 to {MAX_SPLIT_PAPERS} papers; got {len(papers)}.")
    rid = await _researcher_id(ctx, researcher)
    rows = await asyncio.gather(*(_paper(ctx, p) for p in papers))
    ids = sorted({r.id for r in rows})
    fingerprint = f"SPLIT:{rid}:{','.join(map(str, ids))}"

    async def check(conn: Conn) -> CorrectionRequest:
        profile = (await fetch_profiles(conn, [rid])).get(rid)
        if profile is None:
            raise NotFound(f"No researcher {researcher[:80]!r} in the archive.")
        linked, total = await fetch_linked_papers(conn, profile.id, ids)
        missing = [f"arXiv:{r.arxiv_id}" for r in rows if r.id not in linked]
        if missing:
            raise BadUserInput(f"Not on profile {profile.id} ({profile.name}): {_listed(sorted(set(missing)))}.")
        if len(linked) >= total:
            raise BadUserInput(
                "A split leaves at least one paper on the profile: these are all of its papers. To say a paper is "
                "not yours, report it with `reportAuthorship(kind: NOT_ME)`."
            )
        return CorrectionRequest("SPLIT", fingerprint, (rid,), tuple(ids), note=text)

    correction = await _correct(ctx, fingerprint, check)
    return CorrectionResult(correction, rid)


async def resolve_request_merge(ctx: Context, researchers: Sequence[str], note: str | None) -> CorrectionResult:
    """These profiles are one person's: merged into the one with most papers, the others' ids redirecting to it."""
    require_viewer(ctx)
    text = _note(note)
    if not 2 <= len(researchers) <= MAX_MERGE_PROFILES:
        raise BadUserInput(f"`researcherIds` names 2 to {MAX_MERGE_PROFILES} profiles; got {len(researchers)}.")
    asked = sorted(set(await asyncio.gather(*(_researcher_id(ctx, r) for r in researchers))))
    fingerprint = f"MERGE:{','.join(map(str, asked))}"

    async def check(conn: Conn) -> CorrectionRequest:
        profiles = await fetch_profiles(conn, asked)
        missing = [i for i in asked if i not in profiles]
        if missing:
            raise NotFound(f"No researcher {missing[0]} in the archive.")
        if len({p.id for p in profiles.values()}) < 2:
            raise BadUserInput("These ids name one profile: there is nothing to merge.")
        return CorrectionRequest("MERGE", fingerprint, tuple(asked), note=text)

    correction = await _correct(ctx, fingerprint, check)
    return CorrectionResult(correction, correction.new_researcher_id or asked[0])


# -- the reader's corrections ------------------------------------------------------------------------------------


async def resolve_viewer_corrections(info: Info, *, first: int, after: str | None) -> Connection[CorrectionRow]:
    """The reader's corrections, newest first, with what became of each."""
    ctx = info.context
    vid = require_viewer(ctx)
    if not 1 <= first <= MAX_CORRECTIONS_PAGE:
        raise BadUserInput(f"`first` must be between 1 and {MAX_CORRECTIONS_PAGE}; got {first}.")
    request = page_request(CORRECTION_SORT, first=first, after=after, page=None)

    async def rows(conn: Conn, after: Clause | None, limit: int, offset: int) -> list[CorrectionRow]:
        return await page_viewer_corrections(conn, vid, limit=limit, after=after)

    async def count(conn: Conn) -> int:
        return await count_viewer_corrections(conn, vid)

    listing = ListQuery(CORRECTION_SORT, rows, count)
    return await read_page(ctx, listing, request, want_total=wants_total(Lookahead.of(info)), guard_depth=False)


async def correction_researchers(ctx: Context, ids: Sequence[int]) -> list[ResearcherRow]:
    """The profiles as they are now (an id merged away answers its survivor), each once."""
    found = await ctx.loaders.researcher_by_id.load_many(list(ids))
    return list({r.id: r for r in found if r is not None}.values())


async def correction_papers(ctx: Context, ids: Sequence[int]) -> list[PaperRow]:
    found = await ctx.loaders.paper_by_id.load_many(list(ids))
    return [p for p in found if p is not None]


async def correction_researcher(ctx: Context, rid: int | None) -> ResearcherRow | None:
    return await ctx.loaders.researcher_by_id.load(rid) if rid is not None else None


# -- a profile: its owner and its public log ------------------------------------------------------------------


def _owned_loader(ctx: Context) -> DataLoader[int, bool]:
    def build() -> DataLoader[int, bool]:
        vid = require_viewer(ctx)

        async def load(ids: list[int]) -> list[bool]:
            async with ctx.pool.acquire() as conn:
                owned = await fetch_owned_ids(conn, vid, ids)
            return [i in owned for i in ids]

        return DataLoader(load, max_batch_size=500)

    loader: DataLoader[int, bool] = ctx.loaders.named("viewer_owns", build)
    return loader


def viewer_owns(ctx: Context, researcher: ResearcherRow) -> bool | None | Awaitable[bool]:
    """Whether the signed-in reader owns the profile; null when anonymous; false without asking when unclaimed."""
    if viewer_id(ctx) is None:
        return None
    if not researcher.claimed:
        return False
    return _owned_loader(ctx).load(researcher.id)


def _logs_loader(ctx: Context) -> DataLoader[tuple[int, int], list[CorrectionLogRow]]:
    async def load(keys: list[tuple[int, int]]) -> list[list[CorrectionLogRow]]:
        by_size: dict[int, list[int]] = {}
        for rid, first in keys:
            by_size.setdefault(first, []).append(rid)
        found: dict[tuple[int, int], list[CorrectionLogRow]] = {}
        async with ctx.pool.acquire() as conn:
            for first, ids in by_size.items():
                for rid, rows in (await fetch_correction_logs(conn, sorted(set(ids)), limit=first)).items():
                    found[(rid, first)] = rows
        return [found.get(k, []) for k in keys]

    loader: DataLoader[tuple[int, int], list[CorrectionLogRow]] = ctx.loaders.named(
        "correction_logs", lambda: DataLoader(load, max_batch_size=500)
    )
    return loader


async def researcher_corrections(ctx: Context, researcher: ResearcherRow, first: int) -> list[CorrectionLogRow]:
    """The profile's applied corrections, newest first: what changed and when, never who asked."""
    if not 1 <= first <= MAX_LOG:
        raise BadUserInput(f"`first` must be between 1 and {MAX_LOG}; got {first}.")
    return await _logs_loader(ctx).load((researcher.id, first))
