"""What a worker remembers of the requests it served, bounded in bytes: parsed documents, their measures, the
response cache's keys.

A bound by count lets clients park what they send in a worker: 300 requests, each with a distinct 900 KB variable,
once grew one by 615 MB through a memo of 20,000 entries. Here each entry is charged what its key and value take,
as the caller counts them, and the least recently used go first once the total passes the bound; an entry larger
than an eighth of the bound is not kept at all. Callers keep an entry only once its request has passed its size,
cost and rate limit (a refused request leaves nothing). What is made per parsed document (statements, walks) is
held weakly and leaves with it (`forget`).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Any, Final, Generic, TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")

# Bytes a small entry takes beyond what its key and value hold: the dict slots, the tuple, the object headers.
ENTRY_OVERHEAD: Final = 200


class BoundedCache(Generic[K, V]):
    """A least-recently-used map holding at most `max_bytes`, as `put`'s callers count them.

    An OrderedDict in recency order (its operations are C): every request of a persisted document reads and keeps
    through here, where a pure-Python LRU cost a small page about 1% of its instructions."""

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self._entries: OrderedDict[K, tuple[V, int]] = OrderedDict()
        self._bytes = 0

    def get(self, key: K) -> V | None:
        entry = self._entries.get(key)
        if entry is None:
            return None
        self._entries.move_to_end(key)
        return entry[0]

    def put(self, key: K, value: V, size: int) -> None:
        """Keeps `value` under `key`, charged `size` bytes plus ENTRY_OVERHEAD (nothing when that is over an eighth
        of the bound: one entry may not push out most of the others)."""
        size += ENTRY_OVERHEAD
        if size > self.max_bytes // 8:
            return
        entries = self._entries
        old = entries.pop(key, None)
        if old is not None:
            self._bytes -= old[1]
        while entries and self._bytes + size > self.max_bytes:
            self._bytes -= entries.popitem(last=False)[1][1]
        entries[key] = (value, size)
        self._bytes += size

    @property
    def bytes(self) -> int:
        """What the entries held are charged, together."""
        return self._bytes

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, key: object) -> bool:
        return key in self._entries


def forget(table: dict[Any, Any], key: object) -> Callable[[object], None]:
    """A weak reference's callback dropping `key`'s entry from `table` with its referent: what is made per parsed
    document lives no longer than the document (the parse cache's bound), not until its table fills."""
    return lambda _: table.pop(key, None)
