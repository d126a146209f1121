"""The analysis fields as the API serves them, and the move of stored analyses to their new vocabulary."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import asyncpg

from db.migrate import migrate
from db.queries.writes.analyses import AnalysisRecord, upsert_analyses
from db.records import PAPER_TYPES
from schema.enums import PaperType
from tests.integration.graph_support import graph, seeded_database

QUERY = """query ($id: String!) {
  paper(id: $id) { analysed summary topics paperType researchField novelty significanceScore analysedAt analysisModel }
}"""


def test_the_enum_is_the_stored_vocabulary() -> None:
    assert [t.value for t in PaperType] == list(PAPER_TYPES)


async def test_analysis_fields_are_served_with_the_type_as_an_enum(make_database: Any) -> None:
    seeded = await seeded_database(make_database, "analysis_fields")
    conn = await asyncpg.connect(seeded.dsn)
    try:
        async with conn.transaction():
            await upsert_analyses(
                conn,
                [
                    AnalysisRecord(
                        "2401.00003",
                        "We do this. We find that.",
                        ["one", "two", "three"],
                        "BENCHMARK",
                        "Machine Learning",
                        "A new comparison.",
                        0.25,
                        model="qwen2.5-7b-instruct",
                    )
                ],
            )
    finally:
        await conn.close()
    async with graph(seeded) as g:
        analysed = (await g.data(QUERY, {"id": "2401.00003"}))["paper"]
        assert analysed["paperType"] == "BENCHMARK" and analysed["analysisModel"] == "qwen2.5-7b-instruct"
        assert analysed["significanceScore"] == 0.25 and analysed["topics"] == ["one", "two", "three"]
        assert datetime.fromisoformat(analysed["analysedAt"]).tzinfo is not None
        plain = (await g.data(QUERY, {"id": "2401.00004"}))["paper"]
        assert plain["analysed"] is False
        assert plain["paperType"] is None and plain["analysedAt"] is None and plain["analysisModel"] is None


async def test_migration_moves_stored_analyses_to_the_enum_and_the_0_to_1_scale(make_database: Any) -> None:
    dsn = await make_database("analysis_migration")
    conn = await asyncpg.connect(dsn)
    try:
        # The schema as it was before analysis by a model: migrations up to 0011.
        await migrate(conn, before="0012")
        for n, (kind, score) in enumerate([("theoretical", 6.5), ("methods", 10.0), ("poem", 0.5), (None, None)]):
            await conn.execute(
                """INSERT INTO papers (arxiv_id, slug, title, abstract, primary_category, published, updated,
                       paper_type, significance_score, analysed)
                   VALUES ($1, $1, 'T', 'A', 'cs.LG', now(), now(), $2, $3, $4)""",
                f"2401.0000{n}",
                kind,
                score,
                kind is not None,
            )
        await migrate(conn)
        rows = await conn.fetch(
            """SELECT paper_type, round(significance_score::numeric, 3)::float8, analysed_at IS NOT NULL AS dated,
                      analysis_source_md5 = md5('T' || E'\\n' || 'A')::uuid AS current
               FROM papers ORDER BY arxiv_id"""
        )
        assert [tuple(r) for r in rows] == [
            ("THEORY", 0.65, True, True),
            ("METHOD", 1.0, True, True),
            ("OTHER", 0.5, True, True),
            (None, None, False, None),
        ]
    finally:
        await conn.close()
