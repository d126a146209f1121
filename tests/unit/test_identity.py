"""Client addresses behind proxies, and credentials that must verify."""

from __future__ import annotations

import gc
import tracemalloc

import pytest

from edge.errors import EdgeError
from edge.identity import Identifier, client_ip
from request_types.identity import ApiKey, parse_networks
from settings import Settings

TRUSTED = parse_networks(["10.0.0.0/8", "::1"])


def scope(peer: str, *headers: tuple[bytes, bytes]) -> dict[str, object]:
    return {"type": "http", "client": (peer, 1234), "headers": list(headers)}


def test_peer_is_the_client_without_trusted_proxies() -> None:
    assert client_ip(scope("203.0.113.9", (b"x-forwarded-for", b"1.2.3.4")), frozenset()) == "203.0.113.9"


@pytest.mark.parametrize("proxy", ["127.0.0.1", "::1"])
def test_by_default_a_proxy_on_the_same_host_is_trusted_and_no_other(proxy: str) -> None:
    """What uvicorn trusted by default before `serve` left proxy headers to the edge: a local nginx keeps working."""
    default = parse_networks(Settings.model_fields["trusted_proxies"].default.split(","))
    forwarded = (b"x-forwarded-for", b"198.51.100.7")
    assert client_ip(scope(proxy, forwarded), default) == "198.51.100.7"
    assert client_ip(scope("203.0.113.9", forwarded), default) == "203.0.113.9"
    assert parse_networks(Settings(trusted_proxies="").trusted_proxies.split(",")) == frozenset()


def test_forwarded_for_is_ignored_from_an_untrusted_peer() -> None:
    assert client_ip(scope("203.0.113.9", (b"x-forwarded-for", b"1.2.3.4")), TRUSTED) == "203.0.113.9"


def test_nearest_untrusted_hop_from_a_trusted_proxy() -> None:
    # The client may prepend anything; only hops added by trusted proxies are believed.
    s = scope("10.1.1.1", (b"x-forwarded-for", b"6.6.6.6, 198.51.100.7, 10.2.2.2"))
    assert client_ip(s, TRUSTED) == "198.51.100.7"


def test_garbage_hop_falls_back_to_the_peer() -> None:
    assert client_ip(scope("10.1.1.1", (b"x-forwarded-for", b"not-an-ip")), TRUSTED) == "10.1.1.1"


def test_hops_that_cannot_be_addresses_are_not_remembered() -> None:
    """A hop is whatever a client wrote before the proxy appended its own: 16,384 remembered 10 KB hops took 160 MB."""
    tracemalloc.start()
    try:
        before = tracemalloc.take_snapshot()
        for i in range(2_000):
            hop = f"{i:05d}".encode() + b"x" * 10_000
            assert client_ip(scope("10.1.1.1", (b"x-forwarded-for", hop)), TRUSTED) == "10.1.1.1"
        gc.collect()
        grown = sum(d.size_diff for d in tracemalloc.take_snapshot().compare_to(before, "filename"))
    finally:
        tracemalloc.stop()
    assert grown < 1_000_000, grown


async def _identify(mw: Identifier, *headers: tuple[bytes, bytes]) -> object:
    return await mw.identify(scope("198.51.100.1", *headers))


async def test_anonymous_without_credentials() -> None:
    identity = await _identify(Identifier())
    assert identity.anonymous  # type: ignore[attr-defined]


async def test_a_credential_nobody_can_verify_is_refused() -> None:
    mw = Identifier()
    with pytest.raises(EdgeError) as err:
        await _identify(mw, (b"x-api-key", b"wp_x"))
    assert (err.value.status, err.value.code) == (401, "UNAUTHENTICATED")
    with pytest.raises(EdgeError):
        await _identify(mw, (b"authorization", b"Bearer abc"))
    with pytest.raises(EdgeError):
        await _identify(mw, (b"authorization", b"Basic abc"))


async def test_authenticators_fill_the_identity() -> None:
    async def key(scope: object, value: str) -> ApiKey:
        return ApiKey(id=1, name="partner", prefix=value[:8], points_per_hour=5000)

    async def bearer(scope: object, token: str) -> str:
        return "viewer-" + token

    mw = Identifier(key_authenticator=key, bearer_authenticator=bearer)
    identity = await _identify(mw, (b"x-api-key", b"wp_abcdefgh"), (b"authorization", b"Bearer t1"))
    assert identity.viewer_id == "viewer-t1"  # type: ignore[attr-defined]
    assert identity.api_key.name == "partner"  # type: ignore[attr-defined]
