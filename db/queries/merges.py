"""Merging a researcher into another: Semantic Scholar merged two author ids, or a correction by hand.

The absorbed researcher's authorships, works, affiliations and followers move to the survivor, which adopts the
OpenAlex id and ORCID it lacks; the absorbed row is deleted and leaves a redirect (`researcher_redirects`), so its
id, slug and Semantic Scholar id keep resolving to the survivor and the changes feed lists the merge. What
corrections said about the absorbed profile (its pins, its owner) goes to the survivor with its papers.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import asyncpg

from db.connection import Conn
from db.queries.paper_people import UPDATE_MATCHED_COUNTS, add_people_of_papers
from db.records import Touched

SELECT_PAIR = """
SELECT id, name_slug, s2_author_id, openalex_id, orcid FROM researchers WHERE id = any($1::bigint[]) ORDER BY id
FOR UPDATE
"""
# Earlier merges into the absorbed researcher now lead to the survivor, then this merge is recorded.
REDIRECT = """
WITH chained AS (UPDATE researcher_redirects SET survivor_id = $2 WHERE survivor_id = $1)
INSERT INTO researcher_redirects (old_id, survivor_id, old_name_slug, old_s2_author_id) VALUES ($1, $2, $3, $4)
"""
# The identifiers are unique: the absorbed row lets go of them before the survivor adopts the ones it lacks.
RELEASE_IDENTIFIERS = "UPDATE researchers SET s2_author_id = NULL, openalex_id = NULL, orcid = NULL WHERE id = $1"
ADOPT_IDENTIFIERS = """
UPDATE researchers SET openalex_id = coalesce(openalex_id, $2), orcid = coalesce(orcid, $3), modified_at = now()
WHERE id = $1
"""
MOVE_AUTHORSHIPS = "UPDATE authorships SET researcher_id = $2 WHERE researcher_id = $1 RETURNING paper_id"
MOVE_WORKS = """
INSERT INTO researcher_works (researcher_id, source, external_id, title, year, citation_count, arxiv_id, doi)
SELECT $2, source, external_id, title, year, citation_count, arxiv_id, doi
FROM researcher_works WHERE researcher_id = $1
ON CONFLICT DO NOTHING
"""
MOVE_AFFILIATIONS = """
INSERT INTO researcher_institutions AS t (researcher_id, institution_id, first_year, last_year)
SELECT $2, institution_id, first_year, last_year FROM researcher_institutions WHERE researcher_id = $1
ON CONFLICT (researcher_id, institution_id) DO UPDATE SET
    first_year = least(t.first_year, excluded.first_year), last_year = greatest(t.last_year, excluded.last_year)
RETURNING t.institution_id
"""
# Whoever followed either follows the survivor.
MOVE_FOLLOWS = """
INSERT INTO follows (viewer_id, researcher_id, created_at)
SELECT viewer_id, $2, created_at FROM follows WHERE researcher_id = $1
ON CONFLICT DO NOTHING
"""
DELETE_ABSORBED = "DELETE FROM researchers WHERE id = $1"
# The owners of both profiles: two readers' profiles are one person's only when an operator says so.
SELECT_OWNERS = """
SELECT researcher_id, viewer_id, correction_id FROM researcher_owners WHERE researcher_id = any($1::bigint[])
"""
# A merge two owners' claims would not survive is not made; it counts as a conflict of both claims.
COUNT_CLAIM_CONFLICTS = """
UPDATE corrections SET conflicts = conflicts + 1, last_conflict_at = now() WHERE id = any($1::bigint[])
"""
# What corrections pinned on the absorbed profile now holds for the survivor; where both had a pin for the same
# paper, the later one stands when they disagree (when they agree, the first correction keeps it).
REPOINT_PINS = """
WITH moved AS (
    DELETE FROM authorship_pins WHERE researcher_id = $1
    RETURNING paper_id, mine, author_name, correction_id, pinned_at
)
INSERT INTO authorship_pins AS t (paper_id, researcher_id, mine, author_name, correction_id, pinned_at)
SELECT paper_id, $2, mine, author_name, correction_id, pinned_at FROM moved
ON CONFLICT (paper_id, researcher_id) DO UPDATE SET
    mine = excluded.mine, author_name = excluded.author_name, correction_id = excluded.correction_id,
    pinned_at = excluded.pinned_at
