"""API pages: a JSON (or GraphQL) response → the products it lists and the next page to fetch.

A source's ``api.mapping`` says where things are, as JMESPath expressions: the list of items,
each product field within an item, and optionally the item's variants (options with their own
price and stock). Variants expand to one product each by default (key ``<item>:<variant>``),
so every option's price, stock and history is tracked and an option that disappears counts
misses like any product; ``mode: cheapest`` keeps one product per item instead.

The next page is decided here from the page itself: the parser is stateless, and the request
it parsed (page, offset, cursor, items so far, pages so far) comes back with the fetch result.
"""

from __future__ import annotations

import json
from decimal import Decimal
from functools import lru_cache
from typing import Any

import jmespath
import jmespath.exceptions
import msgspec
from jmespath.parser import ParsedResult

from schemas.messages import ApiRequest, Availability, Link, Product
from schemas.source import Api, ApiMapping
from services.parser.availability import best_availability, normalize_availability
from services.parser.prices import format_price, normalize_currency, price_and_currency
from shared.api_template import next_request
from shared.errors import TrawlError
from shared.urls import canonicalize

MAX_ITEMS = 10_000  # items read from one page; more is a broken or hostile response
_DEFAULT_OPTIONS = {"", "default", "default title"}  # Shopify's single-variant placeholder
_PRICE_FIELDS = ("price", "sale_price")


class ApiPage(msgspec.Struct, frozen=True, kw_only=True):
    products: list[Product]
    links: list[Link] = []
    error: str | None = None  # a pagination guard stopped the listing, or the API said no


class ApiMappingError(TrawlError, ValueError):
    """The payload is not a JSON document the mapping can read."""


def decode_json(body: bytes) -> Any:
    try:
        return msgspec.json.decode(body)
    except msgspec.DecodeError:
        pass
    try:  # a BOM, UTF-16, or numbers msgspec refuses: the slow, lenient path
        return json.loads(body.decode("utf-8-sig") if body[:3] == b"\xef\xbb\xbf" else body)
    except (ValueError, UnicodeDecodeError) as exc:
        raise ApiMappingError(f"not a JSON document: {exc}") from None


def looks_like_json(body: bytes, content_type: str | None) -> bool:
    if content_type:
        ct = content_type.split(";")[0].strip().lower()
        return ct in ("application/json", "text/json") or ct.endswith("+json")
    return body.lstrip(b"\xef\xbb\xbf \t\r\n")[:1] in (b"{", b"[")


def parse_api(
    body: bytes,
    url: str,
    api: Api,
    *,
    request: ApiRequest | None = None,
    keyword: str | None = None,
) -> ApiPage:
    """Products of one API page and, unless a stop condition holds, the next page's link."""
    data = decode_json(body)
    assert api.mapping is not None  # validated with the source
    raw = items_of(data, api.mapping)
    products = map_items(raw, api.mapping, url)
    if not raw and isinstance(data, dict) and isinstance(data.get("errors"), list):
        messages = [e.get("message") for e in data["errors"] if isinstance(e, dict)]
        said = "; ".join(str(m) for m in messages if m) or "errors without a message"
        return ApiPage(products=products, error=f"API error: {said}"[:500])
    if request is None or api.url is None:
        return ApiPage(products=products)  # replay, `trawl parse`, embedded JSON: no paging
    link, error = _next(data, len(raw), api, request, keyword)
    return ApiPage(products=products, links=[link] if link else [], error=error)


def map_items(items: list[Any], mapping: ApiMapping, page_url: str) -> list[Product]:
    out: list[Product] = []
    for item in items:
        if isinstance(item, dict):
            out.extend(_products(item, mapping, page_url))
    return out


def items_of(data: Any, mapping: ApiMapping) -> list[Any]:
    found = _search(mapping.items, data)
    if found is None:
        return []
    if isinstance(found, dict):
        return [found]  # a listing of one, or a single-product endpoint
    if not isinstance(found, list):
        raise ApiMappingError(
            f"mapping.items {mapping.items!r} is not a list but {type(found).__name__}"
        )
    return found[:MAX_ITEMS]


def _next(
    data: Any, count: int, api: Api, request: ApiRequest, keyword: str | None
) -> tuple[Link | None, str | None]:
    """The next page's link, or None; and the guard error if a guard (not the data) stopped."""
    p = api.pagination
    if p.strategy == "none" or count == 0:
        return None, None
    cursor: str | None = None
    if p.strategy == "cursor":
        value = _search(p.next_cursor or "", data)
        cursor = None if value in (None, "", False) else str(value)
        if cursor is None:
            return None, None
        if cursor == request.cursor:
            return None, f"pagination guard: the API repeated cursor {cursor!r} (a loop); stopped"
    else:
        if count < p.per_page:
            return None, None  # a short page is the last one
        total = _search(p.total, data) if p.total else None
        if isinstance(total, int | float) and request.items_before + count >= total:
            return None, None
    if request.pages >= p.max_pages:
        return None, (
            f"pagination guard: max_pages ({p.max_pages}) reached and the API still had more; "
            "stopped (raise api.pagination.max_pages if the listing really is that long)"
        )
    next_url, next_req = next_request(api, request, items=count, cursor=cursor, keyword=keyword)
    return Link(url=next_url, kind="pagination", request=next_req), None


# -- one item → product(s) ---------------------------------------------------------------------


