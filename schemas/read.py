"""Read models: what a product, a job or a page of results looks like to the API, the CLI and
the diffs. Defined once here; a store returns them and every reader shows them as they are."""

from __future__ import annotations

from typing import Generic, TypeVar

import msgspec

T = TypeVar("T")


class Page(msgspec.Struct, Generic[T], kw_only=True):
    """One page of a listing: ``items`` from ``offset``, of ``total`` matching."""

    items: list[T]
    total: int
    limit: int = 0
    offset: int = 0
