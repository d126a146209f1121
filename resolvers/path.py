"""`resolvePath`: the site's routes to their canonical path, a redirect flag and how the path matched, or null."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal
from urllib.parse import unquote, urlsplit

from db.queries.institutions import InstitutionRow
from db.queries.papers import PaperRow
from db.queries.researchers import ResearcherRow
from resolvers.context import Context
from resolvers.errors import BadUserInput
from resolvers.ids import parse_institution_id, parse_paper_id, parse_researcher_id
from resolvers.inputs import has_control_characters
from resolvers.institutions import find_institution, find_institution_by_similar_name
from resolvers.papers import resolve_paper
from resolvers.researchers import resolve_researcher

MAX_PATH_LENGTH = 2048


PathMatch = Literal["CANONICAL", "ID", "SLUG", "NAME", "SIMILAR_NAME", "MERGED"]


@dataclass(frozen=True, slots=True)
class PathResult:
    path: str
    redirect: bool
    node: PaperRow | ResearcherRow | InstitutionRow
    matched_by: PathMatch


async def _researcher(ctx: Context, rest: str) -> tuple[ResearcherRow, PathMatch] | None:
    key = parse_researcher_id(rest)
    row = await resolve_researcher(ctx, rest)
    if row is None:
        return None
    if key.db_id is not None and row.id != key.db_id:
        return row, "MERGED"
    if key.kind == "s2" and row.s2_author_id != key.value:
        return row, "MERGED"  # an S2 id S2 merged into another
    return row, "SLUG" if key.kind == "slug" else "ID"


async def _institution(ctx: Context, rest: str) -> tuple[InstitutionRow, PathMatch] | None:
    key = parse_institution_id(rest)
    row = await find_institution(ctx, key)
    if row is not None:
        return row, "SLUG" if key.kind == "slug" else "NAME" if key.kind == "name" else "ID"
    if key.kind == "name":
        # A route the user typed: the most similar name is a guess, and the answer says so.
        similar = await find_institution_by_similar_name(ctx, key.value)
        if similar is not None:
            return similar, "SIMILAR_NAME"
    return None


async def _paper(ctx: Context, rest: str) -> tuple[PaperRow, PathMatch] | None:
    key = parse_paper_id(rest)
    row = await resolve_paper(ctx, rest)
    return (row, "SLUG" if key.kind == "slug" else "ID") if row else None


_SECTIONS = {"papers": _paper, "researchers": _researcher, "institutions": _institution}


async def resolve_path(ctx: Context, path: str) -> PathResult | None:
    """`/papers/astro-ph/9901001` -> `/papers/astro-ph-9901001-title-words`, redirect. The query string and fragment
    are not part of the route: the site keeps its own. A route that leads nowhere (unknown section, malformed or
    unknown id) is null, like a paper or researcher that is not there."""
    if len(path) > MAX_PATH_LENGTH:
        raise BadUserInput(f"`path` is longer than {MAX_PATH_LENGTH} characters.")
    requested = urlsplit(path.strip()).path
    parts = requested.strip("/").split("/", 1)
    if len(parts) != 2 or not parts[1] or parts[0] not in _SECTIONS:
        return None
    section, rest = parts[0], unquote(parts[1]).strip("/")
    if not rest or has_control_characters(rest):
        return None
    try:
        found = await _SECTIONS[section](ctx, rest)
    except BadUserInput:
        return None
    if found is None:
        return None
    node, matched_by = found
    canonical = f"/{section}/{node.slug}"
    if canonical == requested:
        matched_by = "CANONICAL"
    return PathResult(canonical, canonical != requested, node, matched_by)
