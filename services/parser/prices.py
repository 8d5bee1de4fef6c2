"""Prices: machine and localized strings → ``Decimal``; currency codes and symbols → ISO 4217.

A structured price (``"1299.00"``, ``1299``) is read as written. A localized string is read the
way a shopper would: the last of ``.``/``,`` is the decimal separator when both appear
(``1.299,00``, ``$1,049.99``); a lone separator followed by exactly three digits groups
thousands (``1,049``, ``3.980``) unless the integer part is 0; spaces, apostrophes and narrow
no-break spaces group thousands (``1 049,00 €``, ``CHF 1'299.–``).
"""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation
from functools import lru_cache
from typing import Any

from schemas.messages import Availability
from services.parser.availability import best_availability, normalize_availability
from services.parser.jsonld import as_list, resolve, types_of

MAX_OFFERS = 500  # a page with thousands of offers is a catalog dump; the first ones decide
Quote = tuple[Decimal, str | None]
Term = tuple[Decimal | None, str | None, Availability | None]  # one offer: price, currency, stock
_UNAVAILABLE = ("out_of_stock", "discontinued")
# The field that carries, from the structured data to the cross-check, the top of the price
# range whose lowest price was taken; never part of a product.
RANGE_TOP = "price_range_top"

_MACHINE = re.compile(r"-?\d+(?:\.\d+)?")
_NUMBER = re.compile(r"\d+(?:[.,]\d+|[ '’\u00a0\u202f\u2009]\d{3}(?!\d))*")
_GROUP_CHARS = str.maketrans("", "", "'’\u00a0\u202f\u2009 ")

