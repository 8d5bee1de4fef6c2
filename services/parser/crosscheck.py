"""The chosen fields checked against what the page shows, and how sure the result is.

Structured data is what a shop's platform emits; the page is what its shopper sees. Where
they disagree in a known way, the page wins:

- **Sale price.** The structured price is shown struck through or as the old/regular price,
  beside a lower current price: the lower one is what the shopper pays.
- **Displayed price.** The buy box never shows the structured price at all (an auction's
  starting price beside the current bid, a feed price gone stale): the shown price holds,
  and the conflict is reported.
- **Stock.** The buy box says sold out / unavailable while the structured data says in
  stock: out of stock, with the conflict reported (``attributes["conflict"]``) and the
  confidence lowered. The other way round (an enabled buy button, structured OutOfStock) is
  only reported: a hidden template button proves nothing.
- **Currency.** A price shown with a symbol several currencies share ("$", "kr", "Rs",
  "元") is in the currency of the shop's country domain (``.com.ar`` pesos, ``.se`` crowns),
  unless the structured data names another.
- **Identifiers.** The code the page shows beside a label ("Product code", "Art.-Nr.", …) is
  the ``sku``; a different structured ``sku`` (often an internal id) is kept as the
  ``structured_sku`` attribute. A labelled model number or EAN fills ``mpn``/``gtin`` when
  the structured data has none. With no ``sku`` at all, a marketplace URL's item id is used.
  Of several labelled codes, one shown only in cards of other products (a related row's
  "Art.-Nr. 770-120") is theirs, not the page's (``in_cards``).

Confidence starts from how the product was found (JSON-LD 0.9 … visible layout 0.5) and drops
for a missing price, a missing identifier and each conflict. Below ``schemas.messages.CONFIDENT``
the parse of the page says too little to count a miss or an out-of-stock against the product.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from decimal import Decimal

from services.parser.availability import normalize_availability
from services.parser.identifiers import labelled_codes, shows_code, url_item_id
from services.parser.metatags import Fields
from services.parser.prices import RANGE_TOP, currency_of_shop, format_price, parse_price
from services.parser.visible import Visible
from shared.urls import host_of

_BASE = {
    "jsonld": 0.9,
    "microdata": 0.85,
    "rdfa": 0.8,
    "css": 0.85,
    "opengraph": 0.65,
    "visible": 0.55,
}
_STRUCTURED = ("jsonld", "microdata", "rdfa", "opengraph")
_AVAILABLE = ("in_stock", "limited", "preorder", "backorder")
_GTIN_DIGITS = (8, 12, 13, 14)
_CODES_ASKED = 3  # labelled codes asked whether they are cards' (a walk of the tree each)


@dataclass(slots=True)
class Checked:
    found_by: str
    confidence: float
    attributes: dict[str, str] = field(default_factory=dict)


def crosscheck(
    fields: Fields,
    found_by: str,
    shown: Visible,
    *,
    html: str,
    urls: tuple[str | None, ...],
    in_cards: Callable[[str], bool] | None = None,
) -> Checked:
    """Apply the page-wins rules to ``fields`` (in place) and rate the result. ``in_cards``:
    whether a text is shown only in cards of other products (asked of a labelled code before
    it is taken)."""
    conflicts: list[str] = []
    attributes: dict[str, str] = {}
    top = parse_price(fields.pop(RANGE_TOP, None))
    if found_by in _STRUCTURED:
        _price(fields, shown, conflicts, top)
        _stock(fields, shown, conflicts)
    _identifiers(fields, html, urls, attributes, in_cards or _nowhere)
    _currency(fields, shown, urls)
    confidence = _BASE.get(found_by, 0.5)
    if "price" not in fields:
        confidence -= 0.2
    if not any(k in fields for k in ("sku", "gtin", "mpn")):
        confidence -= 0.05
    confidence -= 0.15 * len(conflicts)
    if conflicts:
        attributes["conflict"] = "; ".join(conflicts)
    return Checked(found_by, round(min(1.0, max(0.0, confidence)), 2), attributes)


def _price(fields: Fields, shown: Visible, conflicts: list[str], top: Decimal | None) -> None:
    """``top``: the top of the range when the structured price is its lowest ("from")."""
    structured = parse_price(fields.get("price"))
    if structured is None or shown.price is None or shown.price == structured:
        return
    if structured in shown.old_prices:
        # A sale: the regular price is shown struck through or labelled ("MRP: ₹649"), the
        # price after it is paid, whether or not its element is marked as a price.
        if shown.price < structured:
            fields["price"] = format_price(shown.price)
        return
    if not shown.price_marked:  # an amount read without price markup never overrides
        return
    if top is not None and structured < shown.price <= top:
        # The structured price is the lowest of a range (a used offer, a sold-out size's),
        # the buy box shows the default offer's, within it: the one a shopper pays.
        fields["price"] = format_price(shown.price)
        return
    if not shown.shows(structured):
        # The page never shows the structured price (a starting bid, a stale feed price):
        # the price it shows is the one that holds.
        shown_text, structured_text = format_price(shown.price), format_price(structured)
        conflicts.append(f"price: page {shown_text}, structured data {structured_text}")
        fields["price"] = format_price(shown.price)


def _currency(fields: Fields, shown: Visible, urls: tuple[str | None, ...]) -> None:
    """A price shown with a symbol several currencies share ("$", "kr", "元") is in the
    currency of the shop's country domain, unless the structured data names another."""
    if shown.symbol is None or shown.price is None:
        return
    if parse_price(fields.get("price")) != shown.price:
        return  # the price shown is not the product's
    if fields.get("currency") not in (None, shown.currency):
        return
    for url in urls:
        code = currency_of_shop(shown.symbol, host_of(url)) if url else None
        if code:
            fields["currency"] = code
            return


