"""The page's main product: which entity it is, its fields, and which source wins.

Sources in order of trust: JSON-LD > microdata > RDFa > OpenGraph/``product:`` meta > visible
HTML. The first source that names one main product decides the page is a product page and
gives every field it has; each lower source then fills only the fields still missing, and
only when it describes the same product (no clashing identifiers or names), so a related
product's tile cannot leak its price in. Per-source CSS field rules override everything.

"Main" means: a WebPage's ``mainEntity``; else the one top-level ``Product``/``ProductGroup``
that is not a list member or a related/similar product (variants fold into their group, and
products sharing one name and page are the variants of one); an empty node (a widget's stub)
is no candidate; several of equal standing are a listing unless exactly one matches the
page's URL, is not a recommendation tile, or is the one the page's title names.

Offers: the price is the lowest *available* offer's (unless the page's URL selects one
variant: then that variant's, see ``selected``), a price of 0 is none, and nested offers (a
marketplace's offer around the seller's) are read through.
"""

from __future__ import annotations

import html
import re
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, Literal

from services.parser.jsonld import Forest, as_list, first, resolve, types_of
from services.parser.metatags import Fields
from services.parser.microdata import TILE
from services.parser.prices import (
    RANGE_TOP,
    Term,
    best_offer,
    format_price,
    offer_terms,
    range_top,
)
from services.parser.selected import selected_terms
from shared.urls import canonicalize

PRODUCT_TYPES = frozenset(
    {"product", "productgroup", "individualproduct", "productmodel", "someproducts", "vehicle",
     "car", "motorcycle"}
)  # fmt: skip
# A page whose structured data says it is one of these is not a product page.
NOT_PRODUCT_PAGES = frozenset(
    {"collectionpage", "searchresultspage", "faqpage", "qapage", "article", "newsarticle",
     "blogposting", "blog", "itemlist", "offercatalog", "profilepage", "aboutpage",
     "contactpage"}
)  # fmt: skip
# Properties that point at products which are not the page's subject.
_NOT_MAIN = ("itemListElement", "item", "isRelatedTo", "isSimilarTo", "isAccessoryOrSparePartFor",
             "isConsumableFor")  # fmt: skip
_NOT_MAIN_FROM_CONTENT = ("about", "mentions", "itemReviewed")
_GTIN_KEYS = ("gtin13", "gtin12", "gtin8", "gtin14", "gtin", "isbn")
MAX_VARIANTS = 500


@dataclass(slots=True, frozen=True)
class Verdict:
    kind: Literal["product", "none", "veto"]
    node: dict[str, Any] | None = None


NONE = Verdict("none")
VETO = Verdict("veto")


# --- which entity ---------------------------------------------------------------------------


def select_main(forest: Forest, page_urls: set[str], titles: tuple[str, ...] = ()) -> Verdict:
    """The main product of one source's node forest, or why there is none. ``titles`` are
    what the page calls its subject (its ``<h1>``, ``og:title``): among several candidates,
    the one they name is the main one (recommendation sliders carry their own products)."""
    index = forest.index
    roots = [r for r in (resolve(r, index) for r in forest.roots) if isinstance(r, dict)]
    for root in roots:
        kinds = types_of(root)
        if not any(k.endswith("page") for k in kinds):
            continue
        main = resolve(first(root.get("mainEntity")), index)
        if isinstance(main, dict):
            main_kinds = types_of(main)
            if main_kinds & PRODUCT_TYPES:
                return Verdict("product", main)
            if main_kinds & NOT_PRODUCT_PAGES:
                return VETO
    candidates = [r for r in roots if types_of(r) & PRODUCT_TYPES]
    if any(isinstance(c.get("@id"), str) for c in candidates):
        excluded = _referenced_ids(roots, index)
        candidates = [c for c in candidates if c.get("@id") not in excluded]
    candidates = _fold_variants(candidates, index)
    candidates = _dedupe(candidates)
    if len(candidates) > 1:  # an empty second node (a template's stub) is no candidate
        candidates = [c for c in candidates if not _is_empty(c)] or candidates[:1]
    if len(candidates) > 1:
        candidates = [_same_name_group(candidates)] if _one_name(candidates) else candidates
    if len(candidates) == 1:
        return Verdict("product", candidates[0])
    if len(candidates) > 1:
        matching = [c for c in candidates if node_urls(c) & page_urls]
        if len(matching) == 1:
            return Verdict("product", matching[0])
        # Microdata/RDFa tiles inside a recommendations block are not of equal standing.
        untiled = [c for c in candidates if not c.get(TILE)]
        if len(untiled) == 1:
            return Verdict("product", untiled[0])
        named = _named_by(untiled or candidates, titles)
        return Verdict("product", named) if named is not None else NONE
    if forest.broken == 0 and any(types_of(r) & (NOT_PRODUCT_PAGES - {"itemlist"}) for r in roots):
        return VETO
    return NONE


