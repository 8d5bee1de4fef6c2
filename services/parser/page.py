"""The parser's entry point: one payload → the page's product (if it is a product page) + links.

The HTML is parsed once into a lexbor tree that every extractor shares. Each extractor runs
under its own guard, so a page whose microdata trips a bug still yields its JSON-LD product
and its links; ``parse_page`` itself never raises.

The product: the first source that names one main product decides (JSON-LD > microdata >
RDFa > OpenGraph > the visible layout > the source's CSS fields), lower sources fill what it
lacks (``product.merge``), what the page shows is checked against it (``crosscheck``), and
the product says which source found it and how sure the parse is. A listing's page
(``listing``) has none.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from typing import Any, TypeVar

import msgspec
from selectolax.lexbor import LexborHTMLParser, LexborNode

from schemas.messages import Link, Product
from schemas.source import Source
from services.parser.availability import normalize_availability
from services.parser.crosscheck import Checked, crosscheck
from services.parser.decode import decode_html_utf8
from services.parser.jsonld import Forest
from services.parser.jsonld import extract as extract_jsonld
from services.parser.links import Rules, extract_links
from services.parser.listing import is_shop_page, reached_as_listing
from services.parser.markup import Markup
from services.parser.metatags import Fields, extract_metatags, og_fields
from services.parser.microdata import extract_microdata, extract_rdfa
from services.parser.nesting import too_deep
from services.parser.pickers import read_pickers
from services.parser.prices import format_price, normalize_currency, price_and_currency
from services.parser.product import merge, names_another_page, node_fields, node_urls, select_main
from services.parser.variants import expand as expand_variants
from services.parser.visible import (
    Visible,
    find_buttons,
    read_disabled_sold_out,
    read_gone_notice,
    read_selling,
    read_stock_label,
    read_visible,
    shown_only_in_cards,
)
from shared.metrics import Counter
from shared.urls import canonicalize

log = logging.getLogger(__name__)
# Extraction steps that raised, by step: the page keeps what the other steps found. Module-level
# because parse_page is a plain function (replay and the CLI call it too); the parser service
# exports it (trawl_parser_extractor_errors_total, and extractor_errors in its stats).
EXTRACTOR_ERRORS = Counter(
    "trawl.parser.extractor_errors",
    "Extraction steps that raised on a page (its other steps still count), by extractor.",
    unit="{error}",
)
T = TypeVar("T")

MAX_BODY = 20 * 1024 * 1024
_NOT_HTML = ("image/", "audio/", "video/", "font/", "application/pdf", "application/zip")
_FIELD_NAMES = ("sku", "gtin", "mpn", "name", "brand", "price", "sale_price", "currency",
                "availability", "url", "image")  # fmt: skip


class PageParse(msgspec.Struct, frozen=True):
    product: Product | None
    links: list[Link]
    variants: list[Product] = []  # the product's sizes/colours, each a row of its own


def parse_page(
    body: bytes,
    url: str,
    *,
    content_type: str | None = None,
    source: Source | None = None,
    kind: str | None = None,
) -> PageParse:
    """Extract the page's main product and its classified links; never raises. ``kind`` is
    how the page was reached (a ``pagination`` page is a listing: it has no product)."""
    decoded = _guard("decode", url, lambda: _tree(body, content_type))
    if decoded is None:
        return PageParse(product=None, links=[])
    tree, text, markup = decoded
    # <base href> and <link rel href> (the canonical URL, rel=next/prev): one walk for all.
    heads = _guard("links", url, lambda: tree.css("base[href], link[rel][href]")) or []
    base = _guard("base", url, lambda: _base_url(heads, url)) or url
    heads = [node for node in heads if node.tag == "link"]
    # Every <script> in one walk, for the JSON-LD reader and the load-more scan alike.
    scripts = _guard("scripts", url, lambda: tree.css("script"))
    forest = _guard("jsonld", url, lambda: extract_jsonld(tree, scripts)) or Forest()
    found = _guard(
        "product", url, lambda: _product(tree, text, markup, url, base, forest, source, kind, heads)
    )
    product, variants = found if found is not None else (None, [])
    rules = _guard("rules", url, lambda: Rules.build(source, url))
    links = (
        _guard(
            "links",
            url,
            lambda: _links(tree, text, markup, url, base, rules, forest, heads, scripts),
        )
        if rules
        else None
    )
    return PageParse(product=product, links=links or [], variants=variants)


def _links(
    tree: LexborHTMLParser,
    text: str,
    markup: Markup,
    url: str,
    base: str,
    rules: Rules,
    forest: Forest,
    heads: list[LexborNode],
    scripts: list[LexborNode] | None,
) -> list[Link]:
    return extract_links(
        tree,
        page_url=url,
        base_url=base,
        rules=rules,
        forest=forest,
        html=text,
        heads=heads,
        scripts=scripts,
        markup=markup,
    )


def _guard(step: str, url: str, fn: Callable[[], T]) -> T | None:
    try:
        return fn()
    except Exception as exc:  # one broken extractor must not cost the page; logged for the fix
        EXTRACTOR_ERRORS.add(1, (("extractor", step),))
        log.warning(
            "extractor %s failed on %s: %r",
            step,
            url,
            exc,
            exc_info=True,
            extra={"action": "extractor_failed", "extractor": step, "url": url, "error": repr(exc)},
        )
        return None


def _tree(body: bytes, content_type: str | None) -> tuple[LexborHTMLParser, str, Markup] | None:
    """The page's tree, its text and its markup (what lexbor parsed: substring tests on it
    tell a reader which queries cannot match)."""
    if not isinstance(body, bytes | bytearray | memoryview):
        return None
    mime = (content_type or "").split(";", 1)[0].strip().lower()
    if mime.startswith(_NOT_HTML):
        return None
    raw = bytes(body[:MAX_BODY])
    text, exact = decode_html_utf8(raw, content_type)
    # On exact UTF-8 the bytes say it at memchr speed (the text may be two bytes a character).
    if (b"\x00" in raw) if exact else ("\x00" in text):
        text, exact = text.replace("\x00", ""), False
    if too_deep(text):
        log.info("page nested too deep; not parsed", extra={"action": "parse_too_deep"})
        return None
    # lexbor parses UTF-8: bytes that are the text's UTF-8 already spare encoding it again.
    parsed = raw if exact else text.encode("utf-8", "ignore")  # as selectolax encodes text
    return LexborHTMLParser(parsed), text, Markup(parsed)


def _base_url(heads: list[LexborNode], url: str) -> str:
    """The first ``<base href>`` of ``heads`` (the page's ``base[href]`` and
    ``link[rel][href]``) resolved, else ``url``."""
    node = next((node for node in heads if node.tag == "base"), None)
    href = node.attributes.get("href") if node is not None else None
    return (canonicalize(href, url) if href else None) or url


def _product(
    tree: LexborHTMLParser,
    text: str,
    markup: Markup,
    url: str,
    base: str,
    forest: Forest,
    source: Source | None,
    kind: str | None,
    heads: list[LexborNode],
) -> tuple[Product | None, list[Product]]:
    canonical = _canonical(heads, base)
    page_urls = {u for u in (canonicalize(url), canonical) if u}
    # A listing's page has no product; only a structured product that names this very page
    # as its URL overrides that (a product page reached through a mis-classified link).
    listing = reached_as_listing(url, kind, source) or is_shop_page(url)
    meta = _guard("metatags", url, lambda: extract_metatags(tree))
    heading = meta.first("og:title") if meta is not None else None
    heading = heading or _page_title(tree)
    shown = (
        _guard(
            "visible",
            url,
            lambda: read_visible(
                tree, title_hint=heading, markup=markup, page_urls=page_urls, base=base
            ),
        )
        or Visible()
    )
    titles = tuple(t for t in (shown.name, heading) if t)
    levels: list[tuple[str, Fields]] = []
    decided: int | None = None
    veto = listing
    structured: tuple[dict[str, Any], dict[str, Any]] | None = None  # the deciding node, index
    for name, extract in (
        ("jsonld", lambda: forest),
        ("microdata", lambda: extract_microdata(tree, markup)),
        ("rdfa", lambda: extract_rdfa(tree, markup)),
    ):
        found = _guard("structured", url, extract)
        verdict = select_main(found, page_urls, titles) if found is not None else None
        if (
            verdict is not None
            and verdict.node is not None
            and names_another_page(verdict.node, page_urls, titles)
        ):
            verdict = None  # a card's markup (microdata and RDFa mark elements, cards too)
        if listing and verdict is not None and verdict.node is not None:
            if not node_urls(verdict.node) & page_urls:
                verdict = None
            else:
                veto = False
        fields: Fields = {}
        if verdict is not None and verdict.kind == "product" and verdict.node is not None:
            fields = node_fields(verdict.node, found.index, url)  # type: ignore[union-attr]
            if decided is None and not veto:
                decided = len(levels)
                structured = (verdict.node, found.index)  # type: ignore[union-attr]
        elif verdict is not None and verdict.kind == "veto" and decided is None:
            veto = True
        levels.append((name, fields))
    levels.append(("opengraph", og_fields(meta) if meta is not None and meta.is_product else {}))
    if decided is None and not veto and levels[-1][1]:
        decided = len(levels) - 1
    # Buy controls cost walks of the tree: looked for only when a layout could be a product's,
    # or for an OpenGraph product that says no stock state (its buy box may say sold out) or
    # no price: og:type=product is what some shops put on every page, categories too, and a
    # page whose only buy controls are its cards' (a category's last page) is no product's.
    by_og = decided == len(levels) - 1
    unstated = by_og and not any("availability" in f for _, f in levels)
    unpriced = by_og and "price" not in levels[-1][1]
    if (
        (decided is None or unstated or unpriced)
        and not veto
        and not listing
        and (shown.name or unpriced)
        and (shown.price is not None or unstated or unpriced)
    ):
        _guard("buttons", url, lambda: find_buttons(tree, shown, page_urls, base, markup))
    if unpriced and shown.carded and not shown.closed_box:
        decided = None
    by_layout = decided is None and not veto and not listing and shown.is_product_layout
    if (
        (decided is not None or by_layout)
        and shown.stock is None
        and not any("availability" in level for _, level in levels)
    ):
        # A product without a state, structured or marked: a labelled one ("Availability:
        # Out Of Stock"), read only here, where it is a product's (a scan of the markup)
        _guard("stock label", url, lambda: read_stock_label(shown, markup))
    stated = levels[decided][1].get("availability") if decided is not None else None
    state = normalize_availability(stated)
    if (structured is not None and state == "in_stock") or (decided is not None and not state):
        # In stock by its structured data, or no state from it (an OpenGraph product, a
        # JSON-LD block too broken to read), and no state marked on the page: a disabled
        # button that says sold out is the page's word (read before the visible level is
        # taken).
        _guard(
            "sold out", url, lambda: read_disabled_sold_out(tree, shown, page_urls, base, markup)
        )
    if structured is not None and state in ("out_of_stock", "discontinued"):
        # Gone by its structured data while the page's stock element says in stock: whether
        # the page sells it is its buy controls' word.
        _guard("selling", url, lambda: read_selling(tree, shown, page_urls, base, markup))
    if (decided is not None or by_layout) and state in ("in_stock", "limited", None):
        # Still no state on the page: a notice that the item is gone (a sold or expired ad,
        # a withdrawn product), or a notify control where the buy button was.
        _guard("gone", url, lambda: read_gone_notice(tree, shown, page_urls, base, markup))
    levels.append(("visible", shown.fields()))
    if by_layout:
        decided = len(levels) - 1
    custom = _css_fields(tree, source) if source is not None and source.fields else {}
    if decided is None:
        if listing or not (custom and _source_says_product(tree, url, source)):
            return None, []
        levels.append(("css", {}))
        decided = len(levels) - 1
    fields = merge([level for _, level in levels], decided=decided)
    found_by = levels[decided][0]
    checked = crosscheck(
        fields,
        found_by,
        shown,
        html=text,
        urls=(canonical, url),
        in_cards=lambda code: shown_only_in_cards(tree, code, page_urls, base, shown.title),
    )
    fields.update(custom)
    og_url = meta.first("og:url") if meta is not None else None
    product = _to_product(
        fields,
        canonical=canonical if "url" not in custom else None,
        og_url=og_url,
        url=url,
        base=base,
        checked=checked,
    )
    if product is None:
        return None, []
    variants: list[Product] | None = None
    if structured is not None:
        node, index = structured
        variants = _guard("variants", url, lambda: expand_variants(node, index, product, base))
    if not variants:  # no structured variants: the page's visible picker may show them
        variants = _guard("pickers", url, lambda: read_pickers(tree, product, base, markup))
    return product, variants or []


def _page_title(tree: LexborHTMLParser) -> str | None:
    node = tree.css_first("title")
    return node.text(deep=True) if node is not None else None


def _to_product(
    fields: Fields,
    *,
    canonical: str | None,
    og_url: str | None,
    url: str,
    base: str,
    checked: Checked,
) -> Product | None:
    # canonical > the chosen source's url > og:url (whatever source was chosen) > fetched URL
    page_url = (
        canonical
        or canonicalize(fields.get("url") or "", base)
        or canonicalize(og_url or "", base)
        or canonicalize(url)
        or url.partition("#")[0]
    )
    image = canonicalize(fields["image"], base) if fields.get("image") else None
    sku = fields.get("sku")
    key = sku or fields.get("gtin") or fields.get("mpn") or page_url
    if not key:
        return None
    availability = normalize_availability(fields.get("availability"))
    return Product(
        key=key,
        sku=sku,
        gtin=fields.get("gtin"),
        mpn=fields.get("mpn"),
        name=fields.get("name"),
        brand=fields.get("brand"),
        price=fields.get("price"),
        sale_price=fields.get("sale_price"),
        currency=fields.get("currency"),
        availability=availability,
        url=page_url,
        image=image or fields.get("image"),
        attributes=checked.attributes,
        found_by=checked.found_by,
        confidence=checked.confidence,
    )


def _canonical(heads: list[LexborNode], base: str) -> str | None:
    """The first ``<link rel=canonical>`` of ``heads`` (the page's ``link[rel][href]``)."""
    for node in heads:
        attrs = node.attributes
        if "canonical" in (attrs.get("rel") or "").lower().split():
            return canonicalize(attrs.get("href") or "", base)
    return None


def _css_fields(tree: LexborHTMLParser, source: Source) -> Fields:
    """The source's own selectors: they override every other source of a field."""
    out: Fields = {}
    for name, rule in source.fields.items():
        if name not in _FIELD_NAMES:
            continue
        try:
            node = tree.css_first(rule.css)
        except Exception:
            continue
        if node is None:
            continue
        raw = node.attributes.get(rule.attr) if rule.attr else node.text(deep=True, separator=" ")
        value = " ".join((raw or "").split())
        if not value:
            continue
        if name in ("price", "sale_price"):
            price, currency = price_and_currency(value)
            if price is None:
                continue
            value = format_price(price)
            if currency and "currency" not in source.fields:
                out.setdefault("currency", currency)
        elif name == "currency":
            value = normalize_currency(value) or value
        elif name == "availability":
            value = normalize_availability(value) or "unknown"
        out[name] = value
    return out


def _source_says_product(tree: LexborHTMLParser, url: str, source: Source | None) -> bool:
    """Without markup, the source's rules decide: its product URL pattern or a unique title."""
    if source is None:
        return False
    rule = source.links.product
    if rule is not None and rule.pattern:
        try:
            if re.search(rule.pattern, url):
                return True
        except re.error:
            pass
    for name in ("name", "price"):
        field = source.fields.get(name)
        if field is not None:
            try:
                if len(tree.css(field.css)) == 1:
                    return True
            except Exception:
                continue
    return False
