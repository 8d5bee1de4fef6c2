"""Products: list and filter (source, availability, misses, text), one product with history.

Read-only queries of the refresher's tables; the refresher stays their only writer.
"""

from __future__ import annotations

from datetime import datetime
from decimal import Decimal

import msgspec
from aiohttp import web

from control.api.routes import (
    PAGING,
    Param,
    Route,
    paging,
    query_int,
    query_str,
    respond,
    rt_of,
)
from services.scheduler.operations import NotFound

AVAILABILITY = [
    "in_stock",
    "out_of_stock",
    "preorder",
    "backorder",
    "discontinued",
    "limited",
    "unknown",
]

_FIELDS = """source, key, sku, gtin, mpn, name, brand, price, sale_price, currency, availability,
             url, image, image_ref, stock, prices, attributes, consecutive_misses, delisted_at,
             first_seen_at, last_seen_at,
             last_seen_job"""
_WHERE = """($1::text IS NULL OR source = $1)
    AND ($2::text IS NULL OR availability = $2)
    AND ($3::int IS NULL OR consecutive_misses >= $3)
    AND ($4::text IS NULL OR name ILIKE '%' || $4 || '%' OR sku = $4 OR key = $4)
    AND ($5::boolean IS NULL OR (delisted_at IS NOT NULL) = $5)"""


class ProductOut(msgspec.Struct, kw_only=True):
    source: str
    key: str
    sku: str | None
    gtin: str | None
    mpn: str | None
    name: str | None
    brand: str | None
    price: Decimal | None
    sale_price: Decimal | None
    currency: str | None
    availability: str | None
    url: str | None
    image: str | None
    # The stored image (fetched once): GET /api/payloads/{image_ref}/data serves it.
    image_ref: str | None = None
    stock: int | None = None
    prices: dict[str, str] = {}  # named price lists (member, rec, medical, ...)
    attributes: dict[str, str] = {}
    consecutive_misses: int
    delisted_at: datetime | None
    first_seen_at: datetime
    last_seen_at: datetime
    last_seen_job: int | None


class ProductPage(msgspec.Struct, kw_only=True):
    items: list[ProductOut]
    total: int
    limit: int
    offset: int


class Snapshot(msgspec.Struct, kw_only=True):
    job_id: int | None
    price: Decimal | None
    sale_price: Decimal | None
    currency: str | None
    availability: str | None
    observed_at: datetime


class ProductDetail(msgspec.Struct, kw_only=True):
    product: ProductOut
    snapshots: list[Snapshot]


async def list_products(request: web.Request) -> web.Response:
    limit, offset = paging(request)
    delisted = query_str(request, "delisted")
    args = (
        query_str(request, "source"),
        query_str(request, "availability"),
        query_int(request, "min_misses", None, lo=0, hi=2**31 - 1),
        query_str(request, "q"),
        None if delisted is None else delisted.lower() in ("true", "1", "yes"),
    )
    async with rt_of(request).pool.acquire() as conn:
        total = await conn.fetchval(f"SELECT count(*) FROM products WHERE {_WHERE}", *args)
        rows = await conn.fetch(
            f"SELECT {_FIELDS} FROM products WHERE {_WHERE} ORDER BY source, key "
            "LIMIT $6 OFFSET $7",
            *args,
            limit,
            offset,
        )
    items = [ProductOut(**dict(r)) for r in rows]
    return respond(ProductPage(items=items, total=total, limit=limit, offset=offset))


async def get_product(request: web.Request) -> web.Response:
    source, key = request.match_info["source"], request.match_info["key"]
    async with rt_of(request).pool.acquire() as conn:
        row = await conn.fetchrow(
            f"SELECT {_FIELDS} FROM products WHERE source = $1 AND key = $2", source, key
        )
        if row is None:
            raise NotFound(f"product {source}/{key} not found")
        snaps = await conn.fetch(
            """SELECT job_id, price, sale_price, currency, availability, observed_at
               FROM snapshots WHERE source = $1 AND key = $2 ORDER BY observed_at, id""",
            source,
            key,
        )
    return respond(
        ProductDetail(
            product=ProductOut(**dict(row)), snapshots=[Snapshot(**dict(s)) for s in snaps]
        )
    )


ROUTES = [
    Route(
        "GET",
        "/api/products",
        list_products,
        "List products with filters",
        "products",
        params=(
            Param("source", {"type": "string"}),
            Param("availability", {"type": "string", "enum": AVAILABILITY}),
            Param("min_misses", {"type": "integer", "minimum": 0, "maximum": 2**31 - 1}),
            Param("q", {"type": "string"}, "name contains, or exact sku/key"),
            Param("delisted", {"type": "boolean"}),
            *PAGING,
        ),
        response=ProductPage,
        errors=(400,),
    ),
    Route(
        "GET",
        "/api/products/{source}/{key}",
        get_product,
        "One product with its snapshot history",
        "products",
        params=(
            Param("source", {"type": "string", "minLength": 1}, required=True, location="path"),
            Param("key", {"type": "string", "minLength": 1}, required=True, location="path"),
        ),
        response=ProductDetail,
        errors=(404,),
    ),
]
