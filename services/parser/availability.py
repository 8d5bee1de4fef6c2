"""Availability values (schema.org URLs, OpenGraph words, visible text) → our seven states."""

from __future__ import annotations

import re
from collections.abc import Iterable
from functools import lru_cache

from schemas.messages import Availability

_STATES: dict[str, Availability] = {
    "instock": "in_stock",
    "instoreonly": "in_stock",
    "onlineonly": "in_stock",
    "outofstock": "out_of_stock",
    "soldout": "out_of_stock",
    "preorder": "preorder",
    "presale": "preorder",
    "backorder": "backorder",
    "discontinued": "discontinued",
    "limitedavailability": "limited",
}
# When offers disagree the product is as available as its most available offer.
_RANK: dict[Availability, int] = {
    "in_stock": 0,
    "limited": 1,
    "preorder": 2,
    "backorder": 3,
    "out_of_stock": 4,
    "discontinued": 5,
    "unknown": 6,
}
_NOISE = re.compile(r"[^a-z]")


def normalize_availability(value: object) -> Availability | None:
    """``http://schema.org/InStock``, ``"in stock"``, ``OutOfStock`` … → a state; None if empty."""
    if isinstance(value, list | tuple):
        value = next((v for v in value if isinstance(v, str) and v.strip()), None)
    if not isinstance(value, str):
        return None
    return _normalize(value)


@lru_cache(maxsize=1024)  # a handful of distinct strings, on every offer of every page
def _normalize(value: str) -> Availability | None:
    text = value.strip()
    if not text:
        return None
    if text in _RANK:  # already one of ours
        return text
    # "https://schema.org/InStock", "schema:InStock", "http://schema.org/ItemAvailability/InStock"
    tail = text.rstrip("/").rsplit("/", 1)[-1].rsplit(":", 1)[-1]
    return _STATES.get(_NOISE.sub("", tail.lower()), "unknown")


def best_availability(values: Iterable[Availability | None]) -> Availability | None:
    """The most available of several offers' states (``in_stock`` if any offer is)."""
    present = [v for v in values if v is not None]
    if not present:
        return None
    return min(present, key=_RANK.__getitem__)
