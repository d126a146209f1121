"""Keys and tokens for tests: an HS256 secret, RSA and EC key pairs, their JWK Set, and tokens signed with them."""

from __future__ import annotations

import json
import time
from typing import Any

import jwt
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa

SECRET = "test-secret-of-at-least-thirty-two-bytes!"
OTHER_SECRET = "another-secret-of-at-least-thirty-two-bytes"


class KeyPair:
    """A private key for signing and its public JWK (with `kid`). `kind`: RSA or EC (P-256), or `algorithm` for any
    other: RS384/RS512/PS256.. (RSA), ES384/ES512 (EC P-384/P-521), EdDSA (Ed25519). `declare`: whether the JWK
    names its `alg` (identity providers often leave it out)."""

    def __init__(self, kid: str, kind: str = "RSA", *, algorithm: str | None = None, declare: bool = True) -> None:
        self.kid = kid
        self.algorithm = algorithm or ("RS256" if kind == "RSA" else "ES256")
        family = self.algorithm[:2]
        if family in ("RS", "PS"):
            self.private: Any = rsa.generate_private_key(public_exponent=65537, key_size=2048)
            jwk = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(self.private.public_key()))
        elif family == "ES":
            curve = {"ES256": ec.SECP256R1(), "ES384": ec.SECP384R1(), "ES512": ec.SECP521R1()}[self.algorithm]
            self.private = ec.generate_private_key(curve)
            jwk = json.loads(jwt.algorithms.ECAlgorithm.to_jwk(self.private.public_key()))
        else:
            self.private = ed25519.Ed25519PrivateKey.generate()
            jwk = json.loads(jwt.algorithms.OKPAlgorithm.to_jwk(self.private.public_key()))
        self.jwk = {**jwk, "kid": kid, "use": "sig"}
        if declare:
            self.jwk["alg"] = self.algorithm

    def token(
        self, sub: str = "reader-1", *, kid: str | None = None, algorithm: str | None = None, **claims: Any
    ) -> str:
        headers = {"kid": kid or self.kid}
        return jwt.encode(_claims(sub, claims), self.private, algorithm=algorithm or self.algorithm, headers=headers)


def jwks(*pairs: KeyPair) -> dict[str, Any]:
    return {"keys": [p.jwk for p in pairs]}


def _claims(sub: str | None, claims: dict[str, Any]) -> dict[str, Any]:
    now = int(time.time())
    payload: dict[str, Any] = {"iat": now, "exp": now + 600}
    if sub is not None:
        payload["sub"] = sub
    payload.update(claims)
    return {k: v for k, v in payload.items() if v is not None}


def hs256(sub: str | None = "reader-1", *, secret: str = SECRET, **claims: Any) -> str:
    """An HS256 token; a claim given as None is left out."""
    return jwt.encode(_claims(sub, claims), secret, algorithm="HS256")


def bearer(token: str) -> dict[str, str]:
    return {"authorization": f"Bearer {token}"}
