"""Every Redis key the API and the ingest use; no key is spelt anywhere else.

Keys are lowercase and colon-separated, start with the deployment's namespace, and carry a version
that is bumped whenever the shape of the cached value changes, so old entries simply age out.
"""

from __future__ import annotations

import hashlib

# Bump when the cached row shape of that aggregate changes.
RESEARCHER_STATS_VERSION = 2
RESEARCHER_COAUTHORS_VERSION = 1
RESEARCHER_NETWORK_VERSION = 1
INSTITUTION_STATS_VERSION = 2
FEED_VERSION = 1

ENTITY_KINDS = ("paper", "researcher", "institution")


def researcher_stats(ns: str, researcher_id: int) -> str:
    return f"{ns}:researcher:{researcher_id}:stats:v{RESEARCHER_STATS_VERSION}"


def researcher_coauthors(ns: str, researcher_id: int) -> str:
    return f"{ns}:researcher:{researcher_id}:coauthors:v{RESEARCHER_COAUTHORS_VERSION}"


def researcher_network(ns: str, researcher_id: int, *, depth: int, min_shared: int, limit: int) -> str:
    return f"{ns}:researcher:{researcher_id}:network:d{depth}:m{min_shared}:l{limit}:v{RESEARCHER_NETWORK_VERSION}"


def institution_stats(ns: str, institution_id: int) -> str:
    return f"{ns}:institution:{institution_id}:stats:v{INSTITUTION_STATS_VERSION}"


def entity_generation(ns: str, kind: str, entity_id: int | str) -> str:
    """Bumped by every invalidation of the entity: a compute that started before it may not store."""
    _check_kind(kind)
    return f"{ns}:{kind}:{entity_id}:gen"


def entity_tag(ns: str, kind: str, entity_id: int | str) -> str:
    """The set of every cache key (aggregate or whole response) derived from this entity: a researcher or an
    institution by database id, a paper by arXiv id (`{ns}:tag:paper:2401.01234`)."""
    _check_kind(kind)
    return f"{ns}:tag:{kind}:{entity_id}"


def lists_tag(ns: str) -> str:
    """Responses of list operations: any write may change a list, so any invalidation drops them."""
    return f"{ns}:tag:lists"


def response_epoch(ns: str) -> str:
    """Bumped by every invalidation: a response computed across one may not be stored."""
    return f"{ns}:response:epoch"


def invalidations(ns: str) -> str:
    """The channel every invalidation publishes the tags it dropped on (in-process caches subscribe to it)."""
    return f"{ns}:invalidations"


def response(ns: str, *, schema_version: str, operation: str, document_hash: str, variables: bytes) -> str:
    """A whole response: operation name, document hash and canonical variables, under the schema version."""
    digest = hashlib.sha256(b"\0".join([operation.encode(), document_hash.encode(), variables])).hexdigest()
    return f"{ns}:response:s{schema_version}:{digest}"


def feed(ns: str, *, kind: str, key: str, fmt: str, limit: int, variant: str) -> str:
    """A rendered RSS or Atom feed: which feed, its format and length, and the settings its links come from."""
    parts = [kind, key, fmt, str(limit), variant]
    digest = hashlib.sha256("\0".join(parts).encode()).hexdigest()
    return f"{ns}:feed:v{FEED_VERSION}:{digest}"


def _check_kind(kind: str) -> None:
    if kind not in ENTITY_KINDS:
        raise ValueError(f"unknown entity kind {kind!r}")


def rate_limit(ns: str, subject: str) -> str:
    """A client's rate-limit state (its theoretical arrival time): `key:<id>` or `ip:<address>`."""
    return f"{ns}:ratelimit:{subject}"


def persisted_query(ns: str, sha256: str) -> str:
    """A document registered through automatic persisted queries, by its sha256."""
    return f"{ns}:apq:{sha256}"


def persisted_query_count(ns: str) -> str:
    """How many documents were registered in the current window (bounds what clients can store)."""
    return f"{ns}:apq:count"


def missing_tag(ns: str, kind: str, key: str) -> str:
    """Responses that found no `kind` under `key` (a normalised arXiv id, an external id): dropped when an
    entity of that kind is written, so a paper asked for before it was ingested is found right after."""
    _check_kind(kind)
    return f"{ns}:tag:missing:{kind}:{key}"


def write_position(ns: str, principal: str) -> str:
    """The WAL position of a reader's (or an API key's) latest write: their reads wait for a replica that has it.
    `principal` is `viewer:<sub>` or `key:<id>`; hashed, since a token's subject may be any text."""
    return f"{ns}:wrote:{hashlib.sha256(principal.encode()).hexdigest()[:32]}"


def invalidated_position(tag_key: str) -> str:
    """The WAL position of the latest write that dropped this tag (`tag_key` is one of the tag keys above): an
    entry tagged with it may be stored only from a server that has replayed that far."""
    return f"{tag_key}:wal"


def surrogate_key(ns: str, tag_key: str) -> str:
    """A tag as a CDN sees it (`Surrogate-Key`, purges): the tag key without the namespace."""
    return tag_key.removeprefix(f"{ns}:tag:")
