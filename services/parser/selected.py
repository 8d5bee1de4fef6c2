"""The variant a product page's URL selects, whose price and stock the shopper sees.

A page reached as ``…/widget?variant=222`` (``?childSku=…``, ``?v1=…``) shows the variant
that the query names, not the cheapest one: its buy box carries that variant's price and
stock. The selected variant is the one offer (or ``hasVariant`` node) whose URL is the page's
URL with its query, or whose own ``sku``/``productID``/GTIN is a value of the page's query.
Exactly one must match: offers that all repeat the page's URL select nothing.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import parse_qsl, urlsplit

from services.parser.jsonld import as_list, first, resolve
from services.parser.prices import Term, offer_terms
from shared.urls import canonicalize

_IDS = ("sku", "productID", "gtin13", "gtin12", "gtin14", "gtin8", "gtin", "mpn")
_MAX_CANDIDATES = 500


def selected_terms(
    offers: list[Any], variants: list[dict[str, Any]], index: dict, page_url: str | None
) -> list[Term]:
    """The offer terms of the variant ``page_url`` selects, or none."""
    if not page_url or "?" not in page_url:
        return []
    page = canonicalize(page_url)
    values = {v.strip() for _, v in parse_qsl(urlsplit(page_url).query) if len(v.strip()) >= 3}
    if page is None or (not values and "?" not in page):
        return []
    chosen: list[list[Term]] = []
    for offer in offers[:_MAX_CANDIDATES]:
        offer = resolve(offer, index)
        if isinstance(offer, dict) and _selects(offer, page, values, index):
            chosen.append(offer_terms(offer, index))
    for variant in variants[:_MAX_CANDIDATES]:
        offers_of = [resolve(o, index) for o in as_list(variant.get("offers"))]
        if _selects(variant, page, values, index) or any(
            isinstance(o, dict) and _selects(o, page, set(), index) for o in offers_of
        ):
            chosen.append(offer_terms(variant.get("offers"), index))
    return chosen[0] if len(chosen) == 1 else []


def _selects(node: dict[str, Any], page: str, values: set[str], index: dict) -> bool:
    if "?" in page and _url(node, index) == page:
        return True
    return any(_ident(node.get(key)) in values for key in _IDS)


def _url(node: dict[str, Any], index: dict) -> str | None:
    raw = first(node.get("url"))
    raw = resolve(raw, index)
    if isinstance(raw, dict):
        raw = raw.get("@id") or first(raw.get("url"))
    return canonicalize(raw) if isinstance(raw, str) and raw.startswith("http") else None


def _ident(value: object) -> str | None:
    value = first(value)
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    return value.strip() if isinstance(value, str) else None
