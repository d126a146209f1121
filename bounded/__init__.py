"""What a worker remembers of the requests it served, bounded in bytes: parsed documents, their measures, the
response cache's keys.

A bound by count lets clients park what they send in a worker: 300 requests, each with a distinct 900 KB variable,
once grew one by 615 MB through a memo of 20,000 entries. Here each entry is charged what its key and value take,
as the caller counts them, and the least recently used go first once the total passes the bound; an entry larger
than an eighth of the bound is not kept at all. Callers keep an entry only once its request has passed its size,
cost and rate limit (a refused request leaves nothing).
"""

from __future__ import annotations

from collections.abc import Hashable
from operator import itemgetter
from typing import Final, Generic, TypeVar

from cachetools import LRUCache

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")

# Bytes a small entry takes beyond what its key and value hold: the dict slots, the tuple, the object headers.
ENTRY_OVERHEAD: Final = 200
_SIZE = itemgetter(1)


class BoundedCache(Generic[K, V]):
    """A least-recently-used map holding at most `max_bytes`, as `put`'s callers count them."""

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self._entries: LRUCache[K, tuple[V, int]] = LRUCache(maxsize=max_bytes, getsizeof=_SIZE)

    def get(self, key: K) -> V | None:
        entry = self._entries.get(key)
        return None if entry is None else entry[0]

    def put(self, key: K, value: V, size: int) -> None:
        """Keeps `value` under `key`, charged `size` bytes plus ENTRY_OVERHEAD (nothing when that is over an eighth
        of the bound: one entry may not push out most of the others)."""
        size += ENTRY_OVERHEAD
        if size <= self.max_bytes // 8:
            self._entries[key] = (value, size)

    @property
    def bytes(self) -> int:
        """What the entries held are charged, together."""
        return int(self._entries.currsize)

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, key: object) -> bool:
        return key in self._entries