ISO_CODES = frozenset(
    [
        "AED",
        "ARS",
        "AUD",
        "BGN",
        "BHD",
        "BRL",
        "CAD",
        "CHF",
        "CLP",
        "CNY",
        "COP",
        "CZK",
        "DKK",
        "EGP",
        "EUR",
        "GBP",
        "HKD",
        "HUF",
        "IDR",
        "ILS",
        "INR",
        "ISK",
        "JOD",
        "JPY",
        "KZT",
        "BYN",
        "GEL",
        "AZN",
        "UYU",
        "LKR",
        "BDT",
        "KES",
        "KRW",
        "KWD",
        "MAD",
        "MXN",
        "MYR",
        "NGN",
        "NOK",
        "NZD",
        "OMR",
        "PEN",
        "PHP",
        "PKR",
        "PLN",
        "QAR",
        "RON",
        "RSD",
        "RUB",
        "SAR",
        "SEK",
        "SGD",
        "THB",
        "TRY",
        "TWD",
        "UAH",
        "USD",
        "VND",
        "ZAR",
    ]
)
# Longest first, so "US$" is tried before "$".
_SYMBOLS: tuple[tuple[str, str], ...] = (
    ("US $", "USD"),  # eBay's and AliExpress's spelling
    ("US$", "USD"),
    ("AU $", "AUD"),
    ("CA$", "CAD"),
    ("C$", "CAD"),
    ("AU$", "AUD"),
    ("A$", "AUD"),
    ("NZ$", "NZD"),
    ("HK$", "HKD"),
    ("NT$", "TWD"),
    ("S$", "SGD"),
    ("R$", "BRL"),
    ("MX$", "MXN"),
    ("CN¥", "CNY"),
    ("JP¥", "JPY"),
    ("€", "EUR"),
    ("£", "GBP"),
    ("¥", "JPY"),
    ("￥", "JPY"),
    ("円", "JPY"),
    ("₹", "INR"),
    ("₩", "KRW"),
    ("₽", "RUB"),
    ("₺", "TRY"),
    ("₪", "ILS"),
    ("₫", "VND"),
    ("₱", "PHP"),
    ("฿", "THB"),
    ("zł", "PLN"),
    ("Kč", "CZK"),
    ("元", "CNY"),
    ("₸", "KZT"),
    ("тг", "KZT"),
    ("원", "KRW"),
    ("₴", "UAH"),
    ("грн", "UAH"),
    ("руб", "RUB"),
    ("лв", "BGN"),
    ("₾", "GEL"),
    ("₼", "AZN"),
    ("₦", "NGN"),
    ("GH₵", "GHS"),
    ("₵", "GHS"),
    ("৳", "BDT"),
    ("ر.س", "SAR"),  # Arabic abbreviations of the Gulf's and Egypt's currencies
    ("د.إ", "AED"),
    ("ر.ق", "QAR"),
    ("د.ك", "KWD"),
    ("ج.م", "EGP"),
)  # A lone "$" is not here: dollars of a dozen countries share it (the rule: "unambiguous").
# Codes shops still send for a currency that has a new one: the Russian rouble's pre-1998
# code, the Belarusian rouble's pre-2016 one.
_RETIRED = {"RUR": "RUB", "BYR": "BYN"}
# Symbols that are ordinary letters, matched as words only ("Ft" is not in "Soft"): the
# Romanian leu, forint, Turkish lira, Swiss franc, ringgit, rupiah, kuna, rand.
_WORD_SYMBOLS = {
    "lei": "RON",
    "ft": "HUF",
    "tl": "TRY",
    "fr.": "CHF",
    "sfr.": "CHF",
    "rm": "MYR",
    "rp": "IDR",
    "kn": "HRK",
    "r": "ZAR",
    "ksh": "KES",
    "tsh": "TZS",
    "ush": "UGX",
}
_WORD_SYMBOL_NAMES = r"lei|Ft|TL|S?Fr\.|RM|Rp|kn|R|K[Ss]h|T[Ss]h|U[Ss]h"
_WORD_SYMBOL = re.compile(rf"(?<![^\W\d_])({_WORD_SYMBOL_NAMES})(?![^\W\d_])")
_CODE_IN_TEXT = re.compile(r"(?<![A-Za-z])([A-Z]{3})(?![A-Za-z])")
# A currency as shown beside an amount: a symbol (the shared "$", "kr", "Rs" too), a word
# symbol or a known code. ``_MONEY``: a text that is an amount with its currency; ``_CURRENCY``:
# a text that is only a currency (the span beside a split price's number).
_MARK = "|".join(
    [re.escape(symbol) for symbol, _ in _SYMBOLS]
    + [r"\$", rf"(?<![^\W\d_])(?:kr|Rs\.?|{_WORD_SYMBOL_NAMES})(?![^\W\d_])"]
    + [rf"(?<![A-Za-z])(?:{'|'.join(sorted(ISO_CODES | _RETIRED.keys()))})(?![A-Za-z])"]
)
# thin spaces group Russian amounts; U+066C/U+066B are Arabic's separator and decimal mark
_AMOUNT = r"\d[\d.,'’\u00a0\u202f\u2009\u066c\u066b ]*(?:[.,][-–]+)?"
# The whole text is the amount and its currency, after at most a short label ("Price:") and
# before at most a short note in brackets:
# "EOS R5" or "Model R 200" in a spec line is no price.
_MONEY = re.compile(
    rf"(?:[^\d:]{{1,20}}:\s*|(?i:now|sale|only|just|jetzt|nur|ahora|maintenant)\s+)?"
    rf"(?:(?:{_MARK})\s*{_AMOUNT}|{_AMOUNT}\s*(?:{_MARK})\.?)"
    r"\s*(?:\([^()]{0,15}\))?\s*\*{0,2}\s*"  # "(税込)", "(incl. VAT)"; "€ *" (a VAT note)
)
_CURRENCY = re.compile(rf"\s*(?:{_MARK})\s*[.:]?\s*")
_MONEY_IN_TEXT = re.compile(rf"(?:{_MARK})\s*{_AMOUNT}|{_AMOUNT}\s*(?:{_MARK})")


def parse_price(value: object) -> Decimal | None:
    """A price from a structured value (number or string) or localized text; None if absent."""
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, int | float | Decimal):
        try:
            dec = Decimal(str(value))
        except InvalidOperation:
            return None
        return dec if dec.is_finite() and dec >= 0 else None
    if not isinstance(value, str):
        return None
    text = value.strip()
    if not text:
        return None
    if _MACHINE.fullmatch(text):
        dec = Decimal(text)
        return dec if dec >= 0 else None
    return _parse_localized(text)


# "19€99", as French shops print a price: the symbol stands where the decimal point would.
_SYMBOL_POINT = re.compile(r"(\d)\s?€(\d{2})(?!\d|[.,]\d)")


def euro_as_point(text: str) -> bool:
    """The text writes an amount with the euro sign as its decimal point ("279€99")."""
    return "€" in text and _SYMBOL_POINT.search(text) is not None


# Arabic's own thousands separator and decimal mark, as their ASCII counterparts.
_ARABIC_MARKS = str.maketrans({"\u066c": ",", "\u066b": "."})


