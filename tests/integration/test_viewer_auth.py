"""Who the viewer is, through the served app: the JWT settings wire the verifier in, keys come from a JWKS
served on loopback (and are fetched again when the issuer rotates its `kid`), and every refusal is a 401
saying why. Responses to a signed-in reader are `Cache-Control: private, no-store`."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest

from app import create_app
from edge.jwt import MIN_REFRESH_S, JwtAuthenticator, KeySet, url_fetcher
from tests.integration.graph_support import seeded_database, serving, settings_for
from tests.jwt_support import OTHER_SECRET, SECRET, KeyPair, bearer, hs256, jwks

VIEWER = "query { viewer { id } }"
RSA_1 = KeyPair("key-2024")
RSA_2 = KeyPair("key-2025")
EC_1 = KeyPair("ec-2024", kind="EC")


class JwksServer:
    """A JWK Set document on loopback, as an identity provider serves it; counts requests."""

    def __init__(self, document: dict[str, Any]) -> None:
        self.document = document
        self.requests = 0
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 (the stdlib's name)
                outer.requests += 1
                body = json.dumps(outer.document).encode()
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: object) -> None:
                return None

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/.well-known/jwks.json"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> JwksServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def jwks_server() -> Iterator[JwksServer]:
    with JwksServer(jwks(RSA_1, EC_1)) as server:
        yield server


async def ask(client: httpx.AsyncClient, token: str | None) -> httpx.Response:
    headers = bearer(token) if token is not None else {}
    return await client.post("/graphql", json={"query": VIEWER}, headers=headers)


def refusal(response: httpx.Response) -> str:
    assert response.status_code == 401, response.text
    error = response.json()["errors"][0]
    assert error["extensions"]["code"] == "UNAUTHENTICATED"
    return str(error["message"])


async def test_hs256_from_the_settings_names_the_viewer_and_says_why_a_token_fails(make_database: Any) -> None:
    seeded = await seeded_database(make_database)
    settings = settings_for(seeded.dsn, jwt_secret=SECRET, jwt_audience="wovepaper-api")
    async with serving(create_app(settings)) as client:
        anonymous = await ask(client, None)
        assert anonymous.json() == {"data": {"viewer": None}}
        assert "private" not in anonymous.headers.get("cache-control", "")
        signed_in = await ask(client, hs256("reader-7", aud="wovepaper-api"))
        assert signed_in.json() == {"data": {"viewer": {"id": "reader-7"}}}
        assert signed_in.headers["cache-control"] == "private, no-store"
        assert "expired" in refusal(await ask(client, hs256(aud="wovepaper-api", exp=int(time.time()) - 120)))
        assert "bad signature" in refusal(await ask(client, hs256(aud="wovepaper-api", secret=OTHER_SECRET)))
        assert "wrong audience" in refusal(await ask(client, hs256(aud="another-api")))
        # Never a silent anonymous answer, whatever the query asked.
        papers = await client.post(
            "/graphql", json={"query": "{ papers(first: 1) { nodes { id } } }"}, headers=bearer("garbage")
        )
        assert "malformed" in refusal(papers)


async def test_without_a_jwt_setting_a_bearer_token_is_refused_naming_the_settings(make_database: Any) -> None:
    seeded = await seeded_database(make_database)
    async with serving(create_app(settings_for(seeded.dsn))) as client:
        message = refusal(await ask(client, hs256()))
        assert "WOVEPAPER_JWT_SECRET" in message and "WOVEPAPER_JWKS_URL" in message
        assert (await ask(client, None)).json() == {"data": {"viewer": None}}


async def test_rs256_and_es256_keys_from_a_jwks_url_in_the_settings(
    make_database: Any, jwks_server: JwksServer
) -> None:
    seeded = await seeded_database(make_database)
    async with serving(create_app(settings_for(seeded.dsn, jwks_url=jwks_server.url))) as client:
        assert (await ask(client, RSA_1.token("rsa-reader"))).json()["data"]["viewer"]["id"] == "rsa-reader"
        assert (await ask(client, EC_1.token("ec-reader"))).json()["data"]["viewer"]["id"] == "ec-reader"
        assert "HS256 tokens are not accepted" in refusal(await ask(client, hs256()))
    assert jwks_server.requests == 1  # fetched once, then cached


async def test_a_rotated_kid_is_fetched_from_the_jwks_url_once_per_window(
    make_database: Any, jwks_server: JwksServer
) -> None:
    seeded = await seeded_database(make_database)
    now = [0.0]
    client = httpx.AsyncClient(timeout=5)
    verifier = JwtAuthenticator(keys=KeySet(url_fetcher(jwks_server.url, client), clock=lambda: now[0]), client=client)
    app = create_app(settings_for(seeded.dsn), bearer_authenticator=verifier)
    async with serving(app) as api:
        assert (await ask(api, RSA_1.token("before"))).json()["data"]["viewer"]["id"] == "before"
        assert jwks_server.requests == 1
        # The provider publishes its next key and starts signing with it.
        jwks_server.document = jwks(RSA_1, RSA_2)
        now[0] += MIN_REFRESH_S + 1
        assert (await ask(api, RSA_2.token("after"))).json()["data"]["viewer"]["id"] == "after"
        assert jwks_server.requests == 2
        # Tokens naming keys that do not exist cost the provider nothing more within the window.
        for n in range(4):
            assert "unknown key" in refusal(await ask(api, RSA_1.token(kid=f"forged-{n}")))
        assert jwks_server.requests == 2
        # The old key withdrawn: once the window has passed, a token naming it is refused after a refetch.
        jwks_server.document = jwks(RSA_2)
        now[0] += 601
        assert "unknown key" in refusal(await ask(api, RSA_1.token()))
        assert jwks_server.requests == 3
    await client.aclose()


async def test_keys_from_a_jwks_file(make_database: Any, tmp_path: Path) -> None:
    seeded = await seeded_database(make_database)
    path = tmp_path / "jwks.json"
    path.write_text(json.dumps(jwks(RSA_1)))
    async with serving(create_app(settings_for(seeded.dsn, jwks_file=str(path)))) as client:
        assert (await ask(client, RSA_1.token("file-reader"))).json()["data"]["viewer"]["id"] == "file-reader"
        assert "unknown key" in refusal(await ask(client, RSA_2.token()))
