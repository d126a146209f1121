"""Every Redis key the API and the ingest use; no key is spelt anywhere else.

Keys are lowercase and colon-separated, start with the deployment's namespace, and carry a version
that is bumped whenever the shape of the cached value changes, so old entries simply age out.

Every key has a hash tag (`{...}`, right after the namespace or a fixed prefix): Redis Cluster places a key by that
part alone, so keys read or written together by one script share it, and everything else is spread by it. The tag
names what a key belongs to: an entity (`{researcher:7}`: its aggregates, its generation and its tag set), a client
(`{ip:203.0.113.9}`: its rate limit), a response bucket (`{r:3f}`: whole responses and feeds whose digest starts
with `3f`, with that bucket's epoch and lists tag), a persisted document. A new key is built with `_key(ns, tag,
...)` from what it is read or written with; a script only ever touches keys of one tag (db/cache/scripts.py).
"""

from __future__ import annotations

import hashlib
from typing import Final

# Bump when the cached row shape of that aggregate changes.
RESEARCHER_STATS_VERSION = 2
RESEARCHER_COAUTHORS_VERSION = 1
RESEARCHER_NETWORK_VERSION = 1
INSTITUTION_STATS_VERSION = 2
FEED_VERSION = 1

ENTITY_KINDS = ("paper", "researcher", "institution")
# Whole responses and feeds are spread over this many buckets (the first two hex digits of their digest), each with
# its own epoch: a response's store checks its bucket's epoch in the same script that writes it.
RESPONSE_BUCKETS: Final = 256
# The tag of responses of list operations (and feeds), as a CDN sees it.
LISTS: Final = "lists"


def _key(ns: str, tag: str, *parts: str) -> str:
    """`{ns}:{<tag>}:<parts>`: placed on a Cluster by `tag` alone."""
    return ":".join((ns, "{" + tag + "}", *parts))


def hash_tag(key: str) -> str:
    """The part of a key Redis Cluster places it by (the whole key when it has no tag)."""
    start = key.find("{")
    end = key.find("}", start + 1)
    return key[start + 1 : end] if start >= 0 and end > start + 1 else key


def entity_name(kind: str, entity_id: int | str) -> str:
    """An entity as tags name it (`researcher:7`, `paper:2401.01234`): its hash tag and its `Surrogate-Key`."""
    _check_kind(kind)
    return f"{kind}:{entity_id}"


def identity_name(kind: str, entity_id: int | str) -> str:
    """Answers showing an entity only by what names it (`name:researcher:7`: a paper's authors): dropped when its
    name changes (or it goes), not when its figures do."""
    _check_kind(kind)
    return f"name:{kind}:{entity_id}"


def researcher_stats(ns: str, researcher_id: int) -> str:
    return _key(ns, entity_name("researcher", researcher_id), "stats", f"v{RESEARCHER_STATS_VERSION}")


def researcher_coauthors(ns: str, researcher_id: int) -> str:
    return _key(ns, entity_name("researcher", researcher_id), "coauthors", f"v{RESEARCHER_COAUTHORS_VERSION}")


def researcher_network(ns: str, researcher_id: int, *, depth: int, min_shared: int, limit: int) -> str:
    return _key(
        ns,
        entity_name("researcher", researcher_id),
        "network",
        f"d{depth}",
        f"m{min_shared}",
        f"l{limit}",
        f"v{RESEARCHER_NETWORK_VERSION}",
    )


def institution_stats(ns: str, institution_id: int) -> str:
    return _key(ns, entity_name("institution", institution_id), "stats", f"v{INSTITUTION_STATS_VERSION}")


def entity_generation(ns: str, kind: str, entity_id: int | str) -> str:
    """Bumped by every invalidation of the entity: a compute that started before it may not store."""
    return _key(ns, entity_name(kind, entity_id), "gen")


def tag(ns: str, name: str) -> str:
    """The set of every cache key derived from what `name` names (an entity, or a lookup that found nothing)."""
    return _key(ns, name, "tag")


def entity_tag(ns: str, kind: str, entity_id: int | str) -> str:
    """The set of every cache key (aggregate or whole response) derived from this entity: a researcher or an
    institution by database id, a paper by arXiv id (`{ns}:{paper:2401.01234}:tag`). Its entity's aggregates and
    generation share its hash tag."""
    return tag(ns, entity_name(kind, entity_id))


def missing_name(kind: str, key: str) -> str:
    """Responses that found no `kind` under `key` (a normalised arXiv id, `any` for an external id)."""
    _check_kind(kind)
    return f"missing:{kind}:{key}"


