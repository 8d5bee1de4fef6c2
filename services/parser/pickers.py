"""Variants a page shows only in its picker: a ``<select>`` of sizes or colours, a list of
swatches or buttons, or radio buttons, whose options say which are sold out (``disabled``, a
"sold out" word, a class or ``data-`` attribute) or what each costs (``data-price``). Read only
when the structured data names no variants; each option becomes a variant row like the
structured ones (``variants._products``: keyed by its ``data-sku``, else its attribute, so
``<product>#size=M``).

A picker is known by its name (``name``, ``id``, ``class``, label or ``data-`` attributes on it
or, for swatches, on their container) naming a dimension: size, colour, style... in a dozen
languages, or by options that carry a sku, a variant id, a price or a stock figure. Never a
picker: a name that says quantity, sort order, country, currency, language or delivery, or
options that count 1, 2, 3... (a quantity). A select or swatch list without a name and without
such per-option data tells nothing and is left alone, as is every disabled option of a select
that is not a picker by its name or data.

Cost: one query of the tree (selects, radios and the few ``data-`` attributes swatches carry),
run only on product pages without structured variants; options are read inside their picker.
"""

from __future__ import annotations

import re
from decimal import Decimal
from functools import lru_cache

from selectolax.lexbor import LexborHTMLParser, LexborNode

from schemas.messages import Availability, Product
from services.parser.availability import normalize_availability
from services.parser.markup import Alternative, Markup, Query
from services.parser.metatags import Fields
from services.parser.prices import currency_in_text, format_price, parse_price
from services.parser.product import MAX_VARIANTS
from services.parser.variants import _products

# Names are matched as words (``attribute_pa_size``, ``sizeList``, ``Main Color:``), so that
# ``optional`` is no option and ``border`` no order.
_LETTER = "a-zà-ÿß"


def _words_rx(alternatives: str, suffix: str = "(?:e?s)?") -> re.Pattern[str]:
    return re.compile(f"(?<![{_LETTER}])(?:{alternatives}){suffix}(?![{_LETTER}])", re.I)


def _words(text: str) -> str:
    """``sizeList`` → ``size List``: camel case split into words."""
    return re.sub(r"([a-zà-ÿ])([A-Z])", r"\1 \2", text)


