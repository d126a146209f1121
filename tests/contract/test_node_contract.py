"""The contract from JavaScript: TypeScript types generated for every operation, and the Node test
running every operation through graphql-request against a real server on the demo database."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from error_codes import ERROR_CODES
from tests.contract.conftest import CONTRACT, MUTATIONS
from tests.jwt_support import SECRET, hs256
from tests.server_process import server_process

NODE = shutil.which("node")
NPM = shutil.which("npm")
pytestmark = pytest.mark.skipif(
    NODE is None or NPM is None, reason="node and npm are not installed: the JavaScript contract cannot run"
)
BIN = CONTRACT / "node_modules" / ".bin"
NODE_TESTS = 14  # the test() calls in frontend_contract/test/operations.test.mjs


def _run(argv: list[str], **kwargs: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, cwd=CONTRACT, capture_output=True, text=True, timeout=300, **kwargs)  # type: ignore[call-overload, no-any-return]


@pytest.fixture(scope="module")
def node_modules() -> Path:
    """npm ci once; the packages stay in frontend_contract/node_modules (git-ignored) for the next run."""
    stamp = CONTRACT / "node_modules" / ".package-lock.json"
    lock = CONTRACT / "package-lock.json"
    if not stamp.exists() or stamp.stat().st_mtime < lock.stat().st_mtime:
        done = _run([str(NPM), "ci", "--no-audit", "--no-fund", "--prefer-offline", "--loglevel=error"])
        assert done.returncode == 0, done.stderr
    return CONTRACT / "node_modules"


@pytest.fixture(scope="module")
def server_url(demo_database_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """uvicorn serving the app on the demo database, one worker, on a free port."""
    env = {k: v for k, v in os.environ.items() if k != "REDIS_URL"}
    env["DATABASE_URL"] = demo_database_url
    env["WOVEPAPER_SEMANTIC_PRELOAD"] = "false"  # no operation here searches semantically
    env["WOVEPAPER_JWT_SECRET"] = SECRET  # the harness signs the signed-in reader's token with it
    log = tmp_path_factory.mktemp("node-contract") / "uvicorn.log"
    argv = [sys.executable, "-m", "uvicorn", "app:create_app", "--factory", "--workers", "1"]
    with server_process(argv, env, log) as server:
        yield f"{server.url}/graphql"


def test_codegen_types_every_operation_and_tsc_accepts_them(node_modules: Path, tmp_path: Path) -> None:
    generated = CONTRACT / "generated"
    done = _run([str(BIN / "graphql-codegen"), "--config", "codegen.yml"])
    assert done.returncode == 0, done.stdout + done.stderr
    types = (generated / "graphql.ts").read_text()
    for operation in (p.stem for p in (CONTRACT / "operations").glob("*.graphql")):
        assert f"export const {operation}Document" in types
        kind = "Mutation" if operation in MUTATIONS else "Query"
        assert f"export type {operation}{kind} = " in types
    # Every error code, for the client's exhaustive switch (typed-client.ts `onError`).
    enums = (generated / "schema-enums.ts").read_text()
    assert all(f"'{code}'" in enums for code in ERROR_CODES)
    done = _run([str(BIN / "tsc"), "--noEmit", "-p", "tsconfig.json"])
    assert done.returncode == 0, done.stdout + done.stderr


def test_node_client_runs_every_operation_against_a_running_server(node_modules: Path, server_url: str) -> None:
    # A reader of this run only: what the Node test follows, it unfollows again.
    reader = f"node-contract-{uuid.uuid4().hex[:8]}"
    token = hs256(reader, exp=int(time.time()) + 3600)
    env = {**os.environ, "WOVEPAPER_API_URL": server_url, "WOVEPAPER_VIEWER_TOKEN": token}
    done = _run([str(NODE), "--test", "--test-reporter=tap", "test/"], env=env)
    report = done.stdout + done.stderr
    assert done.returncode == 0, report
    assert f"# pass {NODE_TESTS}" in report, report
    assert "# fail 0" in report and "# skipped 0" in report, report
