"""Authorships matched to researchers and institutions, and the researchers' institutions they imply."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import asyncpg

from db.ids import normalize_ror
from db.queries.paper_people import UPDATE_MATCHED_COUNTS, add_people_of_papers
from db.queries.writes.staging import ids_of, stage
from db.records import AuthorshipMatch, Touched, UnlinkedAuthor

STG_MATCHES = """
    arxiv_id text, position integer, researcher_id bigint, institution_ids bigint[], link_evidence text, paper_id bigint
"""
STG_MATCH_COLUMNS = ("arxiv_id", "position", "researcher_id", "institution_ids", "link_evidence")
RESOLVE_STAGED_MATCHES = "UPDATE stg_matches s SET paper_id = p.id FROM papers p WHERE p.arxiv_id = s.arxiv_id"
# A collaboration is never a researcher, so a match naming one is ignored. A match without a researcher leaves a
# stored link alone: a link changes only when a later verdict names another researcher. The evidence is kept with
# the link (a new reason for the same link rewrites it, and touches nothing the site shows).
APPLY_RESEARCHER_MATCHES = """
WITH m AS (
    SELECT a.paper_id, a.position, a.researcher_id AS old_rid, s.researcher_id AS new_rid, s.link_evidence
    FROM stg_matches s JOIN authorships a ON a.paper_id = s.paper_id AND a.position = s.position
    WHERE NOT a.is_collaboration AND s.researcher_id IS NOT NULL
      AND (a.researcher_id, a.link_evidence) IS DISTINCT FROM (s.researcher_id, s.link_evidence)
    FOR UPDATE OF a
), u AS (
    UPDATE authorships a SET researcher_id = m.new_rid, link_evidence = m.link_evidence
    FROM m WHERE a.paper_id = m.paper_id AND a.position = m.position
)
SELECT paper_id, old_rid, new_rid FROM m WHERE old_rid IS DISTINCT FROM new_rid
"""
DELETE_UNLINKED = """
DELETE FROM unlinked_authorships u USING papers p WHERE u.paper_id = p.id AND p.arxiv_id = any($1::text[])
"""
# Only positions that hold no researcher after the batch's matches: one linked before keeps its link.
INSERT_UNLINKED = """
INSERT INTO unlinked_authorships (paper_id, position, reason, candidates)
SELECT a.paper_id, a.position, n.reason, string_to_array(n.candidates, ' ')
FROM unnest($1::text[], $2::integer[], $3::text[], $4::text[]) AS n(arxiv_id, position, reason, candidates)
JOIN papers p ON p.arxiv_id = n.arxiv_id
JOIN authorships a ON a.paper_id = p.id AND a.position = n.position
WHERE a.researcher_id IS NULL AND NOT a.is_collaboration
ON CONFLICT (paper_id, position) DO UPDATE SET reason = excluded.reason, candidates = excluded.candidates,
                                               noted_at = excluded.noted_at
"""
# A match that names institutions replaces that authorship's set; one that names none keeps it.
APPLY_INSTITUTION_MATCHES = """
WITH want AS (
    SELECT DISTINCT s.paper_id, s.position, i.institution_id
    FROM stg_matches s
    JOIN authorships a ON a.paper_id = s.paper_id AND a.position = s.position AND NOT a.is_collaboration
    CROSS JOIN unnest(s.institution_ids) AS i(institution_id)
), del AS (
    -- Not an anti-join against `want`: a CTE has no index, and re-running a large batch would
    -- compare every stored link with every wanted one.
    DELETE FROM authorship_institutions ai USING stg_matches s
    WHERE ai.paper_id = s.paper_id AND ai.position = s.position AND cardinality(s.institution_ids) > 0
      AND ai.institution_id <> ALL (s.institution_ids)
    RETURNING ai.paper_id, ai.institution_id
), ins AS (
    INSERT INTO authorship_institutions (paper_id, position, institution_id)
    SELECT paper_id, position, institution_id FROM want
    ON CONFLICT DO NOTHING
    RETURNING paper_id, institution_id
)
SELECT paper_id, institution_id FROM del UNION SELECT paper_id, institution_id FROM ins
"""
UPSERT_RESEARCHER_INSTITUTIONS_FROM_MATCHES = """
INSERT INTO researcher_institutions AS t (researcher_id, institution_id, first_year, last_year)
SELECT s.researcher_id, i.institution_id,
       min(extract(year FROM p.published AT TIME ZONE 'UTC'))::integer,
       max(extract(year FROM p.published AT TIME ZONE 'UTC'))::integer