def _parse_localized(text: str) -> Decimal | None:
    if "\u066c" in text or "\u066b" in text:
        text = text.translate(_ARABIC_MARKS)  # "٣٬٤٩٩ ر.س": 3,499 riyals
    if "€" in text:
        text = _SYMBOL_POINT.sub(r"\1,\2 €", text)
    m = _NUMBER.search(text)
    if not m:
        return None
    token = m.group(0).translate(_GROUP_CHARS)
    last_dot, last_comma = token.rfind("."), token.rfind(",")
    dec_sep: str | None
    if last_dot >= 0 and last_comma >= 0:
        dec_sep = "." if last_dot > last_comma else ","
    elif last_dot >= 0 or last_comma >= 0:
        sep = "." if last_dot >= 0 else ","
        head, _, tail = token.rpartition(sep)
        grouped = token.count(sep) > 1 or (len(tail) == 3 and head.lstrip("0") != "")
        dec_sep = None if grouped else sep
    else:
        dec_sep = None
    if dec_sep is None:
        digits = token.replace(".", "").replace(",", "")
    else:
        whole, _, frac = token.rpartition(dec_sep)
        digits = whole.replace(".", "").replace(",", "") + "." + frac
    try:
        return Decimal(digits)
    except InvalidOperation:
        return None


def format_price(value: Decimal) -> str:
    """A decimal string with at least two decimals: ``1299`` → ``"1299.00"``."""
    value = value.normalize()
    if value.as_tuple().exponent > -2:  # type: ignore[operator]
        value = value.quantize(Decimal("0.01"))
    return f"{value:f}"


def normalize_currency(value: object) -> str | None:
    """An ISO 4217 code from a ``priceCurrency``-like value (code or symbol)."""
    return _normalize_currency(value) if isinstance(value, str) else None


@lru_cache(maxsize=1024)  # the same few strings on every offer of every page
def _normalize_currency(value: str) -> str | None:
    text = value.strip()
    word = _WORD_SYMBOLS.get(text.lower())
    if word:
        return word
    if len(text) == 3 and text.isalpha():
        code = text.upper()
        return _RETIRED.get(code, code)
    return currency_in_text(text)


def currency_in_text(text: str) -> str | None:
    """The currency a price string names: an ISO code, else an unambiguous symbol."""
    m = _CODE_IN_TEXT.search(text)
    if m and m.group(1) in ISO_CODES:
        return m.group(1)
    if m and m.group(1) in _RETIRED:
        return _RETIRED[m.group(1)]
    for symbol, code in _SYMBOLS:
        if symbol in text:
            return code
    word = _WORD_SYMBOL.search(text)
    return _WORD_SYMBOLS[word.group(1).lower()] if word else None


# Symbols several currencies share ("$", "kr", "Rs", "元"), and which one a shop's country
# domain means by it: "$" on a .com.ar shop is pesos, "kr" on a .se shop crowns.
_SHARED_SYMBOL = re.compile(r"(?<![^\W\d_])(kr|Rs)\.?(?![^\W\d_])|\$|元|[¥￥]")
_BY_COUNTRY = {
    "$": {"ar": "ARS", "cl": "CLP", "mx": "MXN", "co": "COP", "uy": "UYU", "ca": "CAD",
          "au": "AUD", "nz": "NZD", "sg": "SGD", "hk": "HKD", "tw": "TWD", "us": "USD"},
    "kr": {"se": "SEK", "no": "NOK", "dk": "DKK", "is": "ISK"},
    "rs": {"pk": "PKR", "in": "INR", "lk": "LKR", "np": "NPR"},
    "元": {"tw": "TWD", "hk": "HKD", "cn": "CNY"},
    "¥": {"cn": "CNY"},  # the yen's sign is the yuan's too, as Chinese shops print it
    "￥": {"cn": "CNY"},
}  # fmt: skip


def shared_symbol(text: str) -> str | None:
    """The shared currency symbol a shown price carries ("$", "kr", "rs", "元"), if any."""
    m = _SHARED_SYMBOL.search(text)
    return None if m is None else (m.group(1) or m.group(0)).lower()


def currency_of_shop(symbol: str, host: str) -> str | None:
    """The currency a shared symbol means on a shop of this host's country domain."""
    return _BY_COUNTRY.get(symbol, {}).get(host.rstrip(".").rsplit(".", 1)[-1].lower())


