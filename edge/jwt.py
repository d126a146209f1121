"""The site's bearer tokens: JWTs verified with PyJWT, the subject is the viewer.

HS256 with a shared secret, and the asymmetric algorithms identity providers sign with (the RSA ones, ES256/384/512,
EdDSA) with public keys from a JWKS: a URL (fetched with httpx, cached, fetched again when it is old or a token names
a key it lacks, at most once per `MIN_REFRESH_S`) or a file (read again when a token names a key it lacks, as
often). Each token is checked with the one algorithm its header names and the key that algorithm calls for, so a
public key can never serve as an HMAC secret, and a key signs only the algorithms of its kind (only its `alg` when
the JWK names one). `exp` and `sub` are required; `exp`, `nbf` and `iat` get `LEEWAY_S` of clock skew. `aud` must be
the configured audience, and without one a token naming any audience is refused (it was minted for another service).
What a refusal repeats of a token (its `kid`, its `alg`) is cut to `ECHOED_CHARS`.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import jwt
import orjson
from starlette.types import Scope

from db.ids import normalize_orcid
from edge.errors import EdgeError
from request_types.identity import Subject

log = logging.getLogger(__name__)

LEEWAY_S = 30
MAX_SUBJECT_LENGTH = 255
# The reader's ORCID iD is read from this claim of a token that verified (WOVEPAPER_JWT_ORCID_CLAIM).
DEFAULT_ORCID_CLAIM = "orcid"
MAX_ORCID_LENGTH = 64
# Keys are refetched when older than this, and (for an unknown `kid`) at most once per MIN_REFRESH_S.
JWKS_MAX_AGE_S = 600.0
MIN_REFRESH_S = 30.0
JWKS_TIMEOUT_S = 5.0
MAX_JWKS_BYTES = 1_000_000
_RSA = ("RS256", "RS384", "RS512", "PS256", "PS384", "PS512")
# What a key of each kind (`kty`, and `crv` for curves) may sign with.
KEY_ALGORITHMS: dict[tuple[str, str | None], tuple[str, ...]] = {
    ("RSA", None): _RSA,
    ("EC", "P-256"): ("ES256",),
    ("EC", "P-384"): ("ES384",),
    ("EC", "P-521"): ("ES512",),
    ("OKP", "Ed25519"): ("EdDSA",),
    ("OKP", "Ed448"): ("EdDSA",),
}
JWKS_ALGORITHMS = (*_RSA, "ES256", "ES384", "ES512", "EdDSA")
SETTINGS_NAMES = "WOVEPAPER_JWT_SECRET, WOVEPAPER_JWKS_URL or WOVEPAPER_JWKS_FILE"
# Most characters of a token's own values (`kid`, `alg`) a refusal repeats: a 30 KB `kid` is not answered whole.
ECHOED_CHARS = 64


class KeysUnavailable(Exception):
    """No key set could be loaded (the JWKS URL did not answer, or answered no usable keys)."""


def _unauthenticated(message: str) -> EdgeError:
    return EdgeError(401, "UNAUTHENTICATED", message, headers={"www-authenticate": 'Bearer error="invalid_token"'})


@dataclass(frozen=True, slots=True)
class SigningKey:
    key: Any  # the public key, as PyJWT verifies with it
    algorithms: tuple[str, ...]  # what it may sign with


def _signing_key(jwk: object) -> tuple[str | None, SigningKey] | None:
    """A JWK's `kid` and key, when it is a public signing key of a kind we verify (else None: skipped)."""
    if not isinstance(jwk, dict) or jwk.get("use") not in (None, "sig"):
        return None
    kind, curve = str(jwk.get("kty")), jwk.get("crv")
    algorithms = KEY_ALGORITHMS.get((kind, None if kind == "RSA" else str(curve)), ())
    named = jwk.get("alg")
    if named is not None:
        algorithms = (named,) if named in algorithms else ()
    if not algorithms:
        return None
    try:
        parsed = jwt.PyJWK(jwk, algorithms[0])
    except jwt.PyJWTError:
        return None
    kid = jwk.get("kid")
    return (kid if isinstance(kid, str) else None), SigningKey(parsed.key, algorithms)


def parse_jwks(data: bytes) -> dict[str | None, SigningKey]:
    """The signing keys of a JWK Set document, by `kid`; KeysUnavailable when it has none."""
    try:
        document = orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        raise KeysUnavailable(f"not a JWK Set: {exc}") from exc
    keys = document.get("keys") if isinstance(document, dict) else None
    if not isinstance(keys, list):
        raise KeysUnavailable("not a JWK Set: no `keys` list")
    usable = dict(key for key in map(_signing_key, keys) if key is not None)
    if not usable:
        raise KeysUnavailable(f"the JWK Set holds no signing key of {', '.join(JWKS_ALGORITHMS)}")
    return usable


