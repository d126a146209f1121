"""Who is asking: resolved once per request by the edge (edge/identity.py) and carried in the request's state
(request_types/state.py); the resolvers read it from their context.

A request is anonymous, keyed (a partner's or the site server's `X-Api-Key`) or a signed-in viewer (the site's
`Authorization: Bearer <JWT>`); both can hold at once (the site's server, its key, a reader's token).
"""

from __future__ import annotations

import ipaddress
from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class ApiKey:
    id: int
    name: str
    prefix: str
    points_per_hour: int


class Subject(str):
    """A verified token's subject, the reader's id, carrying the reader's ORCID iD when the token names one (read
    only from a token that verified). A plain string wherever only the reader's id matters."""

    orcid: str | None

    def __new__(cls, subject: str, orcid: str | None = None) -> Subject:
        made = super().__new__(cls, subject)
        made.orcid = orcid
        return made


@dataclass(frozen=True, slots=True)
class Identity:
    client_ip: str
    viewer_id: str | None = None
    api_key: ApiKey | None = None
    # The signed-in reader's verified ORCID iD (0000-0002-1825-0097), when their token names one.
    viewer_orcid: str | None = None

    @property
    def anonymous(self) -> bool:
        return self.viewer_id is None and self.api_key is None

    @property
    def writer(self) -> str | None:
        """Whose writes this request's reads must see: the signed-in reader's, else the API key's (a site server
        calling with its own key and a reader's token writes for the reader)."""
        if self.viewer_id is not None:
            return f"viewer:{self.viewer_id}"
        if self.api_key is not None:
            return f"key:{self.api_key.id}"
        return None


ANONYMOUS_LOCAL = Identity(client_ip="127.0.0.1")

Network = ipaddress.IPv4Network | ipaddress.IPv6Network


def parse_networks(spec: Sequence[str]) -> frozenset[Network]:
    # A frozenset keeps its hash: the trust check below is remembered per address and set of networks, and a
    # tuple of networks would be hashed again, network by network, on every request (2.3 µs against 0.26).
    return frozenset(ipaddress.ip_network(s.strip(), strict=False) for s in spec if s.strip())
