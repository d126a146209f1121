"""What the author matching reads: what is stored of the S2 authors a batch names (its evidence for ties), and the
positions it left unlinked (`wovepaper ingest status`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

import asyncpg

SELECT_KNOWN_S2_AUTHORS = """
SELECT r.s2_author_id, r.name, r.openalex_id, r.orcid,
       array(SELECT i.ror_id FROM researcher_institutions ri JOIN institutions i ON i.id = ri.institution_id
             WHERE ri.researcher_id = r.id ORDER BY 1) AS rors
FROM researchers r WHERE r.s2_author_id = any($1::text[])
"""


@dataclass(frozen=True, slots=True)
class StoredAuthor:
    s2_author_id: str
    name: str
    openalex_id: str | None
    orcid: str | None
    rors: list[str]


async def fetch_known_s2_authors(conn: asyncpg.Connection, s2_author_ids: Sequence[str]) -> dict[str, StoredAuthor]:
    """The stored researchers of these S2 ids: name, OpenAlex id, ORCID and institutions (by ROR)."""
    if not s2_author_ids:
        return {}
    rows = await conn.fetch(SELECT_KNOWN_S2_AUTHORS, sorted(set(s2_author_ids)))
    return {
        r["s2_author_id"]: StoredAuthor(r["s2_author_id"], r["name"], r["openalex_id"], r["orcid"], list(r["rors"]))
        for r in rows
    }


COUNT_UNLINKED = "SELECT reason, count(*) AS n FROM unlinked_authorships GROUP BY reason ORDER BY reason"
SELECT_UNLINKED = """
SELECT p.arxiv_id, u.position, a.name, u.reason, u.candidates, u.noted_at
FROM unlinked_authorships u JOIN papers p ON p.id = u.paper_id
JOIN authorships a ON a.paper_id = u.paper_id AND a.position = u.position
ORDER BY u.reason, u.noted_at DESC, u.paper_id, u.position
LIMIT $1
"""


@dataclass(frozen=True, slots=True)
class UnlinkedPosition:
    arxiv_id: str
    position: int
    name: str
    reason: str  # ambiguous, no_identity, no_match
    candidates: list[str]
    noted_at: datetime


async def count_unlinked(conn: asyncpg.Connection) -> dict[str, int]:
    """Positions the enrichment left unlinked, by reason."""
    return {r["reason"]: r["n"] for r in await conn.fetch(COUNT_UNLINKED)}


async def fetch_unlinked(conn: asyncpg.Connection, *, limit: int) -> list[UnlinkedPosition]:
    """Up to `limit` unlinked positions: ambiguous ties first, the latest first within a reason."""
    if limit <= 0:
        return []
    rows = await conn.fetch(SELECT_UNLINKED, limit)
    return [
        UnlinkedPosition(r["arxiv_id"], r["position"], r["name"], r["reason"], list(r["candidates"]), r["noted_at"])
        for r in rows
    ]
