"""The bearer token verifier (edge/jwt.py): every way a token can fail says which, and JWKS keys are refetched
when a token names an unknown `kid`, at most once per window however many such tokens arrive."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import time
from collections.abc import Callable
from typing import Any

import jwt
import orjson
import pytest
from cryptography.hazmat.primitives import serialization

from edge.errors import EdgeError
from edge.jwt import (
    LEEWAY_S,
    MIN_REFRESH_S,
    Claims,
    JwtAuthenticator,
    KeySet,
    KeysUnavailable,
    build_bearer_authenticator,
)
from tests.jwt_support import OTHER_SECRET, SECRET, KeyPair, hs256, jwks

RSA = KeyPair("rsa-1")
RSA_NEXT = KeyPair("rsa-2")
EC = KeyPair("ec-1", kind="EC")
SCOPE: dict[str, Any] = {"type": "http"}


class FakeJwks:
    """A JWK Set source whose document and availability the test sets; counts fetches."""

    def __init__(self, document: dict[str, Any] | None) -> None:
        self.document = document
        self.fetches = 0

    async def __call__(self) -> bytes:
        self.fetches += 1
        await asyncio.sleep(0)  # let concurrent callers pile up, as a network round trip would
        if self.document is None:
            raise KeysUnavailable("down")
        return orjson.dumps(self.document)


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


async def refused(verify: Any, token: str) -> EdgeError:
    with pytest.raises(EdgeError) as raised:
        await verify(SCOPE, token)
    return raised.value


def hs_verifier(**claims: Any) -> JwtAuthenticator:
    return JwtAuthenticator(secret=SECRET, claims=Claims(**claims))


async def test_a_valid_hs256_token_names_its_subject() -> None:
    assert await hs_verifier()(SCOPE, hs256("reader-42")) == "reader-42"


async def test_the_reader_s_orcid_comes_from_the_verified_token_s_claim() -> None:
    verify = hs_verifier()
    assert (await verify(SCOPE, hs256(orcid="0000-0002-1825-009x"))).orcid == "0000-0002-1825-009X"
    assert (await verify(SCOPE, hs256(orcid="https://orcid.org/0000-0002-1825-0097"))).orcid == "0000-0002-1825-0097"
    # Not an ORCID iD, or not a string: the reader is signed in, without one.
    for junk in ("me", "0000-0002-1825", 1234, ["0000-0002-1825-0097"], "0000-0002-1825-0097" + " " * 100):
        subject = await verify(SCOPE, hs256(orcid=junk))
        assert (subject, subject.orcid) == ("reader-1", None), junk
    assert (await verify(SCOPE, hs256())).orcid is None


async def test_the_orcid_claim_is_named_by_the_settings_and_never_read_from_a_token_that_fails() -> None:
    # ORCID's own sign-in: the iD is the token's subject.
    by_sub = JwtAuthenticator(secret=SECRET, orcid_claim="sub")
    assert (await by_sub(SCOPE, hs256("0000-0002-1825-0097"))).orcid == "0000-0002-1825-0097"
    namespaced = JwtAuthenticator(secret=SECRET, orcid_claim="https://wovepaper.org/orcid")
    token = hs256(**{"https://wovepaper.org/orcid": "0000-0001-1111-1111", "orcid": "0000-0002-2222-2222"})
    assert (await namespaced(SCOPE, token)).orcid == "0000-0001-1111-1111"
    assert (await JwtAuthenticator(secret=SECRET, orcid_claim="")(SCOPE, token)).orcid is None
    forged = hs256(orcid="0000-0002-1825-0097", secret=OTHER_SECRET)
    assert (await refused(hs_verifier(), forged)).status == 401


def _in(seconds: int) -> int:
    return int(time.time()) + seconds


# Tokens are made when the test runs (not when it is collected): their times are relative to now.
@pytest.mark.parametrize(
    ("make", "says"),
    [
        (lambda: hs256(exp=_in(-LEEWAY_S - 60)), "has expired"),
        (lambda: hs256(nbf=_in(LEEWAY_S + 60)), "not valid yet"),
        (lambda: hs256(iat=_in(LEEWAY_S + 60)), "not valid yet"),
        (lambda: hs256(secret=OTHER_SECRET), "bad signature"),
        (lambda: hs256(None), "no `sub` claim"),
        (lambda: hs256(exp=None), "no `exp` claim"),
        (lambda: hs256(""), "`sub` must be"),
        (lambda: hs256("a" * 256), "`sub` must be"),
        (lambda: hs256("tab\there"), "`sub` must be"),
        (lambda: "not.a.jwt", "malformed"),
        (lambda: "abc", "malformed"),
    ],
)
async def test_each_bad_token_is_a_401_that_says_why(make: Callable[[], str], says: str) -> None:
    error = await refused(hs_verifier(), make())
    assert (error.status, error.code) == (401, "UNAUTHENTICATED")
    assert says in error.message


async def test_clock_skew_within_the_leeway_is_accepted() -> None:
    now = int(time.time())
    token = hs256(exp=now - LEEWAY_S // 2, nbf=now + LEEWAY_S // 2, iat=now + LEEWAY_S // 2)
    assert await hs_verifier()(SCOPE, token) == "reader-1"


async def test_issuer_and_audience_are_checked_when_set() -> None:
    verify = hs_verifier(issuer="https://www.wovepaper.com", audience="wovepaper-api")
    good = hs256(iss="https://www.wovepaper.com", aud="wovepaper-api")
    assert await verify(SCOPE, good) == "reader-1"
    assert "wrong audience" in (await refused(verify, hs256(iss="https://www.wovepaper.com", aud="other"))).message
    assert "no `aud` claim" in (await refused(verify, hs256(iss="https://www.wovepaper.com"))).message
    assert "wrong issuer" in (await refused(verify, hs256(iss="https://evil.example", aud="wovepaper-api"))).message


async def test_unsigned_and_unexpected_algorithms_are_refused() -> None:
    unsigned = jwt.encode({"sub": "x", "exp": int(time.time()) + 60}, None, algorithm="none")
    assert "'none' is not accepted" in (await refused(hs_verifier(), unsigned)).message
    hs512 = jwt.encode({"sub": "x", "exp": int(time.time()) + 60}, SECRET * 2, algorithm="HS512")
    assert "'HS512' is not accepted" in (await refused(hs_verifier(), hs512)).message


async def test_a_public_key_never_serves_as_an_hmac_secret() -> None:
    # The classic confusion: an HS256 token "signed" with the RSA public key, which attackers can read.
    pem = RSA.private.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    now = int(time.time())
    forged = _hs256_with_raw_key(pem, {"sub": "admin", "exp": now + 60})
    jwks_only = JwtAuthenticator(keys=KeySet(FakeJwks(jwks(RSA))))
    error = await refused(jwks_only, forged)
    assert "HS256 tokens are not accepted: WOVEPAPER_JWT_SECRET is not set" in error.message
    both = JwtAuthenticator(secret=SECRET, keys=KeySet(FakeJwks(jwks(RSA))))
    assert "bad signature" in (await refused(both, forged)).message


def _hs256_with_raw_key(key: bytes, payload: dict[str, Any]) -> str:
    """HMAC-SHA256 over the token by hand: PyJWT itself refuses a PEM as an HMAC key."""

    def b64(data: bytes) -> str:
        return base64.urlsafe_b64encode(data).decode().rstrip("=")

    signing_input = b64(orjson.dumps({"alg": "HS256", "typ": "JWT"})) + "." + b64(orjson.dumps(payload))
    signature = hmac.new(key, signing_input.encode(), hashlib.sha256).digest()
    return signing_input + "." + b64(signature)


async def test_rs256_and_es256_tokens_verify_with_their_jwks_keys() -> None:
    verify = JwtAuthenticator(keys=KeySet(FakeJwks(jwks(RSA, EC))))
    assert await verify(SCOPE, RSA.token("r")) == "r"
    assert await verify(SCOPE, EC.token("e")) == "e"
    mislabelled = RSA.token("x", kid=EC.kid)  # an RS256 token naming the EC key
    assert "signs ES256, not RS256" in (await refused(verify, mislabelled)).message
    no_keys = await refused(hs_verifier(), RSA.token())
    assert "neither WOVEPAPER_JWKS_URL nor WOVEPAPER_JWKS_FILE is set" in no_keys.message


@pytest.mark.parametrize("algorithm", ["RS384", "RS512", "PS256", "PS512", "ES384", "ES512", "EdDSA"])
@pytest.mark.parametrize("declare", [True, False], ids=["alg-named", "alg-left-out"])
async def test_every_asymmetric_algorithm_of_the_providers_verifies(algorithm: str, declare: bool) -> None:
    # EdDSA: Better Auth's default; PS256: Auth0's option; ES384 and RS512: Keycloak's. A JWK may leave `alg` out.
    pair = KeyPair(f"k-{algorithm}", algorithm=algorithm, declare=declare)
    verify = JwtAuthenticator(keys=KeySet(FakeJwks(jwks(pair, RSA))))
    assert await verify(SCOPE, pair.token("r")) == "r"
    assert algorithm in verify.algorithms()


async def test_a_key_signs_only_the_algorithms_of_its_kind() -> None:
    rsa_any = KeyPair("rsa-any", declare=False)
    verify = JwtAuthenticator(keys=KeySet(FakeJwks(jwks(rsa_any, RSA, EC))))
    # An RSA key without `alg` signs any RSA algorithm; one that names its `alg` signs that one only.
    assert await verify(SCOPE, rsa_any.token("r", algorithm="PS384")) == "r"
    named = await refused(verify, RSA.token("x", algorithm="RS512"))
    assert "signs RS256, not RS512" in named.message
    # An EC P-256 key signs ES256 only: a token naming it with ES384 is refused before any verification.
    p384 = KeyPair("ec-384", algorithm="ES384")
    mislabelled = p384.token("x", kid=EC.kid)
    assert "signs ES256, not ES384" in (await refused(verify, mislabelled)).message


async def test_an_unknown_kid_refetches_the_keys_once_per_window() -> None:
    source = FakeJwks(jwks(RSA))
    clock = Clock()
    keys = KeySet(source, clock=clock)
    verify = JwtAuthenticator(keys=keys)
    assert await verify(SCOPE, RSA.token()) == "reader-1"
    assert source.fetches == 1
    # The issuer rotates: its new key is published, and a token signed with it arrives.
    source.document = jwks(RSA, RSA_NEXT)
    clock.now += MIN_REFRESH_S + 1
    assert await verify(SCOPE, RSA_NEXT.token("rotated")) == "rotated"
    assert source.fetches == 2
    # Made-up kids within the window: refused, and the key server is not asked again.
    for n in range(5):
        error = await refused(verify, RSA.token(kid=f"made-up-{n}"))
        assert "unknown key" in error.message
    assert source.fetches == 2
    clock.now += MIN_REFRESH_S + 1
    await refused(verify, RSA.token(kid="made-up-again"))
    assert source.fetches == 3
    # Keys already held keep working meanwhile.
    assert await verify(SCOPE, RSA.token("still")) == "still"


async def test_concurrent_unknown_kids_share_one_fetch() -> None:
    source = FakeJwks(jwks(RSA))
    clock = Clock()
    verify = JwtAuthenticator(keys=KeySet(source, clock=clock))
    await verify(SCOPE, RSA.token())
    source.document = jwks(RSA, RSA_NEXT)
    clock.now += MIN_REFRESH_S + 1
    results = await asyncio.gather(*(verify(SCOPE, RSA_NEXT.token(f"r{n}")) for n in range(5)))
    assert results == [f"r{n}" for n in range(5)]
    assert source.fetches == 2


async def test_keys_older_than_their_max_age_are_refetched() -> None:
    source = FakeJwks(jwks(RSA))
    clock = Clock()
    verify = JwtAuthenticator(keys=KeySet(source, max_age_s=600, clock=clock))
    await verify(SCOPE, RSA.token())
    clock.now += 601
    source.document = jwks(RSA_NEXT)  # the old key is withdrawn
    assert "unknown key" in (await refused(verify, RSA.token())).message
    assert await verify(SCOPE, RSA_NEXT.token("new")) == "new"


async def test_unreachable_keys_are_a_503_and_retried_only_after_the_window() -> None:
    source = FakeJwks(None)
    clock = Clock()
    verify = JwtAuthenticator(keys=KeySet(source, clock=clock))
    for _ in range(3):
        error = await refused(verify, RSA.token())
        assert (error.status, error.code) == (503, "AUTH_UNAVAILABLE")
    assert source.fetches == 1
    source.document = jwks(RSA)
    clock.now += MIN_REFRESH_S + 1
    assert await verify(SCOPE, RSA.token()) == "reader-1"


async def test_without_any_jwt_setting_bearer_tokens_are_refused_naming_the_settings() -> None:
    verify = build_bearer_authenticator(secret=None, jwks_url=None, jwks_file=None)
    error = await refused(verify, hs256())
    assert error.status == 401
    for name in ("WOVEPAPER_JWT_SECRET", "WOVEPAPER_JWKS_URL", "WOVEPAPER_JWKS_FILE"):
        assert name in error.message


ALL_ALGORITHMS = ["HS256", "RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA"]


@pytest.mark.parametrize("algorithm", ALL_ALGORITHMS)
async def test_a_token_naming_an_audience_is_refused_when_no_audience_is_set(algorithm: str) -> None:
    """A token minted for another service (its `aud`) must not sign a reader in here: with WOVEPAPER_JWT_AUDIENCE
    unset only tokens without `aud` are accepted, whatever the algorithm."""
    if algorithm == "HS256":
        verify = hs_verifier()
        with_audience, without = hs256(aud="another-service"), hs256()
        listed = hs256(aud=["another-service", "wovepaper-api"])
    else:
        pair = KeyPair(f"aud-{algorithm}", algorithm=algorithm)
        verify = JwtAuthenticator(keys=KeySet(FakeJwks(jwks(pair))))
        with_audience, without = pair.token(aud="another-service"), pair.token()
        listed = pair.token(aud=["another-service", "wovepaper-api"])
    assert await verify(SCOPE, without) == "reader-1"
    for token in (with_audience, listed):
        error = await refused(verify, token)
        assert (error.status, error.code) == (401, "UNAUTHENTICATED")
        assert "WOVEPAPER_JWT_AUDIENCE" in error.message and "None" not in error.message


async def test_what_a_refusal_echoes_of_the_token_is_bounded() -> None:
    """A 30 KB `kid` (or `alg`) is not sent back whole: the answer names a bounded prefix of it."""
    verify = JwtAuthenticator(secret=SECRET, keys=KeySet(FakeJwks(jwks(RSA))))
    long_kid = "k" * 30_000
    unknown = await refused(verify, RSA.token(kid=long_kid))
    assert "unknown key" in unknown.message and len(unknown.message) < 300
    assert len(unknown.body()) < 500
    header = base64.urlsafe_b64encode(orjson.dumps({"alg": "X" * 30_000, "typ": "JWT"})).decode().rstrip("=")
    odd_algorithm = await refused(verify, f"{header}.e30.c2ln")
    assert "is not accepted" in odd_algorithm.message and len(odd_algorithm.message) < 400
