"""The media type of a `/graphql` answer, chosen by the request's `Accept` (GraphQL over HTTP, "Body").

`application/graphql-response+json` when the client prefers it (a higher q-value, or named with the same q-value as
`application/json`), else `application/json`: the legacy type, and the answer to no `Accept`, `*/*` or
`application/*`. A request whose `Accept` names neither (`text/xml`) gets `application/json` too: the spec lets a
server disregard an `Accept` it cannot satisfy (RFC 9110 12.5.1) instead of answering 406, and an answer the client
may still read beats a refusal it cannot read either (uptime checks and hand-typed requests send such headers).

The two types differ in status codes only where the spec's do: under the new type a request error (the document
does not parse or validate, no operation to run, variables that do not coerce, a refusal before execution) is a
4xx or 5xx, never a 200; under `application/json` it stays a 200. Bodies are the same under both.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from edge.errors import JSON_TYPE

JSON: Final = JSON_TYPE
GRAPHQL_RESPONSE: Final = b"application/graphql-response+json; charset=utf-8"
_GRAPHQL_RESPONSE_TYPE: Final = b"application/graphql-response+json"
# Accept values of answered requests, and the type each chose (forgotten all at once when full: clients send a
# handful of them). Only short ones, and only once a request was answered: a client sending made-up values, or
# refused ones, adds nothing; at most 1,024 values of 256 bytes are held.
_CHOSEN: dict[bytes, bytes] = {}
_CHOSEN_SIZE: Final = 1024
_CHOSEN_VALUE_BYTES: Final = 256


def negotiate(accept: bytes | None) -> bytes:
    """`JSON` or `GRAPHQL_RESPONSE` (these very objects) for a request with this `Accept`."""
    if not accept:
        return JSON
    chosen = _CHOSEN.get(accept)
    return chosen if chosen is not None else _choose(accept)


def media_of(headers: Mapping[bytes, bytes]) -> bytes:
    """`negotiate` of the `Accept` in a request's headers (by lower-case name), in one call: an answer from memory
    costs about a hundred Python calls in all, each a percent of it."""
    accept = headers.get(b"accept")
    if not accept:
        return JSON
    chosen = _CHOSEN.get(accept)
    return chosen if chosen is not None else _choose(accept)


def remember(headers: Mapping[bytes, bytes]) -> None:
    """Keeps the type the `Accept` of an answered request chose, for the next requests sending the same."""
    accept = headers.get(b"accept")
    if not accept or len(accept) > _CHOSEN_VALUE_BYTES or accept in _CHOSEN:
        return
    if len(_CHOSEN) >= _CHOSEN_SIZE:
        _CHOSEN.clear()
    _CHOSEN[accept] = _choose(accept)


def _choose(accept: bytes) -> bytes:
    # Per type: (q-value, specificity) of the most specific range that names it (RFC 9110 12.5.1): a type named
    # outright (2) overrides `application/*` (1), which overrides `*/*` (0).
    json, graphql = (0.0, -1), (0.0, -1)
    for item in accept.split(b","):
        media, *params = item.split(b";")
        media = media.strip().lower()
        if media == b"*/*":
            specificity = 0
        elif media == b"application/*":
            specificity = 1
        elif media in (JSON, _GRAPHQL_RESPONSE_TYPE):
            specificity = 2
        else:
            continue
        q = _q_value(params)
        if media != _GRAPHQL_RESPONSE_TYPE and specificity > json[1]:
            json = (q, specificity)
        if media != JSON and specificity > graphql[1]:
            graphql = (q, specificity)
    # Equal q-values: the new type when the client names it, else the legacy one (`*/*` alone keeps clients that
    # have never heard of the new type on the type they read).
    if graphql[0] > json[0] or (graphql[0] == json[0] > 0 and graphql[1] == 2):
        return GRAPHQL_RESPONSE
    return JSON


def _q_value(params: list[bytes]) -> float:
    for param in params:
        name, _, value = param.partition(b"=")
        if name.strip().lower() == b"q":
            try:
                q = float(value.strip())
            except ValueError:
                return 0.0
            return q if 0.0 <= q <= 1.0 else 0.0
    return 1.0