# What a picker's own name says it chooses → the attribute name.
_SIZE = (
    r"size|gr(ö|oe?)(ss|ß)e|taille|talla|taglia|tamanho|maat|rozmiar|razmer|サイズ|尺码|"
    r"width|length|fit"
)
_COLOUR = r"colou?r|farbe|couleur|colore|kleur|kolor|cor|färg|farve|カラー|颜色|shade|swatch"
_OPTION = (
    r"variant|variation|option|attribute|style|model|capacity|storage|flavou?r|edition|format|"
    r"version|ausf(ü|ue)hrung|variante"
)
_DIMENSIONS: tuple[tuple[re.Pattern[str], str], ...] = (
    (_words_rx(_SIZE), "size"),
    (_words_rx(_COLOUR), "colour"),
    (_words_rx(r"material|stoff|fabric"), "material"),
    (_words_rx(r"pattern|muster"), "pattern"),
    (_words_rx(_OPTION), "option"),
)
# Names that choose something else: quantity, sort order, country, currency, language, a
# payment plan, a warranty, a date...
_NOT_PICKER = _words_rx(
    r"qty|quantit[a-zé]*|menge|anzahl|cantidad|quantidade|ilo(ś|s)(ć|c)|aantal|sort[a-z]*|"
    r"order[a-z]*|country|countries|land|pays|pa(í|i)s|currenc[a-z]*|w(ä|a)hrung|devise|moneda|"
    r"lang[a-z]*|locale|region|ship[a-z]*|deliver[a-z]*|versand|liefer[a-z]*|store|rating|"
    r"per.?page|limit|view|page|date|day|time|month|year|gift.?wrap[a-z]*|subscri[a-z]*|"
    r"frequency|payment|pay|financ[a-z]*|warrant[a-z]*|guarantee|insurance|protection|"
    r"calculat[a-z]*|instal+ment|credit|deposit|down|term|rate|plan",
    suffix="s?",
)
_PLACEHOLDER = re.compile(
    r"^\s*(?:-+|choose|select|pick|please|w(ä|a)hle|bitte|choisi|s(é|e)lectionne|elige|"
    r"selecciona|scegli|seleziona|kies|selecteer|wybierz|escolha|selecione)",
    re.I,
)
_SOLD_OUT = re.compile(
    r"sold.?out|out.?of.?stock|unavailable|not available|no stock|ausverkauft|nicht "
    r"(?:verf(ü|ue)gbar|lieferbar|vorr(ä|a)tig)|(é|e)puis(é|e)|rupture|agotado|sin stock|"
    r"esaurit|non disponibile|uitverkocht|niet (?:leverbaar|beschikbaar)|niedost(ę|e)pn|"
    r"wyprzedan|brak|esgotado|indispon(í|i)vel|slutsåld|udsolgt|loppuunmyyty|品切れ|缺货|售罄",
    re.I,
)
_SOLD_OUT_CLASS = re.compile(r"sold.?out|out.?of.?stock|unavailable|disabled|not.?available", re.I)
_PREORDER = re.compile(r"pre.?order|vorbestell|pr(é|e).?commande|reserva", re.I)
_BACKORDER = re.compile(r"back.?order|nachbestell|on order", re.I)
_IN_STOCK = re.compile(
    r"in stock|on stock|em stock|en stock|auf lager|lieferbar|verf(ü|ue)gbar|disponible|"
    r"disponibile|dispon(í|i)vel|op voorraad|na stanie|available",
    re.I,
)
# What may be written after the option's label: "M - sold out", "XL (€24.99)", "L — 19,99 €".
_TRAILER = re.compile(r"\s*(?:[-–—|]\s*|\(|\[)[^-–—|(\[]*$")
_PRICE_TEXT = re.compile(r"\d[\d.,\s]*\d|\d")
_PREFIX = re.compile(r"^[^:]{1,30}:\s*")  # "Tamanho: XS" on every option
_COUNTING = re.compile(r"\d{1,3}")
_URL_VALUE = re.compile(r"https?://|/[^/\s]")

# The one query: pickers (selects, radios) and swatches (options with these data- attributes).
# Each ``[data-…]`` alternative costs the query about as much as a walk of its own, and most
# pages carry none or one of them: the query asks only for those the page's markup names.
_SWATCH_ATTRS = ("data-sku", "data-variant-id", "data-variant", "data-size", "data-color",
                 "data-colour", "data-option-value", "data-attribute-value")  # fmt: skip
_SWATCH_NAMES = re.compile(
    rb"data-(?:sku|variant-id|variant|size|colou?r|option-value|attribute-value)"
)
_PRICE_ATTRS = ("data-price", "data-variant-price", "data-price-amount", "data-amount")
_STOCK_ATTRS = ("data-stock", "data-available", "data-availability", "data-in-stock",
                "data-inventory", "data-inventory-quantity")  # fmt: skip
_DATA_HINTS = frozenset(("data-sku", "data-variant-id", "data-variant", *_PRICE_ATTRS,
                         *_STOCK_ATTRS))  # fmt: skip
_VARIANT_HINTS = frozenset(
    ("data-variant-id", "data-variant", "data-option-value", "data-attribute-value")
)
# Attributes of a picker (or a swatch list's container) that may name what it chooses.
_NAMING = frozenset({"name", "id", "class", "aria-label", "data-option-name",
                     "data-attribute_name", "data-name", "data-option", "title"})  # fmt: skip