WHERE excluded.mine <> t.mine AND excluded.pinned_at > t.pinned_at
"""
# A paper a correction took off either profile stays off the survivor (the later correction stands, above).
UNLINK_PINNED_OFF = """
UPDATE authorships a SET researcher_id = NULL
FROM authorship_pins x
WHERE x.researcher_id = $2 AND NOT x.mine AND a.paper_id = x.paper_id AND a.researcher_id IN ($1, $2)
RETURNING a.paper_id
"""
# The survivor's owner stays; without one, the absorbed profile's owner owns it. Another reader's claim on the
# absorbed profile ends with it (its correction is superseded).
MOVE_OWNER = """
UPDATE researcher_owners SET researcher_id = $2
WHERE researcher_id = $1 AND NOT EXISTS (SELECT 1 FROM researcher_owners WHERE researcher_id = $2)
"""
SUPERSEDE_CLAIMS = """
UPDATE corrections SET superseded_at = now() WHERE id = any($1::bigint[]) AND superseded_at IS NULL
"""

SELECT_BY_S2_IDS = "SELECT s2_author_id, id FROM researchers WHERE s2_author_id = any($1::text[])"
RENAME_S2_ID = "UPDATE researchers SET s2_author_id = $2, modified_at = now() WHERE id = $1"
# Every merged id S2 answered becomes a redirect to the survivor, stored profile or not. Kept flat: ids that led to
# the old one lead to the survivor, and a survivor that is itself redirected already is followed one step.
RECORD_S2_REDIRECTS = """
INSERT INTO s2_author_redirects AS r (old_s2_author_id, s2_author_id)
SELECT n.old, coalesce(x.s2_author_id, n.new)
FROM unnest($1::text[], $2::text[]) AS n(old, new)
LEFT JOIN s2_author_redirects x ON x.old_s2_author_id = n.new
WHERE n.old <> coalesce(x.s2_author_id, n.new)
ON CONFLICT (old_s2_author_id) DO UPDATE SET s2_author_id = excluded.s2_author_id, seen_at = now()
WHERE r.s2_author_id IS DISTINCT FROM excluded.s2_author_id
"""
CHAIN_S2_REDIRECTS = """
UPDATE s2_author_redirects r SET s2_author_id = n.new, seen_at = now()
FROM unnest($1::text[], $2::text[]) AS n(old, new)
WHERE r.s2_author_id = n.old AND r.old_s2_author_id <> n.new
"""
# An id S2 answers as itself again is no redirect (S2 split what it had merged).
DROP_S2_REDIRECTS = "DELETE FROM s2_author_redirects WHERE old_s2_author_id = any($1::text[])"
# Researchers known by an OpenAlex id or ORCID alone (S2 had no id for them) that turn out to be an S2 author's:
# the batch found the id on a position S2 gives that author. Only where the S2 author's own id of that kind is
# unset or the same: an author OpenAlex splits in two keeps the second profile until a person says otherwise.
SELECT_ABSORBED_BY_IDENTITY = """
SELECT DISTINCT ON (o.id) o.id AS absorbed, s.id AS survivor
FROM unnest($1::text[], $2::text[], $3::text[]) AS k(s2, openalex, orcid)
JOIN researchers s ON s.s2_author_id = k.s2
JOIN researchers o ON o.s2_author_id IS NULL AND o.id <> s.id
  AND ((k.openalex IS NOT NULL AND o.openalex_id = k.openalex AND (s.openalex_id IS NULL OR s.openalex_id = k.openalex))
    OR (k.orcid IS NOT NULL AND o.orcid = k.orcid AND (s.orcid IS NULL OR s.orcid = k.orcid)))
