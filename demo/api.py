"""The demo shop's API: the same catalog and epochs as its HTML pages, as JSON listings, with
options (variants) that have their own prices and stock.

Routes, on every host (a listing covers the whole catalog):

- ``POST /graphql`` ``{query, variables: {page, perPage, search?}}``: pages from 0,
  ``{"data": {"products": {"totalCount": n, "items": [...]}}}`` (the query text is not read).
- ``GET /products.json?page=N&limit=L``: Shopify's storefront listing, pages from 1; a short
  (or empty) page is the last.
- ``GET /api/products?cursor=C&limit=L``: ``{"items": [...], "next_cursor": c | null}``.
- Broken servers, for the pagination guards: ``GET /api/stuck?cursor=C`` always names the same
  next cursor; ``GET /api/endless?page=N&limit=L`` always answers a full page and no total.

Fault scripts are keyed by path and query as received; a POST's key is its path with its
GraphQL variables as a sorted query, so ``"/graphql?page=3&perPage=10": [429]`` fails page 3.
"""

from __future__ import annotations

import base64
import hashlib
import json
from decimal import Decimal
from typing import Any
from urllib.parse import urlencode

from demo.catalog import Catalog, Product

OPTIONS = ("Standard", "Large", "Gift Set")
ADDED_OPTION = "Deluxe"  # what an epoch adds to some products (``churn``)
API_PATHS = frozenset({"/graphql", "/products.json", "/api/products", "/api/stuck", "/api/endless"})
MAX_LIMIT = 250


def is_api(path: str) -> bool:
    return path in API_PATHS


def fault_key(path: str, method: str, query: str, body: bytes) -> str:
    """What a fault script is keyed by: path+query, and a POST's GraphQL variables as query."""
    if method != "POST":
        return f"{path}?{query}" if query else path
    try:
        variables = json.loads(body or b"{}").get("variables") or {}
    except (ValueError, AttributeError):
        return path
    if not isinstance(variables, dict) or not variables:
        return path
    return f"{path}?{urlencode(sorted((k, str(v)) for k, v in variables.items()))}"


# -- the data: options with prices and stock, derived from the catalog's epoch state -----------


