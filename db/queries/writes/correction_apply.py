"""A correction applied: the authorship links it changes, pinned against later writes (migration 0025's trigger),
the affiliations rebuilt and the figures refreshed, inside the caller's transaction (db/queries/writes/corrections.py
records and decides corrections)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from db.connection import Conn
from db.queries.corrections import CorrectionRow, ProfileRow, fetch_profiles
from db.queries.figures import MARK_MODIFIED, refresh_figures
from db.queries.merges import merge_researchers
from db.queries.paper_people import UPDATE_MATCHED_COUNTS, add_people_of_papers
from db.records import Touched


class CannotApply(Exception):
    """The correction no longer fits the archive (its author's name changed, its papers left the profile); the
    message says why."""


@dataclass(slots=True)
class Applied:
    summary: str  # the public log's sentence
    changes: str  # what changed, for the decision log and the operator
    decided_by: str = "auto:owner"
    new_researcher_id: int | None = None
    relinked: set[int] = field(default_factory=set)  # researchers whose links changed: their affiliations follow


# Corrections of the same profiles are applied one at a time (an advisory lock per profile, which the ingest
# never waits on), and what they write passes the pins' trigger: a correction writes what the pins will say.
LOCK_PROFILES = """
WITH locked AS (
    SELECT pg_advisory_xact_lock(hashtextextended('wovepaper:profile:' || s.id, 0))
    FROM (SELECT DISTINCT coalesce(d.survivor_id, k.id) AS id FROM unnest($1::bigint[]) AS k(id)
          LEFT JOIN researcher_redirects d ON d.old_id = k.id ORDER BY 1) s
)
SELECT (SELECT count(*) FROM locked), set_config('wovepaper.correcting', 'on', true)
"""

# -- the links -------------------------------------------------------------------------------------------------

SELECT_AUTHORS_FOR_UPDATE = """
SELECT a.paper_id, p.arxiv_id, a.position, a.name, a.researcher_id, a.is_collaboration,
       ARRAY(SELECT ai.institution_id FROM authorship_institutions ai
             WHERE ai.paper_id = a.paper_id AND ai.position = a.position) AS institutions
FROM authorships a JOIN papers p ON p.id = a.paper_id
WHERE a.paper_id = any($1::bigint[])
ORDER BY a.paper_id, a.position
FOR UPDATE OF a
"""
SELECT_ARXIV_IDS = "SELECT id, arxiv_id FROM papers WHERE id = any($1::bigint[])"
# A pin replaces the one there was for the same paper and researcher; the correction that had set it is superseded.
PIN = """
WITH want AS (
    SELECT * FROM unnest($1::bigint[], $2::bigint[], $3::boolean[], $4::text[]) AS w(paper_id, researcher_id, mine,
                                                                                     author_name)
), old AS (
    SELECT x.correction_id FROM authorship_pins x JOIN want w USING (paper_id, researcher_id)
    WHERE x.correction_id <> $5
), put AS (
    INSERT INTO authorship_pins AS t (paper_id, researcher_id, mine, author_name, correction_id)
    SELECT paper_id, researcher_id, mine, author_name, $5 FROM want
    ON CONFLICT (paper_id, researcher_id) DO UPDATE SET
        mine = excluded.mine, author_name = excluded.author_name, correction_id = excluded.correction_id,
        pinned_at = now()
)
UPDATE corrections c SET superseded_at = now()
WHERE c.id IN (SELECT correction_id FROM old) AND c.superseded_at IS NULL
"""
# The pin that put a paper on another profile, when a correction gives its author to this one.
DROP_MINE_PIN = """
WITH gone AS (DELETE FROM authorship_pins WHERE paper_id = $1 AND researcher_id = $2 AND mine RETURNING correction_id)
UPDATE corrections c SET superseded_at = now() FROM gone WHERE c.id = gone.correction_id AND c.superseded_at IS NULL
"""
UNLINK = "UPDATE authorships SET researcher_id = NULL WHERE paper_id = $1 AND researcher_id = $2 RETURNING position"
UNLINK_ELSEWHERE = """
UPDATE authorships SET researcher_id = NULL WHERE paper_id = $1 AND researcher_id = $2 AND position <> $3
RETURNING position
"""
LINK = "UPDATE authorships SET researcher_id = $3 WHERE paper_id = $1 AND position = $2"
MOVE_LINKS = """
UPDATE authorships SET researcher_id = $3 WHERE paper_id = any($1::bigint[]) AND researcher_id = $2
RETURNING paper_id, position, name
"""
# A split's new profile: the same name, no external ids (the ingest never writes to it), unowned.
NEW_PROFILE = """
INSERT INTO researchers (name, name_slug) SELECT name, name_slug FROM researchers WHERE id = $1 RETURNING id
"""
CLAIM = """
WITH old AS (
    SELECT correction_id FROM researcher_owners WHERE researcher_id = $1 AND correction_id <> $3 FOR UPDATE
), put AS (
    INSERT INTO researcher_owners (researcher_id, viewer_id, correction_id) VALUES ($1, $2, $3)
    ON CONFLICT (researcher_id) DO UPDATE SET
        viewer_id = excluded.viewer_id, correction_id = excluded.correction_id, claimed_at = now()
)
UPDATE corrections c SET superseded_at = now() FROM old WHERE c.id = old.correction_id AND c.superseded_at IS NULL
"""
# The researchers' institutions as their authorships give them now (an institution's researcher count reads them).
REBUILD_AFFILIATIONS = """
WITH wanted AS (
    SELECT a.researcher_id, ai.institution_id,
           min(extract(year FROM p.published AT TIME ZONE 'UTC'))::integer AS first_year,
           max(extract(year FROM p.published AT TIME ZONE 'UTC'))::integer AS last_year
    FROM authorships a
    JOIN authorship_institutions ai ON ai.paper_id = a.paper_id AND ai.position = a.position
    JOIN papers p ON p.id = a.paper_id
    WHERE a.researcher_id = any($1::bigint[])
    GROUP BY a.researcher_id, ai.institution_id
), gone AS (
    DELETE FROM researcher_institutions ri
    WHERE ri.researcher_id = any($1::bigint[])
      AND NOT EXISTS (SELECT 1 FROM wanted w WHERE w.researcher_id = ri.researcher_id
                                               AND w.institution_id = ri.institution_id)
    RETURNING ri.institution_id
), put AS (
    INSERT INTO researcher_institutions AS t (researcher_id, institution_id, first_year, last_year)
    SELECT researcher_id, institution_id, first_year, last_year FROM wanted
    ON CONFLICT (researcher_id, institution_id) DO UPDATE SET
        first_year = excluded.first_year, last_year = excluded.last_year
    WHERE (t.first_year, t.last_year) IS DISTINCT FROM (excluded.first_year, excluded.last_year)
    RETURNING t.institution_id
)
SELECT institution_id FROM gone UNION SELECT institution_id FROM put
"""


@dataclass(slots=True)
class _Author:
    paper_id: int
    arxiv_id: str
    position: int
    name: str
    researcher_id: int | None
    is_collaboration: bool
    institutions: list[int]


async def _lock_authors(conn: Conn, paper_ids: Sequence[int], touched: Touched) -> list[_Author]:
    """The papers' authorships, locked: the ingest's writes to them wait for this correction, and then see its pins.
    Their people (whose pages show the links about to change) and the papers' arXiv ids go into `touched`."""
    authors = [_Author(*r) for r in await conn.fetch(SELECT_AUTHORS_FOR_UPDATE, list(paper_ids))]
    for a in authors:
        touched.paper_keys.add(a.arxiv_id)
        touched.institutions.update(a.institutions)
        if a.researcher_id is not None:
            touched.researchers.add(a.researcher_id)
    return authors


async def _pin(conn: Conn, correction_id: int, pins: Sequence[tuple[int, int, bool, str | None]]) -> None:
    """(paper, researcher, mine, author name) pins, all set by one correction."""
    await conn.execute(
        PIN,
        [p[0] for p in pins],
        [p[1] for p in pins],
        [p[2] for p in pins],
        [p[3] for p in pins],
        correction_id,
    )


def _papers(arxiv_ids: Sequence[str], limit: int = 5) -> str:
    shown = ", ".join(f"arXiv:{a}" for a in arxiv_ids[:limit])
    return shown + (f" and {len(arxiv_ids) - limit} more" if len(arxiv_ids) > limit else "")


def _owns(owner: str | None, profiles: Sequence[ProfileRow | None]) -> bool:
    """Whether `owner` (None: an operator, who may apply anything) owns every profile concerned."""
    return owner is None or all(p is None or p.owner == owner for p in profiles)


async def _claim(
    conn: Conn, c: CorrectionRow, p: ProfileRow, touched: Touched, owner: str | None, orcid: str | None
) -> Applied | None:
    by = "operator"
    if owner is not None:
        # At once only for the ORCID iD the profile carries, and never over another reader's claim.
        if p.owner is not None or orcid is None or (p.orcid or "").upper() != orcid.upper():
            return None
        by = "auto:orcid"
    await conn.execute(CLAIM, p.id, c.viewer_id, c.id)
    touched.researchers.add(p.id)
    taken = " (it was another reader's)" if p.owner not in (None, c.viewer_id) else ""
    return Applied(
        "The researcher claimed this profile.",
        f"researcher {p.id} ({p.name}) is now owned by reader {c.viewer_id}{taken}",
        by,
    )


async def _not_me(conn: Conn, c: CorrectionRow, p: ProfileRow, touched: Touched) -> Applied:
    paper_id = c.paper_ids[0]
    authors = await _lock_authors(conn, [paper_id], touched)
    if not authors:
        raise CannotApply(f"paper {paper_id} has no authors in the archive")
    arxiv_id = authors[0].arxiv_id
    await _pin(conn, c.id, [(paper_id, p.id, False, None)])
    positions = [r["position"] for r in await conn.fetch(UNLINK, paper_id, p.id)]
    if positions:
        await conn.execute(UPDATE_MATCHED_COUNTS, [paper_id])
    touched.papers.add(paper_id)
    touched.researchers.add(p.id)
    if positions:
        summary = f"arXiv:{arxiv_id} was taken off this profile: it is not this researcher's."
        changes = f"arXiv:{arxiv_id}: author {', '.join(map(str, positions))} unlinked from researcher {p.id}"
    else:
        summary = f"arXiv:{arxiv_id} is kept off this profile: it is not this researcher's."
        changes = f"arXiv:{arxiv_id} was not on researcher {p.id}: nothing unlinked"
    return Applied(summary, changes + f" ({p.name}); pinned off it", relinked={p.id})


async def _is_me(conn: Conn, c: CorrectionRow, p: ProfileRow, touched: Touched, owner: str | None) -> Applied | None:
    paper_id, position = c.paper_ids[0], c.position
    authors = await _lock_authors(conn, [paper_id], Touched())
    author = next((a for a in authors if a.position == position), None)
    if author is None or author.is_collaboration or author.name != c.author_name:
        now = f"'{author.name}'" if author is not None else "gone"
        raise CannotApply(f"author {position} of paper {paper_id} was '{c.author_name}' when asked and is now {now}")
    holder = author.researcher_id
    if owner is not None and holder not in (None, p.id):
        # Taking an author from another profile needs that profile too.
        held = (await fetch_profiles(conn, [holder])).get(holder)
        if not _owns(owner, [p, held]):
            return None
    for a in authors:
        touched.paper_keys.add(a.arxiv_id)
        touched.institutions.update(a.institutions)
        touched.researchers.update([a.researcher_id] if a.researcher_id is not None else [])
    if holder not in (None, p.id):
        await conn.execute(DROP_MINE_PIN, paper_id, holder)
    await _pin(conn, c.id, [(paper_id, p.id, True, author.name)])
    elsewhere = await conn.fetch(UNLINK_ELSEWHERE, paper_id, p.id, position)
    if holder != p.id:
        await conn.execute(LINK, paper_id, position, p.id)
    if elsewhere or holder != p.id:
        await conn.execute(UPDATE_MATCHED_COUNTS, [paper_id])
    touched.papers.add(paper_id)
    touched.researchers |= {p.id} | ({holder} if holder is not None else set())
    arxiv_id = author.arxiv_id
    if holder == p.id:
        summary = f"arXiv:{arxiv_id} is confirmed as this researcher's (author {position}, {author.name})."
        changes = f"arXiv:{arxiv_id}: author {position} was linked to researcher {p.id} already"
    else:
        summary = f"arXiv:{arxiv_id} was added to this profile (author {position}, {author.name})."
        before = f"researcher {holder}" if holder is not None else "no researcher"
        changes = f"arXiv:{arxiv_id}: author {position} ({author.name}) moved from {before} to researcher {p.id}"
    relinked = {p.id} | ({holder} if holder is not None else set())
    return Applied(summary, changes + f" ({p.name}); pinned on it", relinked=relinked)


async def _split(conn: Conn, c: CorrectionRow, p: ProfileRow, touched: Touched) -> Applied:
    on = [a for a in await _lock_authors(conn, c.paper_ids, Touched()) if a.researcher_id == p.id]
    if not on:
        raise CannotApply(f"none of the papers to split off is on researcher {p.id} any more")
    papers = sorted({a.paper_id for a in on})
    await add_people_of_papers(conn, papers, touched)
    new_id: int = await conn.fetchval(NEW_PROFILE, p.id)
    moved = await conn.fetch(MOVE_LINKS, papers, p.id, new_id)
    pins = [(pid, p.id, False, None) for pid in papers]
    pins += [(r["paper_id"], new_id, True, r["name"]) for r in moved]
    await _pin(conn, c.id, pins)
    touched.papers |= set(papers)
    touched.researchers |= {p.id, new_id}
    listed = _papers(sorted({a.arxiv_id for a in on}))
    n = len(papers)
    summary = f"{n} paper{'s' if n > 1 else ''} ({listed}) moved from profile {p.id} to a new profile, {new_id}."
    changes = f"new researcher {new_id} ({p.name}); {n} paper(s) moved to it from researcher {p.id}: {listed}"
    return Applied(summary, changes, new_researcher_id=new_id, relinked={p.id, new_id})


async def _merge(conn: Conn, c: CorrectionRow, profiles: Sequence[ProfileRow], touched: Touched) -> Applied:
    distinct = list({p.id: p for p in profiles}.values())
    if len(distinct) < 2:
        raise CannotApply("these profiles are one profile already")
    # The profile with the most papers keeps its id (the others redirect to it).
    survivor = max(distinct, key=lambda p: (p.paper_count, -p.id))
    absorbed = sorted(p.id for p in distinct if p.id != survivor.id)
    for rid in absorbed:
        if not await merge_researchers(conn, rid, survivor.id, touched, keep_claims=False):
            raise CannotApply(f"researcher {rid} could not be merged into {survivor.id}")
    merged = ", ".join(str(i) for i in absorbed)
    summary = f"Profile{'s' if len(absorbed) > 1 else ''} {merged} merged into profile {survivor.id}."
    changes = f"researchers {merged} merged into researcher {survivor.id} ({survivor.name}); their ids redirect to it"
    return Applied(summary, changes, new_researcher_id=survivor.id)


async def apply_correction(
    conn: Conn, c: CorrectionRow, touched: Touched, *, owner: str | None, orcid: str | None = None
) -> Applied | None:
    """Apply `c` inside the caller's transaction and refresh what it touched. With `owner` (the reader asking), only
    when that reader owns every profile it concerns (a claim: when the profile's ORCID iD is `orcid` and nobody
    owns it); None otherwise, nothing written. Without, as an operator decided. CannotApply when it no longer fits."""
    await conn.fetchval(LOCK_PROFILES, c.researcher_ids)
    found = await fetch_profiles(conn, c.researcher_ids)
    missing = [i for i in c.researcher_ids if i not in found]
    if missing:
        raise CannotApply(f"researcher {missing[0]} is not in the archive any more")
    profiles = [found[i] for i in c.researcher_ids]
    if c.kind == "CLAIM":
        claimed = await _claim(conn, c, profiles[0], touched, owner, orcid)
        if claimed is not None:
            # `claimed` is on the profile's page: it changed (its figures did not).
            await conn.execute(MARK_MODIFIED["researchers"], sorted(touched.researchers))
        return claimed
    if not _owns(owner, profiles):
        return None
    applied: Applied | None
    if c.kind == "NOT_ME":
        applied = await _not_me(conn, c, profiles[0], touched)
    elif c.kind == "IS_ME":
        applied = await _is_me(conn, c, profiles[0], touched, owner)
    elif c.kind == "SPLIT":
        applied = await _split(conn, c, profiles[0], touched)
    elif c.kind == "MERGE":
        applied = await _merge(conn, c, profiles, touched)
    else:
        raise ValueError(f"unknown correction kind {c.kind!r}")
    if applied is None:
        return None
    if owner is None:
        applied.decided_by = "operator"
    if applied.relinked:
        # (A merge moves the affiliations itself.)
        rebuilt = await conn.fetch(REBUILD_AFFILIATIONS, sorted(applied.relinked))
        touched.institutions |= {r["institution_id"] for r in rebuilt}
    await refresh_figures(conn, touched)
    return applied
