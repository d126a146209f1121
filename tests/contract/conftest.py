"""Fixtures for the frontend contract: the operations, their budgets, and variables from the demo data."""

from __future__ import annotations

import contextlib
import tomllib
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import asyncpg
import httpx
import pytest

from app import create_app
from edge.persisted import operation_documents
from settings import Settings
from tests.integration.graph_support import StatementCounter, serving
from tests.jwt_support import SECRET, bearer, hs256

ROOT = Path(__file__).resolve().parents[2]
CONTRACT = ROOT / "frontend_contract"
OPERATIONS = CONTRACT / "operations"
SITE_OPERATIONS = (
    "ResearcherPage",
    "PaperPage",
    "InstitutionPage",
    "PaperList",
    "ResearchersList",
    "InstitutionsList",
    "LatestPapers",
    "SitemapPage",
    "ResolvePath",
    "Search",
    "Autocomplete",
    "ResearcherNetwork",
    "ViewerFeed",
    "FollowResearcher",
    "UnfollowResearcher",
    "ViewerConversations",
    "ResearcherCorrections",
    "ViewerResearcherState",
    "ClaimResearcher",
    "ReportAuthorship",
    "ViewerCorrections",
)
# Sent by the site's server for a signed-in reader, with their token.
VIEWER_OPERATIONS = (
    "ViewerFeed",
    "FollowResearcher",
    "UnfollowResearcher",
    "ViewerConversations",
    "ViewerResearcherState",
    "ClaimResearcher",
    "ReportAuthorship",
    "ViewerCorrections",
)
# What the site writes: the follow buttons and the corrections' buttons.
MUTATIONS = ("FollowResearcher", "UnfollowResearcher", "ClaimResearcher", "ReportAuthorship")
# The contract's own reader: the only writes the contract tests make to the shared demo database are this
# reader's follows (and feed token), which no other test reads, and the follows are taken back at the end; and its
# corrections, which wait for an operator (it owns no profile), so the archive does not change.
CONTRACT_READER = f"contract-reader-{uuid.uuid4().hex[:8]}"


def operation_text(name: str) -> str:
    """The operation's document as the site sends it: its file, and the fragments it spreads."""
    return operation_documents(OPERATIONS)[name]


def budgets() -> dict[str, int]:
    return {k: int(v) for k, v in tomllib.loads((CONTRACT / "budgets.toml").read_text()).items()}


