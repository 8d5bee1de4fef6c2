"""Read models: what a product, a job or a page of results looks like to the API, the CLI and
the diffs. Defined once here; a store returns them and every reader shows them as they are."""

from __future__ import annotations

from datetime import datetime
from typing import Generic, TypeVar

import msgspec

from schemas.messages import Availability, Product

T = TypeVar("T")


class Page(msgspec.Struct, Generic[T], kw_only=True):
    """One page of a listing: ``items`` from ``offset``, of ``total`` matching."""

    items: list[T]
    total: int
    limit: int = 0
    offset: int = 0


# -- products ------------------------------------------------------------------------------------
class ProductOut(Product, kw_only=True, frozen=True):
    """A product as trawl holds it: every field the parser extracts (a new ``Product`` field is
    a field here too), then the refresher's bookkeeping. Prices are decimal strings."""

    source: str
    # The stored image (fetched once): GET /api/payloads/{image_ref}/data serves it.
    image_ref: str | None = None
    consecutive_misses: int = 0
    delisted_at: datetime | None = None
    first_seen_at: datetime
    last_seen_at: datetime
    last_seen_job: int | None = None


class SnapshotOut(msgspec.Struct, kw_only=True, frozen=True):
    """A product's state when a job saw it change (price, sale price or stock)."""

    job_id: int | None
    price: str | None
    sale_price: str | None
    currency: str | None
    availability: Availability | None
    observed_at: datetime


class ProductDetail(msgspec.Struct, kw_only=True, frozen=True):
    """One product with its snapshot history, oldest first."""

    product: ProductOut
    snapshots: list[SnapshotOut]


class PriceChange(msgspec.Struct, kw_only=True, frozen=True):
    key: str
    price_a: str | None
    price_b: str | None
    sale_price_a: str | None
    sale_price_b: str | None
    currency: str | None


class StockChange(msgspec.Struct, kw_only=True, frozen=True):
    key: str
    availability_a: Availability | None
    availability_b: Availability | None


class JobDiff(msgspec.Struct, kw_only=True, frozen=True):
    """What changed in a source's catalog from job A to job B: products added (seen in B only),
    removed (seen in A only), and price and stock changes of products seen in both."""

    source: str
    job_a: int
    job_b: int
    seen_a: int
    seen_b: int
    added: list[str]
    removed: list[str]
    price_changes: list[PriceChange]
    stock_changes: list[StockChange]
