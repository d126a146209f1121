"""`resolvePath`: the site's routes to their canonical path, a redirect flag, or not found."""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import unquote, urlsplit

from db.queries.institutions import InstitutionRow
from db.queries.papers import PaperRow
from db.queries.researchers import ResearcherRow
from resolvers.context import Context
from resolvers.errors import BadUserInput, NotFound
from resolvers.institutions import resolve_institution
from resolvers.papers import resolve_paper
from resolvers.researchers import resolve_researcher

MAX_PATH_LENGTH = 2048


@dataclass(frozen=True, slots=True)
class PathResult:
    path: str
    redirect: bool
    node: PaperRow | ResearcherRow | InstitutionRow


async def resolve_path(ctx: Context, path: str) -> PathResult:
    """`/papers/astro-ph/9901001` -> `/papers/astro-ph-9901001-title-words`, redirect. The query string
    and fragment are not part of the route: the site keeps its own."""
    if len(path) > MAX_PATH_LENGTH:
        raise BadUserInput(f"`path` is longer than {MAX_PATH_LENGTH} characters.")
    requested = urlsplit(path.strip()).path
    parts = requested.strip("/").split("/", 1)
    if len(parts) != 2 or not parts[1]:
        raise NotFound(f"No page at {requested!r}.")
    section, rest = parts[0], unquote(parts[1]).strip("/")
    node: PaperRow | ResearcherRow | InstitutionRow | None
    try:
        if section == "papers":
            node = await resolve_paper(ctx, rest)
        elif section == "researchers":
            node = await resolve_researcher(ctx, rest)
        elif section == "institutions":
            node = await resolve_institution(ctx, rest)
        else:
            raise NotFound(f"No page at {requested!r}.")
    except BadUserInput:
        # A route with a malformed id is simply a page that does not exist.
        raise NotFound(f"No page at {requested!r}.") from None
    if node is None:
        raise NotFound(f"Nothing in the archive at {requested!r}.")
    canonical = f"/{section}/{node.slug}"
    return PathResult(canonical, canonical != requested, node)