def missing_tag(ns: str, kind: str, key: str) -> str:
    """Responses that found no `kind` under `key` (a normalised arXiv id, an external id): dropped when an
    entity of that kind is written, so a paper asked for before it was ingested is found right after."""
    return tag(ns, missing_name(kind, key))


def _bucket(digest: str) -> str:
    return f"r:{digest[:2]}"


def buckets() -> list[str]:
    return [f"r:{i:02x}" for i in range(RESPONSE_BUCKETS)]


def response(ns: str, *, schema_version: str, operation: str, document_hash: str, variables: bytes) -> str:
    """A whole response: operation name, document hash and canonical variables, under the schema version."""
    digest = hashlib.sha256(b"\0".join([operation.encode(), document_hash.encode(), variables])).hexdigest()
    return _key(ns, _bucket(digest), "response", f"s{schema_version}", digest)


def feed(ns: str, *, kind: str, key: str, fmt: str, limit: int, variant: str) -> str:
    """A rendered RSS or Atom feed: which feed, its format and length, and the settings its links come from."""
    parts = [kind, key, fmt, str(limit), variant]
    digest = hashlib.sha256("\0".join(parts).encode()).hexdigest()
    return _key(ns, _bucket(digest), "feed", f"v{FEED_VERSION}", digest)


def response_epoch(ns: str, of_key: str) -> str:
    """The epoch of the bucket of `of_key` (a response or a feed): bumped by every invalidation, so a response
    computed across one may not be stored."""
    return _key(ns, hash_tag(of_key), "epoch")


def dropped_at(tag_key: str) -> str:
    """When the tag set `tag_key` was last dropped (the epoch of the invalidation that dropped it), under its hash
    tag: a response computed across an invalidation is stored if none of its own tags was dropped meanwhile."""
    return f"{tag_key}:dropped"


def response_epochs(ns: str) -> list[str]:
    """Every bucket's epoch: what an invalidation bumps."""
    return [_key(ns, b, "epoch") for b in buckets()]


def lists_tag(ns: str, of_key: str) -> str:
    """Responses of list operations in the bucket of `of_key`: any write may change a list, so any invalidation
    drops them."""
    return _key(ns, hash_tag(of_key), LISTS)


def lists_tags(ns: str) -> list[str]:
    return [_key(ns, b, LISTS) for b in buckets()]


def tag_keys(ns: str, names: list[str], *, of_key: str) -> list[str]:
    """The tag sets a response or feed stored under `of_key` joins, from its tags as a CDN sees them."""
    return [lists_tag(ns, of_key) if name == LISTS else tag(ns, name) for name in names]


def invalidations(ns: str) -> str:
    """The channel every invalidation publishes the tags it dropped on (in-process caches subscribe to it); on a
    Cluster a shard channel, placed like a key of that name."""
    return f"{ns}:invalidations"


def _check_kind(kind: str) -> None:
    if kind not in ENTITY_KINDS:
        raise ValueError(f"unknown entity kind {kind!r}")


def rate_limit(ns: str, subject: str) -> str:
    """A client's rate-limit state (its theoretical arrival time): `key:<id>` or `ip:<address>`."""
    return _key(ns, subject, "ratelimit")


def persisted_query(ns: str, sha256: str) -> str:
    """A document registered through automatic persisted queries, by its sha256."""
    return _key(ns, f"apq:{sha256}", "document")


def persisted_query_index(ns: str) -> str:
    """The registered documents' sha256 by when each was last used: the registry forgets the oldest past its size
    (one key, in its own slot; the documents spread over theirs)."""
    return _key(ns, "apq-index", "index")


def write_position(ns: str, principal: str) -> str:
    """The WAL position of a reader's (or an API key's) latest write: their reads wait for a replica that has it.
    `principal` is `viewer:<sub>` or `key:<id>`; hashed, since a token's subject may be any text (its own slot)."""
    return _key(ns, "wrote:" + hashlib.sha256(principal.encode()).hexdigest()[:32], "position")


def invalidated_position(tag_key: str) -> str:
    """The WAL position of the latest write that dropped this tag (`tag_key` is one of the tag keys above): an
    entry tagged with it may be stored only from a server that has replayed that far. In the tag's slot."""
    return f"{tag_key}:wal"


def strain(ns: str) -> str:
    """Set for a moment by an API process that is strained, renewed while it stays so; the ingest waits while it
    is set (db/cache/strain.py). Its own slot."""
    return _key(ns, "strain", "site")
