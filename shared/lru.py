"""A small typed LRU cache, for the in-process caches: a job's source definition in the parser,
parsed robots.txt policies in the fetcher, rendered pages in the demo shop."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class LRU(Generic[K, V]):
    """At most ``capacity`` entries, or with ``weigh`` at most ``capacity`` of total weight
    (bytes, say); the least recently used go first. Not thread-safe: one event loop's cache."""

    def __init__(self, capacity: int, *, weigh: Callable[[V], int] | None = None) -> None:
        self.capacity = capacity
        self._weigh = weigh
        self._items: OrderedDict[K, V] = OrderedDict()
        self._weight = 0

    def get(self, key: K) -> V | None:
        """The value of ``key`` (now the most recently used), or ``None``."""
        value = self._items.get(key)
        if value is not None:
            self._items.move_to_end(key)
        return value

    def put(self, key: K, value: V) -> None:
        """Store ``value`` as the most recently used, then evict down to the capacity (a value
        heavier than the whole capacity is not kept)."""
        old = self._items.pop(key, None)
        if old is not None:
            self._weight -= self._weight_of(old)
        self._items[key] = value
        self._weight += self._weight_of(value)
        while self._weight > self.capacity and self._items:
            _, evicted = self._items.popitem(last=False)
            self._weight -= self._weight_of(evicted)

    def clear(self) -> None:
        self._items.clear()
        self._weight = 0

    def __len__(self) -> int:
        return len(self._items)

    def __contains__(self, key: object) -> bool:
        return key in self._items

    @property
    def weight(self) -> int:
        """The total weight held (the number of entries without ``weigh``)."""
        return self._weight

    def _weight_of(self, value: V) -> int:
        return self._weigh(value) if self._weigh is not None else 1
