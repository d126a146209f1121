"""`wovepaper serve` as a real process on a free port, queried over HTTP."""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Iterator
from urllib.parse import urlsplit

import httpx
import pytest

from tests.server_process import server_process, wovepaper_command

KEEP_ALIVE_S = 1.0


@pytest.fixture(scope="module")
def served(
    database_url: str, redis_url: str, cache_namespace: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("WOVEPAPER_")}
    # As everywhere in the tests: no embedding model loading (seconds of CPU) in the server.
    env |= {
        "DATABASE_URL": database_url,
        "REDIS_URL": redis_url,
        "WOVEPAPER_SEMANTIC_PRELOAD": "false",
        "WOVEPAPER_CACHE_NAMESPACE": cache_namespace,
        "WOVEPAPER_KEEP_ALIVE_S": str(KEEP_ALIVE_S),
    }
    log = tmp_path_factory.mktemp("serve") / "serve.log"
    with server_process([*wovepaper_command(), "serve"], env, log) as server:
        yield server.url
    assert server.process.returncode == 0, log.read_text()


def test_healthz(served: str) -> None:
    response = httpx.get(f"{served}/healthz")
    assert response.status_code == 200
    assert response.json() == {"status": "ok"}


def test_readyz(served: str) -> None:
    response = httpx.get(f"{served}/readyz")
    assert response.status_code == 200
    assert response.json() == {"status": "ok", "checks": {"postgres": "ok", "redis": "ok"}}


def test_graphql_answers_a_query(served: str) -> None:
    response = httpx.post(f"{served}/graphql", json={"query": "{ __typename }"})
    assert response.status_code == 200
    assert response.json() == {"data": {"__typename": "Query"}}


def test_graphql_reports_a_bad_query_as_an_error_not_a_500(served: str) -> None:
    response = httpx.post(f"{served}/graphql", json={"query": "{ noSuchField }"})
    assert response.status_code in (200, 400)
    body = response.json()
    assert body.get("errors"), body
    assert "noSuchField" in body["errors"][0]["message"]


def test_graphiql_is_served_to_a_browser(served: str) -> None:
    response = httpx.get(f"{served}/graphql", headers={"Accept": "text/html"})
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/html")
    assert "graphiql" in response.text.lower()


def _read_response(conn: socket.socket) -> bytes:
    """One whole response (head and Content-Length body), however the server's writes were split."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = conn.recv(65536)
        assert chunk, data
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    length = next(
        int(line.split(b":")[1]) for line in head.split(b"\r\n") if line.lower().startswith(b"content-length:")
    )
    while len(body) < length:
        chunk = conn.recv(65536)
        assert chunk, data
        body += chunk
    assert len(body) == length
    return head


def test_an_idle_connection_stays_open_for_the_keep_alive_setting_then_closes(served: str) -> None:
    """What a proxy in front relies on (docs/configuration.md, WOVEPAPER_KEEP_ALIVE_S)."""
    url = urlsplit(served)
    request = f"GET /healthz HTTP/1.1\r\nHost: {url.netloc}\r\n\r\n".encode()
    with socket.create_connection((url.hostname, url.port), timeout=10) as conn:
        conn.sendall(request)
        assert _read_response(conn).startswith(b"HTTP/1.1 200")
        time.sleep(KEEP_ALIVE_S / 2)
        conn.sendall(request)  # still open: answered on the same connection
        assert _read_response(conn).startswith(b"HTTP/1.1 200")
        idle_from = time.monotonic()
        assert conn.recv(1) == b""  # then closed by the server once idle for the setting
        assert KEEP_ALIVE_S * 0.9 <= time.monotonic() - idle_from < KEEP_ALIVE_S + 4
