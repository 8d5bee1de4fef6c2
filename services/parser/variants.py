"""Variants: the sizes and colours of a product, each a product row of its own.

The page's product stays what it was: a ``ProductGroup`` (or an offer list) collapsed to the
lowest available price and the best stock, so a product is in stock when any variant is. Beside
it each variant becomes a ``Product`` with ``variant_of`` set to the product's key, its own key
(``<product key>#<variant sku or attributes>``), sku, attributes (size, colour...), price and
availability, so the refresher keeps its own history and misses, and one sold-out size shows.

Where variants come from (structured data only):

- JSON-LD / microdata ``ProductGroup.hasVariant`` (or top-level products sharing one name and
  page, which ``product.select_main`` folds into a group): each variant node's own fields;
- one ``Product`` whose ``offers`` list several offers told apart by their own sku, name or
  size/colour: each such offer.

A variant without a price or availability of its own takes the group's (a shared offer).
"""

from __future__ import annotations

from typing import Any

from schemas.messages import Product
from services.parser.availability import normalize_availability
from services.parser.jsonld import as_list, resolve, types_of
from services.parser.metatags import Fields
from services.parser.prices import best_offer, format_price, offer_terms
from services.parser.product import MAX_VARIANTS, node_fields
from shared.urls import canonicalize

# The schema.org properties a variant varies by, as attribute names.
_VARIES = {"size": "size", "color": "colour", "colour": "colour", "material": "material",
           "pattern": "pattern"}  # fmt: skip


def _text(value: object) -> str | None:
    if isinstance(value, dict):
        value = value.get("name") or value.get("@value")
    if isinstance(value, list):
        value = value[0] if value else None
    if isinstance(value, str | int | float) and not isinstance(value, bool):
        text = " ".join(str(value).split())
        return text or None
    return None


def _attributes(node: dict[str, Any]) -> dict[str, str]:
    out: dict[str, str] = {}
    for prop, name in _VARIES.items():
        value = _text(node.get(prop))
        if value:
            out.setdefault(name, value)
    return out


def expand(node: dict[str, Any], index: dict[str, Any], group: Product, base: str) -> list[Product]:
    """The variants of ``group``, the product read from ``node`` (a structured node)."""
    found: list[tuple[Fields, dict[str, str]]] = []
    if "productgroup" in types_of(node) or node.get("hasVariant"):
        for raw in as_list(node.get("hasVariant"))[:MAX_VARIANTS]:
            variant = resolve(raw, index)
            if isinstance(variant, dict):
                found.append((node_fields(variant, index), _attributes(variant)))
    else:
        offers = [resolve(o, index) for o in as_list(node.get("offers"))[:MAX_VARIANTS]]
        offers = [o for o in offers if isinstance(o, dict) and "aggregateoffer" not in types_of(o)]
        if len(offers) > 1:
            found = [_offer_fields(o, index) for o in offers]
            # Offers all alike are sellers or price tiers, not variants.
            if len({_ident(f, a) for f, a in found} - {None}) < len(found):
                found = []
    return _products(found, group, base)


def _offer_fields(offer: dict[str, Any], index: dict[str, Any]) -> tuple[Fields, dict[str, str]]:
    fields: Fields = {}
    item = resolve(offer.get("itemOffered"), index)
    attrs = _attributes(item) if isinstance(item, dict) else {}
    attrs = {**attrs, **_attributes(offer)}
    sku = _text(offer.get("sku")) or (_text(item.get("sku")) if isinstance(item, dict) else None)
    if sku:
        fields["sku"] = sku
    name = _text(offer.get("name")) or (_text(item.get("name")) if isinstance(item, dict) else None)
    if name:
        fields["name"] = name
    best, availability = best_offer(offer_terms(offer, index))
    if best is not None:
        fields["price"] = format_price(best[0])
        if best[1]:
            fields["currency"] = best[1]
    if availability:
        fields["availability"] = availability
    return fields, attrs


def _ident(fields: Fields, attrs: dict[str, str]) -> str | None:
    """What tells a variant apart from its siblings: its sku, else its attributes, else its name."""
    if fields.get("sku"):
        return str(fields["sku"])
    if attrs:
        return "/".join(f"{k}={v}" for k, v in sorted(attrs.items()))
    return str(fields["name"]) if fields.get("name") else None


def _products(
    found: list[tuple[Fields, dict[str, str]]], group: Product, base: str
) -> list[Product]:
    out: list[Product] = []
    seen: set[str] = set()
    for i, (fields, attrs) in enumerate(found):
        ident = _ident(fields, attrs) or str(i + 1)
        if ident == group.key or ident in seen:
            continue  # the group's own sku on a variant, or a variant listed twice
        seen.add(ident)
        url = fields.get("url")
        has_offer = "price" in fields or "availability" in fields
        out.append(
            Product(
                key=f"{group.key}#{ident}",
                sku=fields.get("sku"),
                gtin=fields.get("gtin"),
                mpn=fields.get("mpn"),
                name=fields.get("name") or group.name,
                brand=fields.get("brand") or group.brand,
                price=fields.get("price") if has_offer else group.price,
                sale_price=fields.get("sale_price") if has_offer else group.sale_price,
                currency=fields.get("currency") or group.currency,
                availability=normalize_availability(fields.get("availability"))
                if has_offer
                else group.availability,
                url=(canonicalize(url, base) if url else None) or group.url,
                image=fields.get("image") or group.image,
                attributes=attrs,
                found_by=group.found_by,
                confidence=group.confidence,
                variant_of=group.key,
            )
        )
    return out