_LABEL_ATTRS = ("data-size", "data-color", "data-colour", "data-option-value",
                "data-attribute-value", "data-value", "title", "aria-label", "value")  # fmt: skip


def read_pickers(
    tree: LexborHTMLParser, group: Product, base: str, markup: Markup | None = None
) -> list[Product]:
    """The variants the page's picker shows (none when it has no picker). ``markup``: the
    page's, when the caller has it (see ``_named``)."""
    selects: list[LexborNode] = []
    radios: dict[str, list[LexborNode]] = {}
    swatches: dict[int, tuple[LexborNode, list[LexborNode]]] = {}
    named = _named(markup)
    query = _QUERIES[named, _PICKERS.on(markup)]
    for node in tree.css(query) if query else []:
        tag = node.tag  # a property that decodes the name on every read
        if tag == "select":
            selects.append(node)
        elif tag == "input" and (node.attributes.get("type") or "").lower() == "radio":
            radios.setdefault(node.attributes.get("name") or "", []).append(node)
        elif tag != "option" and (parent := node.parent) is not None:
            swatches.setdefault(parent.mem_id, (parent, []))[1].append(node)
    candidates: list[tuple[str, list[_Option]]] = []
    for select in selects:
        options = [o for o in select.css("option") if not _placeholder(o)]
        candidates.append(_group(select, options, "", labelled=tree))
    for name, inputs in radios.items():
        candidates.append(_group(inputs[0], inputs, name, tree=tree))
    for parent, members in swatches.values():
        candidates.append(_group(parent, members, "", swatches=named))
    best = max((c for c in candidates if c[1]), key=_hinted, default=None)
    if best is None:
        return []
    dimension, chosen = best
    # Beside options marked sold out, an unmarked one is in stock: the picker offers it.
    marked = any(o.availability == "out_of_stock" for o in chosen)
    default = "in_stock" if marked else _as_group(group.availability)
    found = [o.fields(group, dimension, default) for o in chosen[:MAX_VARIANTS]]
    return _products(found, group, base)


def _named(markup: Markup | None) -> frozenset[str]:
    """The swatch attributes ``markup`` names: the others are on no element. (One regex
    over the markup costs about what one attribute alternative of the query does.)"""
    if markup is None:
        return _ALL_SWATCH_ATTRS
    named = set(_SWATCH_NAMES.findall(markup.lowered))
    return frozenset(a for a, written in _SWATCH_BYTES if written in named)


class _Queries(dict[tuple[frozenset[str], str], str]):
    """The query for pickers (those the page's markup allows) and for swatches that carry
    the key's attributes."""

    def __missing__(self, key: tuple[frozenset[str], str]) -> str:
        attrs, pickers = key
        query = self[key] = ", ".join(
            [*([pickers] if pickers else []), *(f"[{a}]" for a in _SWATCH_ATTRS if a in attrs)]
        )
        return query


# A page without a select or a radio button (their names and words missing from its markup)
# spares their alternatives.
_PICKERS = Query(
    Alternative("select", (b"select",)),
    Alternative("input[type=radio][name]", (b"input", b"type", b"name"), (b"radio",)),
)
_SWATCH_BYTES = tuple((a, a.encode()) for a in _SWATCH_ATTRS)
_ALL_SWATCH_ATTRS = frozenset(_SWATCH_ATTRS)
_QUERIES = _Queries()  # at most 3 x 2^8 selectors, one per set of attributes


class _Option:
    __slots__ = ("availability", "label", "price", "sku")

    def __init__(
        self, label: str, sku: str | None, price: Decimal | None, availability: Availability | None
    ) -> None:
        self.label = label
        self.sku = sku
        self.price = price
        self.availability = availability

    def fields(
        self, group: Product, dimension: str, default: Availability
    ) -> tuple[Fields, dict[str, str]]:
        fields: Fields = {"name": f"{group.name} ({self.label})" if group.name else self.label}
        if self.sku:
            fields["sku"] = self.sku
        price = _price_of(self.price, group)
        if price is not None:
            fields["price"] = price
        else:  # the product's own price, sale and all
            if group.price is not None:
                fields["price"] = group.price
            if group.sale_price is not None:
                fields["sale_price"] = group.sale_price
        fields["availability"] = self.availability or default
        return fields, {dimension: self.label}

    @property
    def hinted(self) -> bool:
        return self.sku is not None or self.price is not None or self.availability is not None