def _products(item: dict[str, Any], mapping: ApiMapping, page_url: str) -> list[Product]:
    base = {name: _search(expr, item) for name, expr in mapping.fields.items()}
    v = mapping.variants
    variants = _search(v.path, item) if v is not None else None
    if v is None or not isinstance(variants, list) or not variants:
        product = _product(base, None, mapping, page_url)
        return [product] if product else []
    rows: list[tuple[dict[str, Any], str | None]] = []
    for variant in variants[:MAX_ITEMS]:
        if not isinstance(variant, dict):
            continue
        fields = {**base}
        for name, expr in v.fields.items():
            value = _search(expr, variant)
            if value is not None or name not in fields:
                fields[name] = value
        fields["_variant_key"] = _search(v.fields["key"], variant) if "key" in v.fields else None
        rows.append((fields, _text(_search(v.option, variant)) if v.option else None))
    if v.mode == "cheapest":
        return _cheapest(base, rows, mapping, page_url)
    out = []
    for i, (fields, option) in enumerate(rows):
        item_key = _text(base.get("key"))
        variant_key = _text(fields.pop("_variant_key")) or str(i)
        fields["key"] = f"{item_key}:{variant_key}" if item_key else variant_key
        product = _product(fields, option, mapping, page_url)
        if product:
            out.append(product)
    return out


def _cheapest(
    base: dict[str, Any],
    rows: list[tuple[dict[str, Any], str | None]],
    mapping: ApiMapping,
    page_url: str,
) -> list[Product]:
    options = []
    for fields, _ in rows:
        fields.pop("_variant_key", None)
        fields["key"] = base.get("key")
        product = _product(fields, None, mapping, page_url)
        if product:
            options.append(product)
    if not options:
        return []
    priced = [p for p in options if p.price is not None]

    def paid(p: Product) -> Decimal:
        return Decimal(p.sale_price or p.price or "0")

    best = min(priced, key=paid) if priced else options[0]
    stocks = [p.stock for p in options if p.stock is not None]
    return [
        msgspec.structs.replace(
            best,
            availability=best_availability(p.availability for p in options),
            stock=sum(stocks) if stocks else None,
        )
    ]


def _product(
    fields: dict[str, Any], option: str | None, mapping: ApiMapping, page_url: str
) -> Product | None:
    key = _text(fields.get("key"))
    if not key:
        return None
    currency = normalize_currency(fields.get("currency"))
    prices: dict[str, str | None] = {}
    for field in _PRICE_FIELDS:
        amount, named = _price(fields.get(field), mapping.cents)
        prices[field] = amount
        currency = currency or named
    if prices["sale_price"] is not None and prices["sale_price"] == prices["price"]:
        prices["sale_price"] = None  # "on sale" at the regular price is no sale
    stock = _int(fields.get("stock"))
    name = _text(fields.get("name"))
    price_lists: dict[str, str] = {}
    attributes: dict[str, str] = {}
    for field_name, value in fields.items():
        if field_name.startswith("prices."):
            amount, named = _price(value, mapping.cents)
            if amount is not None:
                price_lists[field_name.removeprefix("prices.")] = amount
                currency = currency or named
        elif field_name.startswith("attributes.") and (text := _text(value)) is not None:
            attributes[field_name.removeprefix("attributes.")] = text
    if option and option.strip().lower() not in _DEFAULT_OPTIONS:
        name = f"{name} – {option}" if name else option
    return Product(
        key=key,
        sku=_text(fields.get("sku")),
        gtin=_text(fields.get("gtin")),
        mpn=_text(fields.get("mpn")),
        name=name,
        brand=_brand(fields.get("brand")),
        price=prices["price"],
        sale_price=prices["sale_price"],
        currency=currency,
        availability=_availability(fields.get("availability"), stock, mapping.in_stock_below),
        url=_url(fields.get("url"), page_url),
        image=_url(fields.get("image"), page_url),
        stock=stock,
        prices=price_lists,
        attributes=attributes,
    )


def _availability(value: Any, stock: int | None, limited_below: int | None) -> Availability | None:
    """What the API says, where it says more than "in stock"; else what the stock implies."""
    if isinstance(value, bool):
        stated: Availability | None = "in_stock" if value else "out_of_stock"
    else:
        stated = normalize_availability(value)
    if stock is None or stated not in (None, "in_stock", "unknown"):
        return stated
    if stock <= 0:
        return "out_of_stock"
    if limited_below is not None and stock < limited_below:
        return "limited"
    return "in_stock"


def _price(value: Any, cents: bool) -> tuple[str | None, str | None]:
    if isinstance(value, dict):  # {"amount": "12.50", "currencyCode": "EUR"} (Shopify GraphQL)
        amount = value.get("amount", value.get("value"))
        named = normalize_currency(value.get("currencyCode") or value.get("currency"))
        price, _ = _price(amount, cents)
        return price, named
    amount, named = price_and_currency(value)
    if amount is None:
        return None, named
    if cents and isinstance(value, int | str) and amount == amount.to_integral_value():
        amount = amount / 100
    return format_price(amount), named


def _brand(value: Any) -> str | None:
    if isinstance(value, dict):
        value = value.get("name")
    return _text(value)


def _url(value: Any, page_url: str) -> str | None:
    text = _text(value)
    if not text:
        return None
    return canonicalize(text, page_url) or text


def _text(value: Any) -> str | None:
    if value is None or isinstance(value, bool | dict | list):
        return None
    text = str(value).strip()
    return text or None


def _int(value: Any) -> int | None:
    if isinstance(value, bool) or value is None:
        return None
    try:
        return int(float(value))
    except (TypeError, ValueError, OverflowError):
        return None


@lru_cache(maxsize=1024)
def _compiled(expression: str) -> ParsedResult:
    return jmespath.compile(expression)


def _search(expression: str | None, data: Any) -> Any:
    if not expression:
        return None
    try:
        return _compiled(expression).search(data)
    except jmespath.exceptions.JMESPathError:
        return None  # a type error on one item (join over null) must not cost the page
