"""One request's state: made by the edge when the request arrives (edge/front.py), carried in the ASGI scope's
state under one key (`KEY`), read and filled by the steps the request passes (persisted documents, the response
cache, GraphQL's view and execution) and reported once the response has been sent (telemetry/requests.py).

The application's own objects (the pool, the caches, the rate limiter) are the lifespan's state, beside it.
"""

from __future__ import annotations

from collections.abc import Mapping, MutableMapping
from dataclasses import dataclass
from typing import Any, Final

from request_types.graphql_request import GraphQLRequest
from request_types.identity import Identity
from request_types.rate import PointsCharge
from request_types.stats import RedisAllowance, RequestStats

KEY: Final = "request"


@dataclass(slots=True)
class RequestState:
    # Echoed in `X-Request-Id`, named in the log line and in masked errors.
    request_id: str = ""
    # Who asks, once the edge has resolved it (a failed authentication: the client address alone).
    identity: Identity | None = None
    # The request's charge on its client's points (edge/ratelimit.py), made by whoever learns the cost.
    rate_charge: PointsCharge | None = None
    # The client address's charge for failed authentications, for a request presenting credentials.
    address_charge: PointsCharge | None = None
    # The request's headers by name, the first value of each (edge/request.py `headers_of`).
    headers: Mapping[bytes, bytes] | None = None
    # The GraphQL request as parsed at the edge, then with its persisted document resolved.
    graphql: GraphQLRequest | None = None
    # The request's bytes as the response cache remembers them (edge/response_cache.py).
    request_bytes: tuple[str, bytes, bytes, bytes] | None = None
    # An automatic persisted query to register once GraphQL admits it (edge/persisted.py).
    registration: object = None
    # One Redis timeout at most for the whole request (db/cache/allowance.py).
    redis: RedisAllowance | None = None
    # SQL and aggregate cache figures of the operation (db/pool.py, db/cache/store.py); None until it runs.
    stats: RequestStats | None = None
    # The operation's outcome: its name, whether it was admitted (parsed, validated, within limits, charged), its
    # errors' codes, the server it read from and how far that server had replayed the primary's WAL (None: primary).
    operation: str | None = None
    admitted: bool = False
    error_codes: list[str] | None = None
    db_target: str | None = None
    replayed: int | None = None


def request_state(scope: MutableMapping[str, Any]) -> RequestState:
    """The request's state, made by the first step that asks for it (the edge, when the request came through it)."""
    state = scope.get("state")
    if state is None:
        state = scope["state"] = {}
    found = state.get(KEY)
    if found is None:
        found = state[KEY] = RequestState()
    return found


def found_state(scope: Mapping[str, Any]) -> RequestState | None:
    """The request's state when one was made (None for a scope no step has seen)."""
    state = scope.get("state")
    return state.get(KEY) if state is not None else None
