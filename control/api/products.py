"""Products: list and filter (source, availability, misses, text), one product with history.

Read through the refresher's store (it stays the tables' only writer), as the read models of
schemas/read.py.
"""

from __future__ import annotations

from typing import get_args

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
from schemas.messages import Availability
from schemas.read import Page, ProductDetail, ProductOut
from services.refresher import store
from services.scheduler.operations import NotFound


async def list_products(request: web.Request) -> web.Response:
    limit, offset = paging(request)
    delisted = query_str(request, "delisted")
    where = store.ProductFilter(
        source=query_str(request, "source"),
        availability=query_str(request, "availability"),
        min_misses=query_int(request, "min_misses", None, lo=0, hi=2**31 - 1),
        text=query_str(request, "q"),
        delisted=None if delisted is None else delisted.lower() in ("true", "1", "yes"),
    )
    pool = rt_of(request).pool
    assert pool is not None  # the API runs with a database
    async with pool.acquire() as conn:
        page = await store.product_page(conn, where, limit=limit, offset=offset)
    return respond(page)


async def get_product(request: web.Request) -> web.Response:
    source, key = request.match_info["source"], request.match_info["key"]
    pool = rt_of(request).pool
    assert pool is not None  # the API runs with a database
    async with pool.acquire() as conn:
        detail = await store.product_detail(conn, source, key)
    if detail is None:
        raise NotFound(f"product {source}/{key} not found")
    return respond(detail)


# The filters both product lists take (this offset-paged one and catalog.py's by cursor).
FILTERS = (
    Param("source", {"type": "string"}),
    Param("availability", {"type": "string", "enum": list(get_args(Availability))}),
    Param("q", {"type": "string"}, "name contains, or exact sku/key"),
    Param("delisted", {"type": "boolean"}),
)

ROUTES = [
    Route(
        "GET",
        "/api/products",
        list_products,
        "List products with filters",
        "products",
        params=(
            *FILTERS,
            Param("min_misses", {"type": "integer", "minimum": 0, "maximum": 2**31 - 1}),
            *PAGING,
        ),
        response=Page[ProductOut],
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