class KeySet:
    """Public keys by `kid`, loaded by `fetch` and kept. Loaded again when older than `max_age_s` or when a token
    names a key the set lacks, but never twice within `min_refresh_s`, failed loads included: a flood of tokens
    with made-up `kid`s costs the key server one request per window. Concurrent loads are one load."""

    def __init__(
        self,
        fetch: Callable[[], Awaitable[bytes]],
        *,
        max_age_s: float = JWKS_MAX_AGE_S,
        min_refresh_s: float = MIN_REFRESH_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._fetch = fetch
        self._max_age_s = max_age_s
        self._min_refresh_s = min_refresh_s
        self._clock = clock
        self._keys: dict[str | None, SigningKey] = {}
        self._loaded_at = float("-inf")
        self._attempted_at = float("-inf")
        self._lock = asyncio.Lock()
        self.fetches = 0

    @property
    def loaded(self) -> bool:
        return bool(self._keys)

    async def get(self, kid: str | None) -> SigningKey | None:
        """The key named `kid` (no `kid`: the only key, when the set has one), or None."""
        if not self._keys or self._clock() - self._loaded_at > self._max_age_s:
            await self._load()
        key = self._find(kid)
        if key is None and self._keys:
            await self._load()
            key = self._find(kid)
        return key

    def _find(self, kid: str | None) -> SigningKey | None:
        if kid is None:
            return next(iter(self._keys.values())) if len(self._keys) == 1 else None
        return self._keys.get(kid)

    async def _load(self) -> None:
        attempted = self._attempted_at
        async with self._lock:
            if self._attempted_at != attempted:
                return  # loaded (or tried) by another request while this one waited
            now = self._clock()
            if now - self._attempted_at < self._min_refresh_s:
                return
            self._attempted_at = now
            self.fetches += 1
            try:
                self._keys = parse_jwks(await self._fetch())
                self._loaded_at = now
            except KeysUnavailable as exc:
                # The keys already held keep verifying tokens; with none, requests get a 503 until a load succeeds.
                log.warning("JWKS not loaded: %s", exc)


def url_fetcher(url: str, client: httpx.AsyncClient) -> Callable[[], Awaitable[bytes]]:
    async def fetch() -> bytes:
        try:
            response = await client.get(url, headers={"accept": "application/json"})
        except httpx.HTTPError as exc:
            raise KeysUnavailable(f"{url}: {type(exc).__name__}") from exc
        if response.status_code != 200:
            raise KeysUnavailable(f"{url}: HTTP {response.status_code}")
        if len(response.content) > MAX_JWKS_BYTES:
            raise KeysUnavailable(f"{url}: larger than {MAX_JWKS_BYTES} bytes")
        return response.content

    return fetch


def file_fetcher(path: Path) -> Callable[[], Awaitable[bytes]]:
    async def fetch() -> bytes:
        try:
            return await asyncio.to_thread(path.read_bytes)
        except OSError as exc:
            raise KeysUnavailable(f"{path}: {exc.strerror}") from exc

    return fetch


@dataclass(frozen=True, slots=True)
class Claims:
    issuer: str | None = None
    audience: str | None = None


class JwtAuthenticator:
    """The bearer authenticator of edge/identity.py: a verified token's `sub` and ORCID iD, or EdgeError 401."""

    def __init__(
        self,
        *,
        secret: str | None = None,
        keys: KeySet | None = None,
        claims: Claims = Claims(),
        client: httpx.AsyncClient | None = None,
        orcid_claim: str | None = DEFAULT_ORCID_CLAIM,
    ) -> None:
        self._secret = secret
        self._keys = keys
        self._claims = claims
        self._client = client
        self._orcid_claim = orcid_claim or None

    async def __call__(self, scope: Scope, token: str) -> Subject:
        try:
            header = jwt.get_unverified_header(token)
        except jwt.PyJWTError:
            raise _unauthenticated("The bearer token is malformed: not a JWT.") from None
        algorithm = header.get("alg")
        key = await self._key(algorithm, header.get("kid"))
        claims = self._claims
        try:
            payload: dict[str, Any] = jwt.decode(
                token,
                key,
                algorithms=[str(algorithm)],
                issuer=claims.issuer,
                audience=claims.audience,
                leeway=LEEWAY_S,
                # Verified even without a configured audience: PyJWT then refuses any token that names one.
                options={"require": ["exp", "sub"], "verify_aud": True},
            )
        except jwt.PyJWTError as exc:
            raise _unauthenticated(_reason(exc, claims)) from None
        subject = _subject(payload.get("sub"))
        return Subject(subject, _orcid(payload.get(self._orcid_claim)) if self._orcid_claim else None)

    async def _key(self, algorithm: object, kid: object) -> Any:
        if algorithm == "HS256":
            if self._secret is None:
                raise _unauthenticated("HS256 tokens are not accepted: WOVEPAPER_JWT_SECRET is not set.")
            return self._secret
        if algorithm in JWKS_ALGORITHMS:
            if self._keys is None:
                raise _unauthenticated(
                    f"{algorithm} tokens are not accepted: neither WOVEPAPER_JWKS_URL nor WOVEPAPER_JWKS_FILE is set."
                )
            if kid is not None and not isinstance(kid, str):
                raise _unauthenticated("The token's `kid` is not a string.")
            jwk = await self._keys.get(kid)
            if jwk is None and not self._keys.loaded:
                raise EdgeError(503, "AUTH_UNAVAILABLE", "The signing keys (JWKS) cannot be loaded; retry later.")
            if jwk is None:
                named = f"`kid` {_echoed(kid)}" if kid is not None else "no `kid`"
                raise _unauthenticated(f"The token is signed with an unknown key ({named}).")
            if algorithm not in jwk.algorithms:
                signs = "/".join(jwk.algorithms)
                raise _unauthenticated(f"The token's key {_echoed(kid)} signs {signs}, not {algorithm}.")
            return jwk.key
        accepted = ", ".join(self.algorithms())
        raise _unauthenticated(f"The token's algorithm {_echoed(algorithm)} is not accepted; accepted: {accepted}.")

    def algorithms(self) -> Sequence[str]:
        return (["HS256"] if self._secret is not None else []) + (list(JWKS_ALGORITHMS) if self._keys else [])

    async def aclose(self) -> None:
        if self._client is not None:
            await self._client.aclose()


def _reason(exc: jwt.PyJWTError, claims: Claims) -> str:
    # Most specific first: InvalidSignatureError is a DecodeError.
    if isinstance(exc, jwt.ExpiredSignatureError):
        return "The bearer token has expired."
    if isinstance(exc, jwt.ImmatureSignatureError):
        return "The bearer token is not valid yet (`nbf` or `iat` is in the future)."
    if isinstance(exc, jwt.InvalidSignatureError):
        return "The bearer token has a bad signature."
    if isinstance(exc, jwt.InvalidAudienceError):
        if claims.audience is None:
            return "The bearer token names an audience (`aud`), and this server takes none (WOVEPAPER_JWT_AUDIENCE)."
        return f"The bearer token has the wrong audience: expected {claims.audience!r}."
    if isinstance(exc, jwt.InvalidIssuerError):
        return f"The bearer token has the wrong issuer: expected {claims.issuer!r}."
    if isinstance(exc, jwt.MissingRequiredClaimError):
        return f"The bearer token has no `{exc.claim}` claim."
    if isinstance(exc, jwt.DecodeError):
        return "The bearer token is malformed."
    return f"The bearer token is invalid: {_echoed(str(exc))}."


def _echoed(value: object) -> str:
    """`value` as a refusal repeats it: its repr, cut to ECHOED_CHARS characters."""
    shown = repr(value)
    return shown if len(shown) <= ECHOED_CHARS else shown[:ECHOED_CHARS] + f"... ({len(shown)} characters)"


def _subject(sub: object) -> str:
    if not isinstance(sub, str) or not sub or len(sub) > MAX_SUBJECT_LENGTH or not sub.isprintable():
        raise _unauthenticated(f"The bearer token's `sub` must be 1 to {MAX_SUBJECT_LENGTH} printable characters.")
    return sub


def _orcid(value: object) -> str | None:
    """An ORCID iD (bare or as its https://orcid.org/ URL); anything else in the claim is no ORCID iD (the token
    still signs the reader in)."""
    return normalize_orcid(value) if isinstance(value, str) and len(value) <= MAX_ORCID_LENGTH else None


async def refuse_bearer(scope: Scope, token: str) -> str:
    raise EdgeError(
        401, "UNAUTHENTICATED", f"Bearer tokens are not accepted: this server has none of {SETTINGS_NAMES} set."
    )


def build_bearer_authenticator(
    *,
    secret: str | None,
    jwks_url: str | None,
    jwks_file: str | None,
    issuer: str | None = None,
    audience: str | None = None,
    orcid_claim: str | None = DEFAULT_ORCID_CLAIM,
) -> JwtAuthenticator | Callable[[Scope, str], Awaitable[str]]:
    """The authenticator the settings call for; without any of them, one that refuses every token saying so."""
    if secret is None and jwks_url is None and jwks_file is None:
        return refuse_bearer
    client = None
    keys = None
    if jwks_url is not None:
        client = httpx.AsyncClient(timeout=JWKS_TIMEOUT_S, follow_redirects=False)
        keys = KeySet(url_fetcher(jwks_url, client))
    elif jwks_file is not None:
        keys = KeySet(file_fetcher(Path(jwks_file)), max_age_s=float("inf"))
    return JwtAuthenticator(
        secret=secret, keys=keys, claims=Claims(issuer, audience), client=client, orcid_claim=orcid_claim
    )