def _hinted(candidate: tuple[str, list[_Option]]) -> int:
    return sum(o.hinted for o in candidate[1])


def _as_group(availability: Availability | None) -> Availability:
    """An option the picker does not mark, when it marks none, is as available as the
    product."""
    return availability or "unknown"


def _price_of(price: Decimal | None, group: Product) -> str | None:
    if price is None:
        return None
    paid = parse_price(group.sale_price or group.price)
    # Minor units (Shopify's data-price="2499" for 24.99): a hundred times the product's price.
    if paid and price == price.to_integral_value() and price > 20 * paid:
        cents = price / 100
        if paid / 5 <= cents <= paid * 5:
            price = cents
    return format_price(price) if price > 0 else None


def _group(
    holder: LexborNode,
    members: list[LexborNode],
    name: str,
    *,
    swatches: frozenset[str] | None = None,
    tree: LexborHTMLParser | None = None,
    labelled: LexborHTMLParser | None = None,
) -> tuple[str, list[_Option]]:
    """(dimension, options) of one picker; no options when it is not one. ``swatches``: the
    members are swatches, and these the swatch attributes the page names. ``labelled``: look
    for the holder's ``<label for>`` (a select's) when its own attributes do not decide."""
    if len(members) < 2:
        return "", []
    attrs = holder.attributes
    own = " ".join(v for k, v in attrs.items() if v and k in _NAMING)
    refused, dimension = _naming(f"{name} {own} {_swatch_attr(members)}")
    if refused:
        return "", []
    if dimension is None and labelled is not None and (label := _label_for(holder, labelled)):
        # A tree query: only for the select its attributes leave open.
        refused, dimension = _naming(label)
        if refused:
            return "", []
    # Options that carry data of their own. Swatches need a variant's data: a row of product
    # tiles carries skus too.
    hints = _DATA_HINTS if swatches is None else _VARIANT_HINTS & swatches
    if dimension is None and (not hints or all(hints.isdisjoint(m.attributes) for m in members)):
        return "", []
    options = [o for o in (_option(m, tree) for m in members) if o is not None]
    prefixes = {m[0] if (m := _PREFIX.match(o.label)) else "" for o in options}
    if len(prefixes) == 1 and (prefix := prefixes.pop()):  # "Tamanho: XS", "Tamanho: S"...
        for o in options:
            o.label = o.label[len(prefix) :]
    labels = [o.label for o in options]
    if len(set(labels)) < 2 or all("%" in lb for lb in labels):  # a deposit or a discount
        return "", []
    if sum(_URL_VALUE.match(m.attributes.get("value") or "") is not None for m in members) > 1:
        return "", []  # options that open sibling products' pages: products of their own
    if all(_COUNTING.fullmatch(lb) for lb in labels) and (
        dimension is None or (dimension != "size" and _counts(labels))
    ):
        return "", []  # 1, 2, 3...: a quantity, whatever it is called
    return dimension or "option", options


@lru_cache(maxsize=4096)  # a site names its pickers (and card rows) alike on every page
def _naming(text: str) -> tuple[bool, str | None]:
    """Whether a picker's names say it chooses something else (a quantity, a sort order…),
    else the dimension they name, if any."""
    words = _words(text)
    if _NOT_PICKER.search(words):
        return True, None
    return False, next((dim for rx, dim in _DIMENSIONS if rx.search(words)), None)