def shows_money(text: str) -> bool:
    """Whether a shown text is an amount with its currency ("$24.990", "12 990 Ft", "19€99")."""
    text = text.strip()
    if "€" in text:
        text = _SYMBOL_POINT.sub(r"\1,\2 €", text)
    return _MONEY.fullmatch(text) is not None


def amounts_in(text: str) -> list[Decimal]:
    """Every amount written with its currency in a shown text ("899,99 € 799,99 €")."""
    out = []
    for match in _MONEY_IN_TEXT.finditer(text):
        amount = parse_price(match.group(0))
        if amount is not None and amount > 0:
            out.append(amount)
    return out


def is_currency(text: str) -> bool:
    """Whether a shown text is a currency alone ("元", "€", "EUR", "lei")."""
    return _CURRENCY.fullmatch(text) is not None


def price_and_currency(value: object) -> tuple[Decimal | None, str | None]:
    """Both the amount and the currency a single value carries (``"€ 12,50"``)."""
    price = parse_price(value)
    if not isinstance(value, str) or _MACHINE.fullmatch(value.strip()):
        return price, None
    return price, currency_in_text(value)


# --- offers -------------------------------------------------------------------------------

# Prices that are not what the customer pays now for the product itself.
_NOT_SELLING = ("strikethrough", "listprice", "msrp", "srp", "invoice", "minimumadvertised")
_NOT_MONEY = ("point", "pts", "credit", "coin", "mile", "voucher")
_NOT_MONEY_RE = re.compile("|".join(_NOT_MONEY), re.I)
_CHARGE_TYPES = {"deliverychargespecification", "paymentchargespecification"}


def offer_quotes(offers: object, index: dict[str, dict[str, Any]]) -> list[Quote]:
    """Every (price, currency) a product's ``offers`` carry, one per offer."""
    return [(p, c) for p, c, _ in offer_terms(offers, index) if p is not None]


def offer_terms(offers: object, index: dict[str, dict[str, Any]]) -> list[Term]:
    """Every offer's (price or None, currency, availability), nested offers included: a
    marketplace wraps the seller's offers in an Offer, an AggregateOffer may list its own."""
    terms: list[Term] = []
    for offer in as_list(offers)[:MAX_OFFERS]:
        offer = resolve(offer, index)
        if isinstance(offer, dict):
            _offer_term(offer, index, terms, 0, None)
    return terms


def lowest(quotes: list[Quote]) -> Quote | None:
    """The lowest positive price, within the currency of the first priced offer."""
    if not quotes:
        return None
    currency = next((c for _, c in quotes if c), None)
    same = [q for q in quotes if q[1] in (currency, None)]
    positive = [q for q in same if q[0] > 0] or same
    price, _ = min(positive, key=lambda q: q[0])
    return price, currency


def best_offer(terms: list[Term]) -> tuple[Quote | None, Availability | None]:
    """The price a shopper pays and the product's availability, from all its offers.

    A price of 0 is no price (a placeholder, "price on request"), and such an offer says
    nothing about stock either. The price is the lowest *available* offer's (a sold-out size
    does not set the price), else the lowest of all; availability is the most available
    offer's.
    """
    real = [t for t in terms if t[0] is None or t[0] > 0]
    states = [t[2] for t in real]
    availability = best_availability(states)
    priced = [(t[0], t[1], t[2]) for t in real if t[0] is not None]
    if not priced:
        return None, availability
    currency = next((c for _, c, _ in priced if c), None)
    same = [t for t in priced if t[1] in (currency, None)]
    available = [t for t in same if t[2] not in _UNAVAILABLE] or same
    price = min(t[0] for t in available if t[0] is not None)
    return (price, currency), availability


def range_top(
    terms: list[Term], offers: object, index: dict[str, dict[str, Any]]
) -> Decimal | None:
    """The top of the prices a product's offers span: its dearest offer's, or an
    AggregateOffer's ``highPrice``; None when they name no price."""
    tops = [t[0] for t in terms if t[0] is not None and t[0] > 0]
    for offer in as_list(offers)[:MAX_OFFERS]:
        offer = resolve(offer, index)
        if isinstance(offer, dict) and "aggregateoffer" in types_of(offer):
            high, _ = price_and_currency(_first(offer.get("highPrice")))
            if high is not None:
                tops.append(high)
    return max(tops, default=None)