FROM stg_matches s
JOIN authorships a ON a.paper_id = s.paper_id AND a.position = s.position AND a.researcher_id = s.researcher_id
JOIN papers p ON p.id = s.paper_id
CROSS JOIN unnest(s.institution_ids) AS i(institution_id)
GROUP BY s.researcher_id, i.institution_id
ON CONFLICT (researcher_id, institution_id) DO UPDATE SET
    first_year = least(t.first_year, excluded.first_year), last_year = greatest(t.last_year, excluded.last_year)
WHERE (t.first_year, t.last_year)
      IS DISTINCT FROM (least(t.first_year, excluded.first_year), greatest(t.last_year, excluded.last_year))
RETURNING t.researcher_id, t.institution_id
"""


@dataclass(slots=True)
class MatchResult:
    applied: int = 0  # authorships whose researcher changed
    skipped: int = 0  # matches naming an unknown researcher or paper
    touched: Touched = field(default_factory=Touched)


async def apply_authorship_matches(
    conn: asyncpg.Connection,
    matches: Sequence[AuthorshipMatch],
    researcher_ids: Mapping[str, int],
    institution_ids: Mapping[str, int],
    *,
    touched: Touched | None = None,
) -> MatchResult:
    """Link authorships to researchers and institutions, and researchers to institutions.

    `researcher_ids` maps `AuthorshipMatch.researcher_key` to researchers.id (as `upsert_researchers`
    returns it) and `institution_ids` ROR ids to institutions.id; a match whose key is unknown is skipped. A match
    without a key links only the authorship's institutions (an author no source identifies).
    """
    result = MatchResult()
    rows: dict[tuple[str, int], tuple[Any, ...]] = {}
    for m in matches:
        rid = researcher_ids.get(m.researcher_key) if m.researcher_key is not None else None
        if rid is None and (m.researcher_key is not None or not m.institution_rors):
            result.skipped += 1
            continue
        insts = sorted(
            {institution_ids[r] for r in (normalize_ror(x) or x for x in m.institution_rors) if r in institution_ids}
        )
        rows[(m.arxiv_id, m.position)] = (m.arxiv_id, m.position, rid, insts, m.evidence if rid else None)
    if not rows:
        return result
    await stage(conn, "stg_matches", STG_MATCHES, STG_MATCH_COLUMNS, list(rows.values()))
    await conn.execute(RESOLVE_STAGED_MATCHES)
    result.skipped += await conn.fetchval("SELECT count(*) FROM stg_matches WHERE paper_id IS NULL")
    here = Touched()
    changed = await conn.fetch(APPLY_RESEARCHER_MATCHES)
    result.applied = len(changed)
    here.papers |= ids_of(changed, "paper_id")
    # Links change which papers (and institutions) are whose, not what names anyone (db/records.py Touched).
    here.researcher_figures |= ids_of(changed, "old_rid") | ids_of(changed, "new_rid")
    links = await conn.fetch(APPLY_INSTITUTION_MATCHES)
    here.papers |= ids_of(links, "paper_id")
    here.institution_figures |= ids_of(links, "institution_id")
    ri = await conn.fetch(UPSERT_RESEARCHER_INSTITUTIONS_FROM_MATCHES)
    here.researcher_figures |= ids_of(ri, "researcher_id")
    here.institution_figures |= ids_of(ri, "institution_id")
    if changed:
        await conn.execute(UPDATE_MATCHED_COUNTS, sorted(ids_of(changed, "paper_id")))
    await add_people_of_papers(conn, here.papers, here)
    result.touched = here
    if touched is not None:
        touched.update(here)
    return result


async def record_unlinked(
    conn: asyncpg.Connection, arxiv_ids: Sequence[str], unlinked: Sequence[UnlinkedAuthor]
) -> None:
    """Replace what is noted of these papers' unlinked positions (call after their matches are applied)."""
    if arxiv_ids:
        await conn.execute(DELETE_UNLINKED, list(arxiv_ids))
    if unlinked:
        await conn.execute(
            INSERT_UNLINKED,
            [u.arxiv_id for u in unlinked],
            [u.position for u in unlinked],
            [u.reason for u in unlinked],
            [" ".join(c for c in u.candidates if c and " " not in c) for u in unlinked],
        )