ORDER BY o.id, s.id
"""


async def merge_researchers(
    conn: Conn, absorbed_id: int, survivor_id: int, touched: Touched, *, keep_claims: bool = True
) -> bool:
    """Merge `absorbed_id` into `survivor_id` inside the caller's transaction; False when either does not exist
    (or they are the same), or when two readers own the two profiles and `keep_claims` (an operator approving a
    reader's merge request decides otherwise: the survivor's owner stays). Adds to `touched` what changed, for the
    figures' refresh and the cache."""
    if absorbed_id == survivor_id:
        return False
    rows = {r["id"]: r for r in await conn.fetch(SELECT_PAIR, [absorbed_id, survivor_id])}
    absorbed = rows.get(absorbed_id)
    if absorbed is None or survivor_id not in rows:
        return False
    owners = {r["researcher_id"]: r for r in await conn.fetch(SELECT_OWNERS, [absorbed_id, survivor_id])}
    if len({o["viewer_id"] for o in owners.values()}) > 1:
        if keep_claims:
            await conn.execute(COUNT_CLAIM_CONFLICTS, sorted(o["correction_id"] for o in owners.values()))
            return False
        await conn.execute(SUPERSEDE_CLAIMS, [owners[absorbed_id]["correction_id"]])
    await conn.execute(REDIRECT, absorbed_id, survivor_id, absorbed["name_slug"], absorbed["s2_author_id"])
    await conn.execute(RELEASE_IDENTIFIERS, absorbed_id)
    await conn.execute(ADOPT_IDENTIFIERS, survivor_id, absorbed["openalex_id"], absorbed["orcid"])
    if owners:
        await conn.execute(MOVE_OWNER, absorbed_id, survivor_id)
    # Before the links move: a pin of the absorbed profile must not hold its papers back.
    await conn.execute(REPOINT_PINS, absorbed_id, survivor_id)
    unlinked = {r["paper_id"] for r in await conn.fetch(UNLINK_PINNED_OFF, absorbed_id, survivor_id)}
    if unlinked:
        await conn.execute(UPDATE_MATCHED_COUNTS, sorted(unlinked))
    moved = unlinked | {r["paper_id"] for r in await conn.fetch(MOVE_AUTHORSHIPS, absorbed_id, survivor_id)}
    await conn.execute(MOVE_WORKS, absorbed_id, survivor_id)
    touched.institutions |= {r["institution_id"] for r in await conn.fetch(MOVE_AFFILIATIONS, absorbed_id, survivor_id)}
    await conn.execute(MOVE_FOLLOWS, absorbed_id, survivor_id)
    await conn.execute(DELETE_ABSORBED, absorbed_id)
    touched.researchers |= {absorbed_id, survivor_id}
    touched.papers |= moved
    # The papers' co-authors show the survivor now, and their institutions count it.
    await add_people_of_papers(conn, moved, touched)
    return True


async def drop_s2_redirects(conn: asyncpg.Connection, live_ids: Sequence[str]) -> None:
    """S2 answered these ids as themselves: none of them redirects any longer."""
    if live_ids:
        await conn.execute(DROP_S2_REDIRECTS, list(live_ids))


async def absorb_by_identity(
    conn: asyncpg.Connection, identities: Sequence[tuple[str, str | None, str | None]], touched: Touched
) -> int:
    """(S2 id, OpenAlex id, ORCID) of researchers a batch writes: a researcher known only by that OpenAlex id or
    ORCID is merged into the S2 author's stored researcher. Returns how many were merged."""
    wanted = [(s2, oa, orcid) for s2, oa, orcid in identities if oa or orcid]
    if not wanted:
        return 0
    rows = await conn.fetch(
        SELECT_ABSORBED_BY_IDENTITY, [w[0] for w in wanted], [w[1] for w in wanted], [w[2] for w in wanted]
    )
    count = 0
    for r in rows:
        if await merge_researchers(conn, r["absorbed"], r["survivor"], touched):
            count += 1
    return count


async def apply_s2_merges(conn: asyncpg.Connection, merged: Mapping[str, str], touched: Touched) -> int:
    """Semantic Scholar answers some author ids with another (it merged them): {old S2 id: surviving S2 id}.
    Each old id becomes a redirect to the survivor (`s2_author_redirects`). A researcher stored under the old id
    is merged into the one stored under the survivor's, or, when none is, takes the surviving id. Returns how many
    researchers were merged."""
    if not merged:
        return 0
    pairs = sorted(merged.items())
    await conn.execute(RECORD_S2_REDIRECTS, [old for old, _ in pairs], [new for _, new in pairs])
    await conn.execute(CHAIN_S2_REDIRECTS, [old for old, _ in pairs], [new for _, new in pairs])
    by_s2 = {
        r["s2_author_id"]: r["id"] for r in await conn.fetch(SELECT_BY_S2_IDS, sorted({*merged, *merged.values()}))
    }
    # Lookups of the old ids that found nothing may find the survivor now.
    touched.researchers |= {by_s2[new] for new in merged.values() if new in by_s2}
    count = 0
    for old, new in sorted(merged.items()):
        absorbed = by_s2.get(old)
        if absorbed is None:
            continue
        survivor = by_s2.get(new)
        if survivor is None:
            await conn.execute(RENAME_S2_ID, absorbed, new)
            by_s2[new] = absorbed
            touched.researchers.add(absorbed)
        elif await merge_researchers(conn, absorbed, survivor, touched):
            count += 1
    return count
