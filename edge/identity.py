"""Who is asking: resolved once per request by the edge (edge/front.py) and carried in the request's state
(request_types/state.py, `identity`), as the `Identity` of request_types/identity.py.

A request is anonymous, keyed (a partner's or the site server's `X-Api-Key`) or a signed-in viewer
(the site's `Authorization: Bearer <JWT>`); both can hold at once (the site's server, its key, a reader's
token). The client address is the peer's, or the first untrusted hop of `X-Forwarded-For` when the
peer is a trusted proxy.
"""

from __future__ import annotations

import functools
import ipaddress
from collections.abc import Awaitable, Callable, Iterable

from starlette.types import Scope

from edge.errors import EdgeError
from edge.request import headers_of
from request_types.identity import ApiKey, Identity, Network, Subject

# The headers that present a credential.
CREDENTIALS = frozenset({b"x-api-key", b"authorization"})
# Anonymous identities kept for reuse (forgotten all at once when full), each once its request was answered.
ANONYMOUS_KEPT = 10_000
# The longest text of an IP address, with an IPv6 zone (`fe80::1%eth0`) at its longest.
MAX_ADDRESS_LENGTH = 64

# Each takes the header's value and answers the identity part, or raises EdgeError (HTTP 401). A bearer
# authenticator answers the reader's id (a Subject when it knows their ORCID iD too).
KeyAuthenticator = Callable[[Scope, str], Awaitable[ApiKey]]
BearerAuthenticator = Callable[[Scope, str], Awaitable[str]]


def client_ip(scope: Scope, trusted: frozenset[Network]) -> str:
    """The peer, unless it is a trusted proxy: then the nearest X-Forwarded-For hop that is not one."""
    client = scope.get("client")
    peer = client[0] if client else "unknown"
    if not trusted or not _is_trusted(peer, trusted):
        return peer
    hops: list[str] = []
    for name, value in scope.get("headers", ()):
        if name == b"x-forwarded-for":
            hops += [h.strip() for h in value.decode("latin-1").split(",") if h.strip()]
    for hop in reversed(hops):
        if not _is_trusted(hop, trusted):
            return hop if _valid_ip(hop) else peer
    return hops[0] if hops and _valid_ip(hops[0]) else peer


def _valid_ip(value: str) -> bool:
    return len(value) <= MAX_ADDRESS_LENGTH and _parses(value)


def _is_trusted(address: str, trusted: frozenset[Network]) -> bool:
    return len(address) <= MAX_ADDRESS_LENGTH and _in_networks(address, trusted)


# Addresses parsed lately (the same readers come back): parsing one costs more than the rest of the check. Only
# what may be an address is looked up here (an X-Forwarded-For hop is whatever a client wrote), so the memos hold
# at most 16,384 short strings each, whatever clients send.
@functools.lru_cache(maxsize=16_384)
def _parses(value: str) -> bool:
    try:
        ipaddress.ip_address(value)
    except ValueError:
        return False
    return True


@functools.lru_cache(maxsize=16_384)
def _in_networks(address: str, trusted: frozenset[Network]) -> bool:
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return False
    return any(ip in net for net in trusted)


def _header(scope: Scope, wanted: bytes) -> str | None:
    for name, value in scope.get("headers", ()):
        if name == wanted:
            return str(value.decode("latin-1"))
    return None


class Identifier:
    """Who is asking; a presented credential that does not verify is an EdgeError (HTTP 401)."""

    def __init__(
        self,
        *,
        trusted_proxies: Iterable[Network] = (),
        key_authenticator: KeyAuthenticator | None = None,
        bearer_authenticator: BearerAuthenticator | None = None,
    ) -> None:
        self.trusted_proxies = frozenset(trusted_proxies)
        self.key_authenticator = key_authenticator
        self.bearer_authenticator = bearer_authenticator
        # The anonymous identities of recent clients (an Identity is immutable: one per address serves them all).
        self._anonymous: dict[str, Identity] = {}

    def anonymous(self, scope: Scope) -> Identity | None:
        """The identity of a request that presents no credential (nothing to verify); None if it presents one."""
        if not CREDENTIALS.isdisjoint(headers_of(scope)):
            return None
        ip = client_ip(scope, self.trusted_proxies)
        identity = self._anonymous.get(ip)
        return identity if identity is not None else Identity(client_ip=ip)

    def keep(self, identity: Identity) -> None:
        """Keeps an anonymous identity for the next requests of its address, once a request of it was answered (a
        refused one leaves nothing)."""
        if identity.anonymous and identity.client_ip not in self._anonymous:
            if len(self._anonymous) >= ANONYMOUS_KEPT:
                self._anonymous.clear()
            self._anonymous[identity.client_ip] = identity

    async def identify(self, scope: Scope) -> Identity:
        ip = client_ip(scope, self.trusted_proxies)
        api_key = None
        viewer_id = None
        orcid = None
        key = _header(scope, b"x-api-key")
        if key is not None:
            if self.key_authenticator is None:
                raise EdgeError(401, "UNAUTHENTICATED", "API keys are not accepted by this server.")
            api_key = await self.key_authenticator(scope, key)
        authorization = _header(scope, b"authorization")
        if authorization is not None:
            scheme, _, token = authorization.partition(" ")
            if scheme.lower() != "bearer" or not token.strip():
                raise EdgeError(401, "UNAUTHENTICATED", "Authorization must be 'Bearer <token>'.")
            if self.bearer_authenticator is None:
                raise EdgeError(401, "UNAUTHENTICATED", "Bearer tokens are not accepted by this server.")
            verified = await self.bearer_authenticator(scope, token.strip())
            viewer_id = str(verified)
            orcid = verified.orcid if isinstance(verified, Subject) else None
        return Identity(client_ip=ip, viewer_id=viewer_id, api_key=api_key, viewer_orcid=orcid)