def _referenced_ids(roots: list[dict[str, Any]], index: dict) -> set[str]:
    """``@id``s that list members, related products or the subjects of articles point at."""
    out: set[str] = set()
    stack: list[tuple[Any, int]] = [(r, 0) for r in roots]
    while stack:
        node, depth = stack.pop()
        if depth > 32:
            continue
        if isinstance(node, list):
            stack.extend((n, depth + 1) for n in node[:MAX_VARIANTS])
            continue
        if not isinstance(node, dict) or "breadcrumblist" in types_of(node):
            continue  # a breadcrumb's last crumb is the product itself
        is_page = any(k.endswith("page") for k in types_of(node))
        props = _NOT_MAIN if is_page else _NOT_MAIN + _NOT_MAIN_FROM_CONTENT
        for prop in props:
            for ref in as_list(node.get(prop)):
                if isinstance(ref, dict):
                    target = ref.get("item") if "listitem" in types_of(ref) else ref
                    for t in (ref, target):
                        if isinstance(t, dict) and isinstance(t.get("@id"), str):
                            out.add(t["@id"])
                        elif isinstance(t, str):
                            out.add(t)
        stack.extend((v, depth + 1) for v in node.values() if isinstance(v, dict | list))
    return out


def _fold_variants(candidates: list[dict[str, Any]], index: dict) -> list[dict[str, Any]]:
    groups = [c for c in candidates if "productgroup" in types_of(c)]
    if not groups:
        return candidates
    variant_ids: set[str] = set()
    variant_objs: set[int] = set()
    group_ids = {g.get("@id") for g in groups if isinstance(g.get("@id"), str)}
    group_keys = {str(first(g.get("productGroupID"))) for g in groups if g.get("productGroupID")}
    for group in groups:
        for variant in as_list(group.get("hasVariant")):
            variant_objs.add(id(variant))
            if isinstance(variant, dict) and isinstance(variant.get("@id"), str):
                variant_ids.add(variant["@id"])

    def is_variant(node: dict[str, Any]) -> bool:
        if node in groups:
            return False
        parent = first(node.get("isVariantOf"))
        parent_id = parent.get("@id") if isinstance(parent, dict) else parent
        return (
            id(node) in variant_objs
            or node.get("@id") in variant_ids
            or parent_id in group_ids
            or (parent is not None and resolve(parent, index) in groups)
            or str(first(node.get("inProductGroupWithID"))) in group_keys
        )

    return [c for c in candidates if not is_variant(c)]


def _is_empty(node: dict[str, Any]) -> bool:
    """A node that describes nothing: no name, no offers, no identifier."""
    keys = ("name", "offers", "sku", "gtin13", "gtin", "mpn", "productID", "hasVariant")
    return not any(node.get(k) for k in keys)


def _one_name(candidates: list[dict[str, Any]]) -> bool:
    names = {(_text(c.get("name")) or "").casefold() for c in candidates}
    urls = {u for c in candidates for u in node_urls(c)}
    return len(names) == 1 and "" not in names and len(urls) <= 1


def _same_name_group(candidates: list[dict[str, Any]]) -> dict[str, Any]:
    """Top-level products that share one name (and page) are the sizes or colours of one
    product: a group whose variants they are, so its price and stock come from all of them."""
    lead = candidates[0]
    group = {k: v for k, v in lead.items() if k not in _VARIANT_KEYS}
    group["@type"] = "ProductGroup"
    group["hasVariant"] = candidates
    return group


_VARIANT_KEYS = ("@type", "@id", "sku", "mpn", "gtin", "gtin8", "gtin12", "gtin13", "gtin14",
                 "productID", "offers", "color", "size")  # fmt: skip


def _named_by(candidates: list[dict[str, Any]], titles: tuple[str, ...]) -> dict[str, Any] | None:
    """The one candidate whose name is the page's title."""
    wanted = [" ".join(t.split()).casefold() for t in titles if t and t.strip()]
    if not wanted:
        return None
    named = []
    for node in candidates:
        name = (_text(node.get("name")) or "").casefold()
        if name and any(name == w or (len(name) > 8 and name in w) for w in wanted):
            named.append(node)
    return named[0] if len(named) == 1 else None


