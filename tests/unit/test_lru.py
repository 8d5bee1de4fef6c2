"""The shared LRU: least recently used out first, by count or by weight."""

from __future__ import annotations

from shared.lru import LRU


def test_evicts_the_least_recently_used() -> None:
    cache: LRU[str, int] = LRU(2)
    cache.put("a", 1)
    cache.put("b", 2)
    assert cache.get("a") == 1  # a is now the most recent
    cache.put("c", 3)
    assert "b" not in cache and cache.get("a") == 1 and cache.get("c") == 3
    cache.put("a", 10)  # an update replaces, it does not grow
    assert len(cache) == 2 and cache.get("a") == 10
    assert cache.get("missing") is None
    cache.clear()
    assert len(cache) == 0 and cache.weight == 0


def test_a_weighed_cache_holds_at_most_its_capacity() -> None:
    cache: LRU[str, bytes] = LRU(10, weigh=len)
    cache.put("a", b"1234")
    cache.put("b", b"1234")
    cache.put("c", b"1234")  # 12 > 10: a goes
    assert "a" not in cache and cache.weight == 8
    cache.put("b", b"1")  # re-weighed on update
    assert cache.weight == 5
    cache.put("huge", b"x" * 11)  # heavier than the whole cache: not kept, and it evicted all
    assert "huge" not in cache and cache.weight == 0
