"""A follow is visible in the next request on any worker: two uvicorn processes share PostgreSQL and Redis, one
serves (and caches) the researcher page anonymously, the other takes the follow, and the first one's next answer
has the new follower count and the reader's new state."""

from __future__ import annotations

import contextlib
import os
import sys
from pathlib import Path
from typing import Any

import httpx

from edge.persisted import operation_documents
from tests.integration.graph_support import seeded_database
from tests.jwt_support import SECRET, bearer, hs256
from tests.server_process import ServerProcess, server_process

ROOT = Path(__file__).resolve().parents[2]
RESEARCHER_PAGE = operation_documents(ROOT / "frontend_contract" / "operations")["ResearcherPage"]
FOLLOW = "mutation F($id: String!) { followResearcher(input: {id: $id}) { researcher { followerCount } } }"
UNFOLLOW = "mutation U($id: String!) { unfollowResearcher(input: {id: $id}) { researcher { followerCount } } }"
STATE = "query S($id: String!) { researcher(id: $id) { viewerIsFollowing followerCount } }"


def worker(env: dict[str, str], log: Path) -> contextlib.AbstractContextManager[ServerProcess]:
    """One `uvicorn app:create_app --factory` process; its base URL once /healthz answers."""
    return server_process([sys.executable, "-m", "uvicorn", "app:create_app", "--factory"], env, log, timeout_s=90)


def post(base: str, query: str, variables: dict[str, Any], token: str | None = None) -> httpx.Response:
    headers = bearer(token) if token is not None else {}
    response = httpx.post(f"{base}/graphql", json={"query": query, "variables": variables}, headers=headers, timeout=30)
    assert response.status_code == 200, response.text
    assert "errors" not in response.json(), response.text
    return response


async def test_a_follow_on_one_worker_is_seen_by_the_other(
    make_database: Any, redis_url: str, cache_namespace: str, tmp_path: Path
) -> None:
    seeded = await seeded_database(make_database, "workers")
    env = {k: v for k, v in os.environ.items() if not k.startswith("WOVEPAPER_")}
    env |= {
        "DATABASE_URL": seeded.dsn,
        "REDIS_URL": redis_url,
        "WOVEPAPER_CACHE_NAMESPACE": f"{cache_namespace}w",
        "WOVEPAPER_JWT_SECRET": SECRET,
        "WOVEPAPER_SEMANTIC_PRELOAD": "false",
    }
    wumo = {"id": str(seeded.researcher_ids["wumo"])}
    reader = hs256("worker-reader")
    with worker(env, tmp_path / "a.log") as server_a, worker(env, tmp_path / "b.log") as server_b:
        a, b = server_a.url, server_b.url
        first = post(a, RESEARCHER_PAGE, wumo)
        assert first.json()["data"]["researcher"]["followerCount"] == 0
        cached = post(a, RESEARCHER_PAGE, wumo)
        assert cached.headers["x-cache"] == "hit"
        assert post(b, RESEARCHER_PAGE, wumo).headers["x-cache"] == "hit"  # one cache for both workers

        assert post(b, FOLLOW, wumo, reader).json()["data"]["followResearcher"]["researcher"]["followerCount"] == 1

        after = post(a, RESEARCHER_PAGE, wumo)
        assert after.headers["x-cache"] == "miss"
        assert after.json()["data"]["researcher"]["followerCount"] == 1
        state = post(a, STATE, wumo, reader)
        assert state.json()["data"]["researcher"] == {"viewerIsFollowing": True, "followerCount": 1}
        assert "x-cache" not in state.headers  # a signed-in request never touches the shared cache
        assert state.headers["cache-control"] == "private, no-store"

        post(a, UNFOLLOW, wumo, reader)
        assert post(b, RESEARCHER_PAGE, wumo).json()["data"]["researcher"]["followerCount"] == 0
        assert post(b, STATE, wumo, reader).json()["data"]["researcher"]["viewerIsFollowing"] is False