def _counts(labels: list[str]) -> bool:
    return [int(x) for x in labels] == list(range(int(labels[0]), int(labels[0]) + len(labels)))


def _swatch_attr(members: list[LexborNode]) -> str:
    """Swatches say their dimension by the attribute they carry (``data-size``)."""
    attrs = members[0].attributes if members else {}
    return " ".join(a for a in ("data-size", "data-color", "data-colour") if a in attrs)


def _label_for(node: LexborNode, tree: LexborHTMLParser | None) -> str:
    ident = node.attributes.get("id")
    if tree is None or not ident or not re.fullmatch(r"[\w-]+", ident):
        return ""
    label = tree.css_first(f'label[for="{ident}"]')
    return " ".join(label.text(deep=True, strip=True).split()) if label is not None else ""


def _placeholder(option: LexborNode) -> bool:
    value = option.attributes.get("value")
    text = option.text(deep=True, strip=True)
    return value == "" or not text or bool(_PLACEHOLDER.match(text))


def _option(node: LexborNode, tree: LexborHTMLParser | None) -> _Option | None:
    a = node.attributes
    text = " ".join(node.text(deep=True, strip=True).split())
    if node.tag == "input":  # a radio: its value when it reads as a label, else its <label>
        value = (a.get("value") or "").strip()
        text = value if value and not re.fullmatch(r"\d{5,}|on", value) else _label_for(node, tree)
    raw = text or next((a[k] for k in _LABEL_ATTRS if a.get(k)), "") or ""
    label = _clean(raw)
    if not label or len(label) > 60:
        return None
    price_raw = next((a[k] for k in _PRICE_ATTRS if a.get(k)), None)
    price = parse_price(price_raw) if price_raw else _trailing_price(raw)
    sku = a.get("data-sku") or None
    return _Option(label, sku, price, _availability(node, raw))


def _clean(text: str) -> str:
    """The label without the hints written after it ("M - sold out", "XL (€24.99)"); other
    trailers stay ("FR 44 (34 / 32)": a size's conversions)."""
    text = text.strip()
    while (m := _TRAILER.search(text)) and m.start() > 0 and _is_hint(m.group(0)):
        text = text[: m.start()].strip()
    return text


def _is_hint(tail: str) -> bool:
    return bool(
        _SOLD_OUT.search(tail)
        or _IN_STOCK.search(tail)
        or _PREORDER.search(tail)
        or _BACKORDER.search(tail)
        or (_PRICE_TEXT.search(tail) and currency_in_text(tail))
    )


def _trailing_price(text: str) -> Decimal | None:
    """A price written after the label with its currency ("XL - €24.99"), not a surcharge
    ("+ €2") nor a size's conversions ("FR 44 (34 / 32)")."""
    m = _TRAILER.search(text)
    if m is None or m.start() == 0 or "+" in m.group(0):
        return None
    tail = m.group(0)
    if _SOLD_OUT.search(tail) or not currency_in_text(tail):
        return None
    return parse_price(tail)


def _availability(node: LexborNode, text: str) -> Availability | None:
    a = node.attributes
    if "disabled" in a or a.get("aria-disabled") == "true" or _SOLD_OUT.search(text):
        return "out_of_stock"
    if _SOLD_OUT_CLASS.search(a.get("class") or ""):
        return "out_of_stock"
    if _PREORDER.search(text):
        return "preorder"
    if _BACKORDER.search(text):
        return "backorder"
    if _IN_STOCK.search(text):
        return "in_stock"
    for key in _STOCK_ATTRS:
        value = a.get(key)
        if value is None:
            continue
        value = value.strip().lower()
        if value in ("0", "false", "no", "out", "none") or _SOLD_OUT.search(value):
            return "out_of_stock"
        if value in ("true", "yes", "in", "1") or (value.isdigit() and int(value) > 0):
            return "in_stock"
        known = normalize_availability(value)
        if known not in (None, "unknown"):
            return known
    return None
