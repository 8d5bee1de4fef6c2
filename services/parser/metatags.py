"""OpenGraph and ``product:`` meta tags → product fields.

OpenGraph is the weakest structured source: it is often stale (cached by a CMS when the price
was different), so it decides a product page only by ``og:type=product`` and otherwise fills
fields the richer sources lack.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from selectolax.lexbor import LexborHTMLParser

from services.parser.availability import normalize_availability
from services.parser.prices import format_price, in_whole_units, normalize_currency, parse_price

PRODUCT_OG_TYPES = frozenset({"product", "product.item", "product.group", "og:product", "products"})
_PREFIXES = ("og:", "product:")
# The price tags shops use: the OpenGraph product spec's, and the bare ``og:price`` a few
# platforms emit with the amount and its unit in one string ("30,000원~").
_PRICE_TAGS = ("product:price:amount", "og:price:amount", "og:price", "product:price")

Fields = dict[str, str]


@dataclass(slots=True)
class MetaTags:
    """``og:*`` and ``product:*`` values in document order (first one wins)."""

    values: dict[str, list[str]] = field(default_factory=dict)

    def first(self, *names: str) -> str | None:
        for name in names:
            for value in self.values.get(name, ()):
                if value:
                    return value
        return None

    @property
    def is_product(self) -> bool:
        og_type = (self.first("og:type") or "").strip().lower()
        if og_type in PRODUCT_OG_TYPES:
            return True
        # A page with no og:type but product price tags still says what it is.
        return not og_type and self.first(*_PRICE_TAGS) is not None


def extract_metatags(tree: LexborHTMLParser) -> MetaTags:
    meta = MetaTags()
    # Every <meta>: a "meta[property], meta[name]" list costs lexbor a walk per alternative
    # (and yields a tag that has both twice); those with neither have no key below.
    for node in tree.css("meta"):
        attrs = node.attributes
        key = (attrs.get("property") or attrs.get("name") or "").strip().lower()
        if not key.startswith(_PREFIXES):
            continue
        content = (attrs.get("content") or "").strip()
        meta.values.setdefault(key, []).append(content)
    return meta


def og_fields(meta: MetaTags) -> Fields:
    """Product fields the meta tags give (relative URLs are resolved by the caller)."""
    out: Fields = {}
    _put(out, "name", meta.first("og:title"))
    _put(out, "url", meta.first("og:url"))
    _put(out, "image", meta.first("og:image", "og:image:secure_url", "og:image:url"))
    _put(out, "brand", meta.first("product:brand", "og:brand"))
    _put(out, "sku", meta.first("product:retailer_item_id", "product:sku"))
    _put(out, "gtin", meta.first("product:gtin", "product:ean", "product:upc", "product:isbn"))
    _put(out, "mpn", meta.first("product:mfr_part_no"))
    raw_price = meta.first(*_PRICE_TAGS)
    currency = normalize_currency(
        meta.first("product:price:currency", "og:price:currency", "product:sale_price:currency")
    ) or (normalize_currency(raw_price) if raw_price else None)
    price = in_whole_units(raw_price, parse_price(raw_price), currency)
    if price is not None and price <= 0:
        price = None  # a placeholder, not a price
    raw_sale = meta.first("product:sale_price:amount")
    sale = in_whole_units(raw_sale, parse_price(raw_sale), currency)
    # What the customer pays now: a sale price below the regular one is the price.
    if sale is not None and sale > 0 and (price is None or sale < price):
        price = sale
    if price is not None:
        out["price"] = format_price(price)
    _put(out, "currency", currency)
    _put(
        out,
        "availability",
        normalize_availability(meta.first("product:availability", "og:availability")),
    )
    return out


def _put(out: Fields, key: str, value: str | None) -> None:
    if value:
        value = " ".join(value.split())
        if value:
            out[key] = value