def _stock(fields: Fields, shown: Visible, conflicts: list[str]) -> None:
    structured = normalize_availability(fields.get("availability"))
    if shown.stock is None or structured is None or shown.stock == structured:
        return
    if shown.stock == "out_of_stock" and structured in _AVAILABLE:
        fields["availability"] = "out_of_stock"
        conflicts.append(f"availability: page out_of_stock, structured data {structured}")
    elif shown.stock == "in_stock" and structured not in _AVAILABLE:
        if shown.sells:
            # Its stock element says in stock beside a buy button in use: the structured
            # state is a store's (HORNBACH's availableAtOrFrom) or stale (Alza's feed)
            fields["availability"] = "in_stock"
        conflicts.append(f"availability: page in_stock, structured data {structured}")


def _nowhere(text: str) -> bool:
    return False


def _identifiers(
    fields: Fields,
    html: str,
    urls: tuple[str | None, ...],
    attributes: dict[str, str],
    in_cards: Callable[[str], bool],
) -> None:
    structured_sku = fields.get("sku")
    if structured_sku and shows_code(html, structured_sku):
        return  # the page shows the structured sku itself: it is the one buyers see
    codes = labelled_codes(html)
    # The structured sku shown beside a label anywhere (a set's own number among its parts'
    # numbers) stays; otherwise the first labelled code is the one the shop shows. With
    # several, the page shows other products' codes too (a related row's cards, each
    # labelled): the first one outside their cards (one walk of the tree each).
    skus = codes.skus if structured_sku not in codes.skus else []
    if len(skus) > 1:
        shown = next((code for code in skus[:_CODES_ASKED] if not in_cards(code)), None)
    else:
        shown = skus[0] if skus else None
    if shown is not None:
        if structured_sku:
            attributes["structured_sku"] = structured_sku
            if fields.get("mpn") == structured_sku:
                del fields["mpn"]  # the same internal id twice, not a manufacturer's number
        fields["sku"] = shown
    if "mpn" not in fields and codes.mpn:
        fields["mpn"] = codes.mpn
    gtin = codes.gtin
    if "gtin" not in fields and gtin and gtin.isdigit() and len(gtin) in _GTIN_DIGITS:
        fields["gtin"] = gtin
    if "sku" not in fields:
        for url in urls:
            item = url_item_id(url) if url else None
            if item:
                fields["sku"] = item
                break