def _dedupe(candidates: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One product emitted twice (a plugin and the theme) is still one product."""
    seen: dict[tuple, dict[str, Any]] = {}
    for node in candidates:
        ident = _text(node.get("sku")) or _text(node.get("@id")) or _text(node.get("name"))
        key = (ident, _text(node.get("url")))
        if key not in seen or len(node) > len(seen[key]):
            seen[key] = node
    return list(seen.values())


def names_another_page(node: dict[str, Any], page_urls: set[str], titles: tuple[str, ...]) -> bool:
    """A lone product whose URL is another page's and whose name is not this page's title:
    the one card of a listing's last page, marked up as a product (PrestaShop's
    ``product-container itemscope``, its ``<a itemprop="url">`` the card's link)."""
    urls = node_urls(node)
    return bool(urls) and not urls & page_urls and _named_by([node], titles) is None


def node_urls(node: dict[str, Any]) -> set[str]:
    out = set()
    for raw in (first(node.get("url")), node.get("@id")):
        if isinstance(raw, str) and raw.startswith("http"):
            canon = canonicalize(raw)
            if canon:
                out.add(canon)
    return out


# --- merging sources -----------------------------------------------------------------------


def merge(levels: list[Fields], *, decided: int) -> Fields:
    """Fields of ``levels[decided]``, filled by lower levels that describe the same product."""
    out = dict(levels[decided])
    for lower in levels[decided + 1 :]:
        if not lower or not same_product(out, lower):
            continue
        for key, value in lower.items():
            out.setdefault(key, value)
    return out


def same_product(a: Fields, b: Fields) -> bool:
    """The first identifier both carry agrees; without one, neither name contradicts the other."""
    for key in ("gtin", "sku", "mpn"):
        if key in a and key in b:
            return a[key].lstrip("0").casefold() == b[key].lstrip("0").casefold()
    # Names compared by their letters and digits: "VADHOLMA Rack - black" is the title
    # "VADHOLMA<br>Rack, black" shown as text. Or by their words: an og:title is often the
    # shown title shortened ("Charter Club Cashmere Crewneck Sweater" for "Charter Club
    # Women's 100% Cashmere Crewneck Sweater, Created for Macy's").
    name_a, name_b = _letters(a.get("name", "")), _letters(b.get("name", ""))
    if not (name_a and name_b) or name_a in name_b or name_b in name_a:
        return True
    words_a, words_b = _words(a["name"]), _words(b["name"])
    return words_a <= words_b or words_b <= words_a


def _letters(text: str) -> str:
    return _NOT_ALNUM.sub("", text.casefold())


def _words(text: str) -> set[str]:
    return set(_NOT_ALNUM.split(text.casefold())) - {""}


_NOT_ALNUM = re.compile(r"[\W_]+")  # \w is str.isalnum() and "_"


# --- fields of one entity ------------------------------------------------------------------


def node_fields(node: dict[str, Any], index: dict, page_url: str | None = None) -> Fields:
    """Product fields of one schema.org node (JSON-LD, microdata or RDFa). The price and
    stock are those of the variant ``page_url`` selects (``?variant=…``), if it selects one."""
    out: Fields = {}
    is_group = "productgroup" in types_of(node)
    variants = [
        v
        for v in (resolve(v, index) for v in as_list(node.get("hasVariant")))
        if isinstance(v, dict)
    ]
    _put(out, "name", _text(node.get("name")))
    sku = _ident(node.get("sku")) or _ident(node.get("productID"))
    if is_group:
        sku = _ident(node.get("productGroupID")) or sku
    _put(out, "sku", sku or _offers_sku(node.get("offers"), index))
    _put(out, "gtin", next((g for g in (_ident(node.get(k)) for k in _GTIN_KEYS) if g), None))
    _put(out, "mpn", _ident(node.get("mpn")))
    _put(out, "brand", _brand(node.get("brand"), index))
    _put(out, "url", _url(node.get("url"), index))
    _put(out, "image", _image(node.get("image"), index))
    terms = offer_terms(node.get("offers"), index)
    for variant in variants[:MAX_VARIANTS]:
        terms.extend(offer_terms(variant.get("offers"), index))
    best, availability = best_offer(terms)
    chosen = selected_terms(as_list(node.get("offers")), variants, index, page_url)
    chosen = chosen or _offer_of_sku(node.get("offers"), index, sku)
    if chosen:
        chosen_best, chosen_availability = best_offer(chosen)
        best = chosen_best or best
        availability = chosen_availability or availability
    if best is not None:
        out["price"] = format_price(best[0])
        _put(out, "currency", best[1])
        top = range_top(terms, node.get("offers"), index) if not chosen else None
        if top is not None and top > best[0]:
            # A "from" price: the lowest of a range (sizes, sellers, an AggregateOffer). The
            # buy box may show the default offer's, within the range (``crosscheck``).
            out[RANGE_TOP] = format_price(top)
    _put(out, "availability", availability)
    for variant in variants[:MAX_VARIANTS]:  # a group's shared facts may live on its variants
        _put(out, "brand", out.get("brand") or _brand(variant.get("brand"), index))
        _put(out, "image", out.get("image") or _image(variant.get("image"), index))
    return out


def _offer_of_sku(offers: object, index: dict, sku: str | None) -> list[Term]:
    """The terms of the one offer, among offers of several skus, whose sku is the product's
    own: the variant the page shows (Notino's 50 ml of a 30/50/100 ml perfume)."""
    if not sku:
        return []
    skus: dict[str, dict[str, Any]] = {}
    for offer in as_list(offers)[:MAX_VARIANTS]:
        offer = resolve(offer, index)
        code = _ident(offer.get("sku")) if isinstance(offer, dict) else None
        if code:
            skus.setdefault(code, offer)
    if len(skus) < 2 or sku not in skus:
        return []
    return offer_terms(skus[sku], index)


def _offers_sku(offers: object, index: dict) -> str | None:
    """The sku the product's offers carry, when it has none of its own and they agree on
    one (schema.org allows it on an Offer; Squarespace writes it there). Offers with
    several skus are variants': none of them is the product's."""
    skus = set()
    for offer in as_list(offers)[:MAX_VARIANTS]:
        offer = resolve(offer, index)
        if isinstance(offer, dict):
            skus.add(_ident(offer.get("sku")))
    skus.discard(None)
    return skus.pop() if len(skus) == 1 else None


def _brand(value: object, index: dict) -> str | None:
    value = resolve(first(value), index)
    text = _text(value.get("name")) if isinstance(value, dict) else _text(value)
    return clean_brand(text)


# Template placeholders left in the markup ("$metabrand", "{{ brand }}", "%brand%").
_PLACEHOLDER = re.compile(r"^\$[a-z_]|\{\{|\}\}|\$\{|<%|%[a-z_]+%|\[\[", re.I)
_NO_BRAND = frozenset({"undefined", "null", "none", "n/a", "na", "brand", "generic", "-"})
# "See more from brand: X", "Ver mais artigos da Marca: X": a link's words around the brand.
_BRAND_LEAD = re.compile(
    r"^.{0,60}\b(?:brand|marca|marke|marque|merk|marka|značka|бренд|бренда|производитель)\b"
    r"[^:]{0,20}:\s*(.+)$",
    re.I,
)


def clean_brand(text: str | None) -> str | None:
    """A brand name, or None for markup junk (placeholders, URLs, "see more from …")."""
    if not text or text.startswith(("http://", "https://", "/")) or _PLACEHOLDER.search(text):
        return None
    lead = _BRAND_LEAD.match(text)
    if lead:
        text = lead.group(1).strip()
    return None if text.casefold() in _NO_BRAND else text


def _image(value: object, index: dict) -> str | None:
    value = resolve(first(value), index)
    if isinstance(value, dict):
        value = first(value.get("url")) or first(value.get("contentUrl")) or value.get("@id")
    return _text(value)


def _url(value: object, index: dict) -> str | None:
    value = resolve(first(value), index)
    if isinstance(value, dict):
        value = value.get("@id") or first(value.get("url"))
    return _text(value)


def _text(value: object) -> str | None:
    value = first(value)
    if isinstance(value, dict):
        value = value.get("@value")
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int | float | Decimal):
        return _ident(value)
    if not isinstance(value, str):
        return None
    if "&" in value:
        value = html.unescape(value)
    text = " ".join(value.split())
    return text or None


def _ident(value: object) -> str | None:
    value = first(value)
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if isinstance(value, int | float) and not isinstance(value, bool):
        return str(value)
    return _text(value) if isinstance(value, str) else None


def _put(out: Fields, key: str, value: str | None) -> None:
    if value:
        out[key] = value
