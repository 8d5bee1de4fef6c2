"""The dashboard's catalog views: products by key set (search, filters, sort), a product's
price and stock history, and products matched across sources by GTIN or MPN.

Read through the refresher's store, like ``products.py``; cursors are opaque (``cursor.py``).
"""

from __future__ import annotations

from datetime import datetime
from typing import get_args

import msgspec
from aiohttp import web

from control.api import cursor
from control.api.problems import Problem
from control.api.products import FILTERS
from control.api.routes import Param, Route, pool_of, query_int, query_str, respond
from schemas.messages import Availability
from schemas.read import CursorPage, MatchGroup, ProductHistory, ProductOut
from services.refresher import store
from services.scheduler.operations import NotFound


def _limit(request: web.Request, default: int, hi: int) -> int:
    limit = query_int(request, "limit", default, lo=1, hi=hi)
    assert limit is not None
    return limit


def _flag(request: web.Request, name: str) -> bool | None:
    raw = query_str(request, name)
    if raw is None:
        return None
    if raw.lower() not in ("true", "false", "1", "0", "yes", "no"):
        raise Problem(400, "Bad Request", f"{name}: expected true or false, got {raw!r}")
    return raw.lower() in ("true", "1", "yes")


async def browse(request: web.Request) -> web.Response:
    sort = query_str(request, "sort") or "key"
    if sort not in store.SORTS:
        raise Problem(400, "Bad Request", f"sort: one of {', '.join(store.SORTS)}")
    availability = query_str(request, "availability")
    if availability is not None and availability not in get_args(Availability):
        raise Problem(400, "Bad Request", f"availability: unknown value {availability!r}")
    where = store.ViewFilter(
        source=query_str(request, "source"),
        availability=availability,
        text=query_str(request, "q"),
        changed_within_hours=query_int(request, "changed_within", None, lo=1, hi=24 * 366),
        delisted=_flag(request, "delisted"),
        has_alerts=_flag(request, "has_alerts"),
    )
    after = cursor.decode(query_str(request, "cursor"), length=3)
    if after is not None and not all(isinstance(part, str) for part in after):
        raise Problem(422, "Unprocessable Content", "cursor: not a cursor this API gave")
    limit = _limit(request, 50, 500)
    async with pool_of(request).acquire() as conn:
        items, last = await store.product_view_page(
            conn,
            where,
            sort=sort,
            after=None if after is None else (after[0], after[1], after[2]),
            limit=limit,
        )
        # Counting every match costs more than the page (a scan at 100k): the first page
        # counts unless asked not to, so a client can draw rows first and count after.
        want_total = after is None and _flag(request, "total") is not False
        total = await store.count_view_products(conn, where) if want_total else None
    return respond(
        CursorPage(
            items=items,
            next_cursor=None if last is None else cursor.encode(list(last)),
            total=total,
        )
    )


async def history(request: web.Request) -> web.Response:
    source, key = request.match_info["source"], request.match_info["key"]
    after = cursor.decode(query_str(request, "cursor"), length=2)
    position = None
    if after is not None:
        try:
            position = (datetime.fromisoformat(after[0]), int(after[1]))
        except (TypeError, ValueError):
            raise Problem(
                422, "Unprocessable Content", "cursor: not a cursor this API gave"
            ) from None
    limit = _limit(request, 1000, 5000)
    async with pool_of(request).acquire() as conn:
        product = await store.product(conn, source, key)
        if product is None:
            raise NotFound(f"product {source}/{key} not found")
        variants = await store.product_variants(conn, source, key)
        points, last = await store.product_history(conn, source, key, after=position, limit=limit)
    next_cursor = None if last is None else cursor.encode([last[0].isoformat(), last[1]])
    return respond(
        ProductHistory(product=product, points=points, variants=variants, next_cursor=next_cursor)
    )


class MatchOut(msgspec.Struct, kw_only=True):
    gtin: str | None
    mpn: str | None
    products: list[ProductOut]  # cheapest first


async def match(request: web.Request) -> web.Response:
    gtin, mpn = query_str(request, "gtin"), query_str(request, "mpn")
    if gtin is None and mpn is None:
        raise Problem(422, "Unprocessable Content", "gtin or mpn: one is required")
    async with pool_of(request).acquire() as conn:
        products = await store.match_products(conn, gtin, mpn)
    return respond(MatchOut(gtin=gtin, mpn=mpn, products=products))


async def match_groups(request: web.Request) -> web.Response:
    after = cursor.decode(query_str(request, "cursor"), length=1)
    if after is not None and not isinstance(after[0], str):
        raise Problem(422, "Unprocessable Content", "cursor: not a cursor this API gave")
    min_sources = query_int(request, "min_sources", 2, lo=1, hi=1000)
    assert min_sources is not None
    limit = _limit(request, 50, 500)
    async with pool_of(request).acquire() as conn:
        groups = await store.match_groups(
            conn, after=None if after is None else after[0], min_sources=min_sources, limit=limit
        )
    more = len(groups) == limit
    return respond(
        CursorPage(items=groups, next_cursor=cursor.encode([groups[-1].gtin]) if more else None)
    )


_PRODUCT = (
    Param("source", {"type": "string", "minLength": 1}, required=True, location="path"),
    Param("key", {"type": "string", "minLength": 1}, required=True, location="path"),
)

ROUTES = [
    Route(
        "GET",
        "/api/catalog/products",
        browse,
        "Products paged by cursor: search, filter, sort",
        "products",
        params=(
            *FILTERS,
            Param(
                "changed_within",
                {"type": "integer", "minimum": 1, "maximum": 24 * 366},
                "price, sale price or stock changed within this many hours",
            ),
            Param(
                "has_alerts",
                {"type": "boolean"},
                "an alert rule targets it: its source, product, variant or GTIN",
            ),
            Param("sort", {"type": "string", "enum": list(store.SORTS), "default": "key"}),
            Param("total", {"type": "boolean", "default": True}, "count the matches (first page)"),
            *cursor.paged(50, 500),
        ),
        response=CursorPage[ProductOut],
        errors=(400, 422),
    ),
    Route(
        "GET",
        "/api/products/{source}/{key}/history",
        history,
        "A product's price and stock history (with variants), each change with its stored page",
        "products",
        params=(
            *_PRODUCT,
            *cursor.paged(1000, 5000),
        ),
        response=ProductHistory,
        errors=(400, 404, 422),
    ),
    Route(
        "GET",
        "/api/match",
        match,
        "Products across sources with the same GTIN or MPN, cheapest first",
        "products",
        params=(Param("gtin", {"type": "string"}), Param("mpn", {"type": "string"})),
        response=MatchOut,
        errors=(400, 422),
    ),
    Route(
        "GET",
        "/api/match/groups",
        match_groups,
        "GTINs that products of several sources share",
        "products",
        params=(
            Param("min_sources", {"type": "integer", "minimum": 1, "maximum": 1000, "default": 2}),
            *cursor.paged(50, 500),
        ),
        response=CursorPage[MatchGroup],
        errors=(400, 422),
    ),
]