def _options(product: Product, epoch: int = 0, churn: bool = False) -> list[str]:
    """The product's options. With ``churn`` (the HTML shop's variants mode), each epoch after
    the first adds an option to some products of two or more and takes the last one from some
    of three (a quarter each, in turns), so a crawl meets new and vanished variants."""
    names = list(OPTIONS[: 1 + product.index % 3])
    if churn and epoch > 0 and len(names) > 1:
        turn = (product.index // 3 + epoch) % 4
        if turn == 0:
            names.append(ADDED_OPTION)
        elif turn == 2 and len(names) == 3:
            names.pop()
    return names


def _on_sale(product: Product) -> bool:
    return product.index % 4 == 1


def _money(value: Decimal) -> str:
    return f"{value.quantize(Decimal('0.01'))}"


def variants(
    catalog: Catalog, product: Product, epoch: int, *, churn: bool = False
) -> list[dict[str, Any]]:
    """Each option: price (regular), sale price, stock; stock changes whenever the product's
    state does (its ``changed`` epoch), and one option of every fifth product is sold out.
    ``churn``: the options themselves change with the epochs (``_options``)."""
    state = catalog.state(epoch)
    base = Decimal(state.price[product.index])
    availability = state.availability[product.index]
    out = []
    for i, option in enumerate(_options(product, epoch, churn)):
        price = base + i * max(Decimal(1), (base * Decimal("0.2")).to_integral_value())
        seed = f"{product.sku}:{i}:{state.changed[product.index]}".encode()
        stock = 1 + int(hashlib.blake2b(seed, digest_size=2).hexdigest(), 16) % 20
        if availability != "in_stock" or (i == 1 and product.index % 5 == 0):
            stock = 0
        out.append(
            {
                "i": i,
                "option": option,
                "sku": f"{product.sku}-{i + 1}",
                "price": _money(price),
                "sale_price": _money(price * Decimal("0.8")) if _on_sale(product) else None,
                "stock": stock,
            }
        )
    return out


def listing(catalog: Catalog, epoch: int, search: str | None = None) -> list[Product]:
    listed = catalog.state(epoch).listed
    items = [p for p in catalog.products if p.index in listed]
    if search:
        items = [p for p in items if search.lower() in p.name.lower()]
    return items


def truth(catalog: Catalog, epoch: int, flavor: str = "graphql") -> list[dict[str, Any]]:
    """One record per option, as an API source with expanded variants should store it."""
    out = []
    for p in listing(catalog, epoch):
        state = catalog.state(epoch)
        for v in variants(catalog, p, epoch):
            if flavor == "shopify":
                key = f"{_shopify_id(p)}:{_shopify_id(p) * 10 + v['i']}"
                availability = "in_stock" if v["stock"] > 0 else "out_of_stock"
                currency = None
            else:
                key = f"{p.sku}:{v['sku']}"
                availability = state.availability[p.index]
                if availability == "in_stock" and not v["stock"]:
                    availability = "out_of_stock"  # this option is sold out
                currency = catalog.currency(p.host)
            single = len(_options(p)) == 1
            out.append(
                {
                    "key": key,
                    "sku": v["sku"],
                    "name": p.name if single else f"{p.name} – {v['option']}",
                    "brand": p.brand,
                    "price": v["price"],
                    "sale_price": v["sale_price"],
                    "currency": currency,
                    "availability": availability,
                    "stock": v["stock"],
                }
            )
    return out


# -- the three shapes --------------------------------------------------------------------------


def _graphql_item(catalog: Catalog, p: Product, epoch: int) -> dict[str, Any]:
    availability = catalog.state(epoch).availability[p.index]
    return {
        "id": p.sku,
        "sku": p.sku,
        "name": p.name,
        "brand": p.brand,
        "url": catalog.url(p),
        "image": catalog.image(p),
        "currency": catalog.currency(p.host),
        "availability": availability.upper(),
        "variants": [
            {
                "id": v["sku"],
                "sku": v["sku"],
                "option": v["option"] if len(_options(p)) > 1 else "Default",
                "price": v["price"],
                "salePrice": v["sale_price"],
                "stock": v["stock"],
            }
            for v in variants(catalog, p, epoch)
        ],
    }


def _shopify_id(p: Product) -> int:
    return 1000 + p.index


def _shopify_item(catalog: Catalog, p: Product, epoch: int) -> dict[str, Any]:
    pid = _shopify_id(p)
    return {
        "id": pid,
        "title": p.name,
        "handle": p.slug,
        "vendor": p.brand,
        "product_type": p.category,
        "images": [{"id": pid, "src": catalog.image(p)}],
        "variants": [
            {
                "id": pid * 10 + v["i"],
                "title": v["option"] if len(_options(p)) > 1 else "Default Title",
                "sku": v["sku"],
                # Shopify: price is what is paid now; compare_at_price the regular one on sale.
                "price": v["sale_price"] or v["price"],
                "compare_at_price": v["price"] if v["sale_price"] else None,
                "available": v["stock"] > 0,
                "inventory_quantity": v["stock"],
            }
            for v in variants(catalog, p, epoch)
        ],
    }


def _cursor(offset: int) -> str:
    return base64.urlsafe_b64encode(f"o:{offset}".encode()).decode().rstrip("=")


def _offset(cursor: str) -> int:
    if not cursor:
        return 0
    try:
        text = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode()
        return max(0, int(text.removeprefix("o:")))
    except ValueError:
        return 0


def _int(value: Any, default: int) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        return default


def respond(
    catalog: Catalog, epoch: int, path: str, method: str, query: dict[str, str], body: bytes
) -> tuple[int, dict[str, Any]]:
    """(status, JSON document) of one API request."""
    if path == "/graphql":
        if method != "POST":
            return 405, {"errors": [{"message": "POST a GraphQL request"}]}
        try:
            variables = json.loads(body or b"{}").get("variables") or {}
        except (ValueError, AttributeError):
            return 400, {"errors": [{"message": "the body is not a GraphQL request"}]}
        per = min(MAX_LIMIT, max(1, _int(variables.get("perPage"), 20)))
        page = max(0, _int(variables.get("page"), 0))
        items = listing(catalog, epoch, variables.get("search"))
        chunk = items[page * per : (page + 1) * per]
        return 200, {
            "data": {
                "products": {
                    "totalCount": len(items),
                    "items": [_graphql_item(catalog, p, epoch) for p in chunk],
                }
            }
        }
    if method != "GET":
        return 405, {"error": "GET only"}
    limit = min(MAX_LIMIT, max(1, _int(query.get("limit"), 50)))
    if path == "/products.json":
        page = max(1, _int(query.get("page"), 1))
        chunk = listing(catalog, epoch)[(page - 1) * limit : page * limit]
        return 200, {"products": [_shopify_item(catalog, p, epoch) for p in chunk]}
    if path == "/api/products":
        items = listing(catalog, epoch)
        start = _offset(query.get("cursor", ""))
        chunk = items[start : start + limit]
        more = start + limit < len(items)
        return 200, {
            "items": [_graphql_item(catalog, p, epoch) for p in chunk],
            "next_cursor": _cursor(start + limit) if more else None,
        }
    chunk = listing(catalog, epoch)[:limit]
    rows = [_graphql_item(catalog, p, epoch) for p in chunk]
    if path == "/api/stuck":
        return 200, {"items": rows, "next_cursor": "c2"}  # c2, c2, c2, …
    return 200, {"items": rows}  # /api/endless: full pages forever
