"""What a change to papers' authorships touches besides the papers: their matched counts, counted again, and their
researchers and institutions (with the papers' arXiv ids), named for the cache invalidation. The bulk writes, the
corrections and the merges of researchers all move authorships, and all use these.
"""

from __future__ import annotations

from collections.abc import Iterable

from db.connection import Conn
from db.records import Touched

UPDATE_MATCHED_COUNTS = """
UPDATE papers p SET matched_count = m.n, modified_at = now()
FROM (SELECT b.id, count(a.researcher_id)::integer AS n
      FROM unnest($1::bigint[]) AS b(id) LEFT JOIN authorships a ON a.paper_id = b.id GROUP BY b.id) m
WHERE p.id = m.id AND p.matched_count <> m.n
"""
# The people of papers, and the papers' arXiv ids (what their cached responses are tagged by).
SELECT_PEOPLE_OF_PAPERS = """
SELECT 'r' AS kind, researcher_id AS id, NULL AS key FROM authorships
WHERE paper_id = any($1::bigint[]) AND researcher_id IS NOT NULL
UNION
SELECT 'i', institution_id, NULL FROM authorship_institutions WHERE paper_id = any($1::bigint[])
UNION ALL
SELECT 'p', id, arxiv_id FROM papers WHERE id = any($1::bigint[])
"""


async def add_people_of_papers(conn: Conn, paper_ids: Iterable[int], touched: Touched) -> None:
    """Add the researchers and institutions of these papers, and the papers' arXiv ids. What the papers count
    changed, not what names their people (db/records.py Touched)."""
    ids = sorted(set(paper_ids))
    if not ids:
        return
    for r in await conn.fetch(SELECT_PEOPLE_OF_PAPERS, ids):
        if r["kind"] == "p":
            touched.paper_keys.add(r["key"])
        else:
            (touched.researcher_figures if r["kind"] == "r" else touched.institution_figures).add(r["id"])