def _offer_term(
    offer: dict[str, Any], index: dict, out: list[Term], depth: int, inherited: Availability | None
) -> None:
    if depth > 4:
        return
    currency_raw = _first(offer.get("priceCurrency"))
    if isinstance(currency_raw, str) and _NOT_MONEY_RE.search(currency_raw):
        return
    currency = normalize_currency(currency_raw)
    availability = normalize_availability(_first(offer.get("availability"))) or inherited
    if "aggregateoffer" in types_of(offer):
        raw = _first(offer.get("lowPrice"))
        if raw is None:
            raw = _first(offer.get("price"))
    else:
        raw = _first(offer.get("price"))
        if raw is None:
            raw = _first(offer.get("lowPrice"))
    price, text_currency = price_and_currency(raw)
    price = in_whole_units(raw, price, currency or text_currency)
    if price is None:
        spec = _spec_quote(offer.get("priceSpecification"), index, 0)
        if spec is not None:
            price, text_currency = spec
    if offer.get("offers") and (price is None or availability is None):
        nested: list[Term] = []
        for sub in as_list(offer.get("offers"))[:MAX_OFFERS]:
            sub = resolve(sub, index)
            if isinstance(sub, dict):
                _offer_term(sub, index, nested, depth + 1, availability)
        if price is None:
            out.extend(nested)
            return
        # An AggregateOffer's lowPrice, its stock in the offers it lists (VTEX's)
        availability = best_availability(t[2] for t in nested)
    out.append((price, currency or text_currency, availability))


# Currencies priced in whole units: a structured "24.990" in one of them is 24 990 written
# with the shop's own thousands separator (Chilean and Colombian shops do), not 24.99.
_NO_CENTS = frozenset({"CLP", "COP", "PYG", "ISK", "HUF", "KRW", "JPY", "IDR", "VND", "UGX"})
_DOT_GROUPED = re.compile(r"\d{1,3}(?:\.\d{3})+")


def in_whole_units(raw: object, price: Decimal | None, currency: str | None) -> Decimal | None:
    """``price`` as read from ``raw``, unless ``raw`` is a dot-grouped amount ("24.990") of a
    currency priced in whole units: then the grouped number (24990)."""
    if price is None or currency not in _NO_CENTS or not isinstance(raw, str):
        return price
    text = raw.strip()
    return Decimal(text.replace(".", "")) if _DOT_GROUPED.fullmatch(text) else price


def _spec_quote(specs: object, index: dict, depth: int) -> Quote | None:
    """The selling price among ``priceSpecification`` entries: not list, unit or instalment."""
    found: list[Quote] = []
    for spec in as_list(specs)[:MAX_OFFERS]:
        spec = resolve(spec, index)
        if not isinstance(spec, dict) or depth > 3:
            continue
        kinds = types_of(spec)
        if kinds & _CHARGE_TYPES:
            continue
        if "compoundpricespecification" in kinds:
            sub = _spec_quote(spec.get("priceComponent"), index, depth + 1)
            if sub is not None:
                found.append(sub)
            continue
        price_type = str(_first(spec.get("priceType")) or "").lower().replace(" ", "")
        if any(word in price_type for word in _NOT_SELLING):
            continue
        if spec.get("priceComponentType") or spec.get("billingDuration"):
            continue  # instalments, deposits, subscriptions
        if _per_unit(spec.get("referenceQuantity"), index):
            continue
        price, text_currency = price_and_currency(_first(spec.get("price")))
        if price is None:
            price, text_currency = price_and_currency(_first(spec.get("minPrice")))
        if price is None:
            continue
        currency_raw = _first(spec.get("priceCurrency"))
        if isinstance(currency_raw, str) and _NOT_MONEY_RE.search(currency_raw):
            continue
        found.append((price, normalize_currency(currency_raw) or text_currency))
    return lowest(found)


def _per_unit(quantity: object, index: dict) -> bool:
    quantity = resolve(_first(quantity), index)
    if not isinstance(quantity, dict):
        return quantity is not None
    value = parse_price(_first(quantity.get("value")))
    unit = str(_first(quantity.get("unitCode")) or "").upper()
    return not (value == 1 and unit in ("", "C62", "H87", "EA"))


def _first(value: object) -> Any:
    if isinstance(value, list):
        return value[0] if value else None
    if isinstance(value, dict) and "@value" in value:
        return value["@value"]
    return value
