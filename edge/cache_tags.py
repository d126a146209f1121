"""What a cached answer is tagged with (every entity in it, the lists, the ids a look-up did not find), so that the
write that changes one drops it, and what a CDN is told to hold it by (edge/response_cache.py caches it).

An entity the answer shows in full is tagged `researcher:7`; one it shows only by what names it (a paper's authors:
edge/cacheable.py NAMED_IN) is tagged `name:researcher:7`, which a write changing only its figures keeps."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from db.cache import keys
from db.cache.store import EntityRef
from db.paging import TokenError, decode_global_id
from edge.answers import Header
from edge.cacheable import NAMED, CacheableOperation, Lookup, NamedPaths
from edge.entity_keys import database_id, paper_key

GLOBAL_ID_KINDS = {"Paper": "paper", "Researcher": "researcher", "Institution": "institution"}
MAX_TAGS = 2000
# The most of a tag header Fastly (Surrogate-Key) and Cloudflare (Cache-Tag) read.
CDN_TAG_BYTES: Final = 16_384
# A public answer's representation depends on the request's Accept (edge/media.py).
VARY_ACCEPT: Final = (b"vary", b"Accept")


def entity_refs(data: object, named: NamedPaths | None = None) -> tuple[set[EntityRef], set[EntityRef]]:
    """Every paper, researcher and institution in a response, found by its global `id`: those shown in full, and
    those shown only where `named` (the operation's places naming entities only) leads."""
    full: set[EntityRef] = set()
    names: set[EntityRef] = set()
    stack: list[tuple[object, NamedPaths | bool | None]] = [(data, named)]
    while stack:
        item, here = stack.pop()
        if isinstance(item, dict):
            for k, v in item.items():
                if k == "id" and isinstance(v, str):
                    ref = _ref(v)
                    if ref is not None:
                        (names if here is NAMED else full).add(ref)
                elif isinstance(v, dict | list):
                    stack.append((v, here.get(k) if isinstance(here, Mapping) else here))
        elif isinstance(item, list):
            stack.extend((x, here) for x in item if isinstance(x, dict | list))
    return full, names - full


def _ref(global_id: str) -> EntityRef | None:
    try:
        type_name, db_id = decode_global_id(global_id)
    except (TokenError, ValueError):
        return None
    kind = GLOBAL_ID_KINDS.get(type_name)
    return EntityRef(kind, db_id) if kind is not None else None


def miss_tag(lookup: Lookup, requested: object) -> str | None:
    """The tag of a lookup that found nothing: the id it asked for, as the write creating it will name it."""
    if not isinstance(requested, str):
        return None
    if lookup.kind == "paper":
        arxiv_id = paper_key(requested)
        return keys.missing_name("paper", arxiv_id) if arxiv_id else None
    db_id = database_id(requested)
    if db_id is not None:
        return keys.entity_name(lookup.kind, db_id)
    # An external id (S2, OpenAlex, ORCID, ROR, a name): any write of that kind may create it.
    return keys.missing_name(lookup.kind, "any")


def graphql_response_etag(etag: bytes) -> bytes:
    """The strong ETag of the `application/graphql-response+json` representation of the answer tagged `etag`."""
    return etag[:-1] + b'+g"'


@dataclass(frozen=True, slots=True)
class CdnPolicy:
    max_age_s: int
    stale_while_revalidate_s: int

    def headers(self, tags: Sequence[str], etag: bytes) -> list[Header]:
        """How long caches may keep a public answer, and the tags a CDN purges it by. Fastly and Cloudflare read
        at most CDN_TAG_BYTES of them and drop the rest unseen: an answer tagged with more could not be purged of a
        change to what comes after, so it is `private` instead (a browser keeps it as long, a CDN not at all)."""
        ages = f"max-age={self.max_age_s}, stale-while-revalidate={self.stale_while_revalidate_s}".encode()
        tag_list = " ".join(tags).encode()
        if len(tag_list) > CDN_TAG_BYTES:
            return [(b"cache-control", b"private, " + ages), (b"etag", etag), VARY_ACCEPT]
        return [
            (b"cache-control", b"public, " + ages),
            (b"etag", etag),
            VARY_ACCEPT,
            (b"surrogate-key", tag_list),
            (b"cache-tag", tag_list.replace(b" ", b",")),
        ]


def response_tags(
    data: Mapping[str, object], operation: CacheableOperation | None, coerced: Mapping[str, object] | None
) -> list[str] | None:
    """The response's tags, as a CDN names them (`researcher:7`, `lists`, `missing:paper:2401.01234`)."""
    full, names = entity_refs(data, operation.named if operation is not None else None)
    if len(full) + len(names) > MAX_TAGS:
        return None  # too broad to invalidate precisely; not worth caching
    tags = [keys.entity_name(r.kind, r.id) for r in sorted(full, key=lambda r: (r.kind, r.id))]
    tags += [keys.identity_name(r.kind, r.id) for r in sorted(names, key=lambda r: (r.kind, r.id))]
    if operation is None or operation.is_list:
        tags.append(keys.LISTS)
    if operation is not None and coerced is not None:
        for lookup in operation.lookups:
            if data.get(lookup.response_key) is None:
                tag = miss_tag(lookup, coerced.get(lookup.variable))
                if tag is None:
                    return None
                tags.append(tag)
    return tags