@dataclass
class Api:
    client: httpx.AsyncClient
    counter: StatementCounter

    async def run(self, name: str, variables: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
        """The response body and the SQL statements the operation ran."""
        self.counter.reset()
        headers = bearer(hs256(CONTRACT_READER)) if name in VIEWER_OPERATIONS else {}
        response = await self.client.post(
            "/graphql",
            json={"query": operation_text(name), "variables": variables, "operationName": name},
            headers=headers,
        )
        assert response.status_code == 200, response.text
        return response.json(), list(self.counter.statements)


@contextlib.asynccontextmanager
async def serve(dsn: str) -> AsyncIterator[Api]:
    counter = StatementCounter()
    # No Redis: every figure comes from PostgreSQL, so every statement is counted.
    app = create_app(Settings(DATABASE_URL=dsn, jwt_secret=SECRET), query_logger=counter)
    async with serving(app) as client:
        yield Api(client, counter)


FOLLOWED = """
mutation Follow($researcher: String!, $institution: String!, $on: Boolean!) {
  followResearcher(input: {id: $researcher}) @include(if: $on) { researcher { id } }
  followInstitution(input: {id: $institution}) @include(if: $on) { institution { id } }
  unfollowResearcher(input: {id: $researcher}) @skip(if: $on) { researcher { id } }
  unfollowInstitution(input: {id: $institution}) @skip(if: $on) { institution { id } }
}"""


@pytest.fixture(scope="module")
async def api(demo_database_url: str, demo_ids: dict[str, Any]) -> AsyncIterator[Api]:
    """The demo served with the contract reader following its busiest researcher and institution."""
    async with serve(demo_database_url) as api:

        async def following(on: bool) -> None:
            variables = {"researcher": demo_ids["researcher"], "institution": demo_ids["institution"], "on": on}
            response = await api.client.post(
                "/graphql", json={"query": FOLLOWED, "variables": variables}, headers=bearer(hs256(CONTRACT_READER))
            )
            assert "errors" not in response.json(), response.text

        await following(True)
        try:
            yield api
        finally:
            await following(False)


@pytest.fixture(scope="session")
async def demo_ids(demo_database_url: str) -> dict[str, Any]:
    """Ids the site would link to, read from the demo data (never hard-coded)."""
    conn = await asyncpg.connect(demo_database_url)
    try:
        researcher = await conn.fetchrow(
            "SELECT id, paper_count FROM researchers ORDER BY paper_count DESC, id LIMIT 1"
        )
        one_paper = await conn.fetchval("SELECT id FROM researchers WHERE paper_count = 1 ORDER BY id LIMIT 1")
        category = await conn.fetchval(
            "SELECT primary_category FROM papers GROUP BY primary_category ORDER BY count(*) DESC, 1 LIMIT 1"
        )
        paper = await conn.fetchrow(
            """SELECT p.arxiv_id, p.slug FROM papers p
               WHERE EXISTS (SELECT 1 FROM authorship_institutions ai WHERE ai.paper_id = p.id)
               ORDER BY p.author_count DESC, p.id LIMIT 1"""
        )
        institution = await conn.fetchrow("SELECT ror_id, name FROM institutions ORDER BY paper_count DESC, id LIMIT 1")
        # A common title word, and the first letters of the most prolific researcher's surname.
        word = await conn.fetchval(
            """SELECT w FROM (SELECT lower(unnest(regexp_split_to_array(title, '[^A-Za-z]+'))) AS w FROM papers) t
               WHERE length(w) > 6 GROUP BY w ORDER BY count(*) DESC, w LIMIT 1"""
        )
        prefix = await conn.fetchval(
            "SELECT left(wp_surname(name), 4) FROM researchers ORDER BY paper_count DESC, id LIMIT 1"
        )
        researcher_paper = await conn.fetchval(
            "SELECT p.arxiv_id FROM authorships a JOIN papers p ON p.id = a.paper_id WHERE a.researcher_id = $1"
            " ORDER BY p.id LIMIT 1",
            researcher["id"],
        )
    finally:
        await conn.close()
    assert researcher is not None and paper is not None and institution is not None and one_paper is not None
    return {
        "researcher": str(researcher["id"]),
        "researcher_papers": researcher["paper_count"],
        "one_paper_researcher": str(one_paper),
        "paper": paper["arxiv_id"],
        "paper_slug": paper["slug"],
        "category": category,
        "institution": institution["ror_id"],
        "word": word,
        "prefix": prefix,
        "researcher_paper": researcher_paper,
    }


def variables_for(name: str, ids: dict[str, Any]) -> dict[str, Any]:
    """The variables the site sends for each operation, on a busy page."""
    return {
        "ResearcherPage": {"id": ids["researcher"], "page": 1, "first": 24},
        "PaperPage": {"id": ids["paper"]},
        "InstitutionPage": {"id": ids["institution"], "page": 1, "first": 24},
        "PaperList": {"filter": {"category": ids["category"]}, "sort": "MOST_CITED", "page": 2},
        "ResearchersList": {"page": 1},
        "InstitutionsList": {"sort": "NAME", "page": 1},
        "LatestPapers": {"first": 24},
        "SitemapPage": {"kind": "PAPER", "chunk": 0, "chunkSize": 1000},
        "ResolvePath": {"path": f"/papers/{ids['paper']}"},
        "Search": {"query": ids["word"], "page": 1},
        "Autocomplete": {"query": ids["prefix"], "types": ["RESEARCHER", "INSTITUTION", "PAPER"]},
        "ResearcherNetwork": {"id": ids["researcher"], "depth": 2, "limit": 200},
        "ViewerFeed": {"first": 24},
        "FollowResearcher": {"id": ids["one_paper_researcher"]},
        "UnfollowResearcher": {"id": ids["one_paper_researcher"]},
        # Signed in with no conversations here; tests/integration/test_chat.py runs it on a reader's conversations.
        "ViewerConversations": {"first": 10},
        "ResearcherCorrections": {"id": ids["researcher"]},
        "ViewerResearcherState": {"id": ids["researcher"]},
        # The contract's reader owns no profile: both wait for an operator (tests/integration/test_corrections.py
        # runs them applied, within the same budgets).
        "ClaimResearcher": {"id": ids["one_paper_researcher"], "note": "This is me."},
        "ReportAuthorship": {"paperId": ids["researcher_paper"], "researcherId": ids["researcher"], "kind": "NOT_ME"},
        "ViewerCorrections": {"first": 10},
    }[name]
