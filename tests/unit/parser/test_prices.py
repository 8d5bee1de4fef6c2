from __future__ import annotations

from decimal import Decimal

import pytest

from services.parser.prices import (
    currency_of_shop,
    format_price,
    in_whole_units,
    lowest,
    normalize_currency,
    offer_quotes,
    offer_terms,
    parse_price,
    price_and_currency,
    shared_symbol,
    shows_money,
)


@pytest.mark.parametrize(
    ("text", "price", "currency"),
    [
        ("1.299,00", "1299.00", None),
        ("$1,049.99", "1049.99", None),  # "$": a dozen countries' dollars
        ("US$1,049.99", "1049.99", "USD"),
        ("US $49.99", "49.99", "USD"),  # eBay's spelling
        ("279€99", "279.99", "EUR"),  # the symbol where the point would be (French shops)
        ("12\u2009499 ₽", "12499.00", "RUB"),  # grouped by thin spaces
        ("C$ 24.00", "24.00", "CAD"),
        ("1 049,00 €", "1049.00", "EUR"),
        ("1\u202f049,00\u00a0€", "1049.00", "EUR"),
        ("¥3,980", "3980.00", "JPY"),
        ("29,90", "29.90", None),
        ("£12", "12.00", "GBP"),
        ("₹ 2,499", "2499.00", "INR"),
        ("CHF 1'299.–", "1299.00", "CHF"),
        ("USD 19.99", "19.99", "USD"),
        ("12.345.678", "12345678.00", None),
        ("0.125", "0.125", None),
        ("19.990", "19.99", None),
        ("From $19.99 - $29.99", "19.99", None),
        ("CHF 1'234.50", "1234.50", "CHF"),
        ("1.234,50 €", "1234.50", "EUR"),
        ("1 234,50", "1234.50", None),
        ("R$ 1.234,56", "1234.56", "BRL"),
        ("1 234,50 zł", "1234.50", "PLN"),
        ("199,99 lei", "199.99", "RON"),  # letters as a symbol: whole words only
        ("12 990 Ft", "12990.00", "HUF"),
        ("1.299,90 TL", "1299.90", "TRY"),
        ("Fr. 12.50", "12.50", "CHF"),
        ("RM 12.90", "12.90", "MYR"),
        ("Rp 150.000", "150000.00", "IDR"),
        ("NT$ 2,320", "2320.00", "TWD"),
        ("Soft 12", "12.00", None),
    ],
)
def test_localized_prices(text: str, price: str, currency: str | None) -> None:
    got, cur = price_and_currency(text)
    assert got is not None and format_price(got) == price
    assert cur == currency


@pytest.mark.parametrize("value", [None, "", "Free", "call us", True, -5, "-3.00", float("nan")])
def test_no_price(value: object) -> None:
    assert parse_price(value) is None


def test_structured_numbers_are_read_as_written() -> None:
    assert format_price(parse_price(1299)) == "1299.00"  # type: ignore[arg-type]
    assert format_price(parse_price(19.99)) == "19.99"  # type: ignore[arg-type]
    assert format_price(parse_price("1299.00")) == "1299.00"  # type: ignore[arg-type]


def test_currency_codes_and_symbols() -> None:
    assert normalize_currency("eur") == "EUR"
    assert normalize_currency("€") == "EUR"
    assert normalize_currency("$") is None  # ambiguous: the rule wants an unambiguous symbol
    assert normalize_currency("US$") == "USD"
    assert normalize_currency("RUR") == "RUB"  # retired codes shops still send
    assert normalize_currency("BYR") == "BYN"
    assert normalize_currency("lei") == "RON"  # a word symbol, not the code "LEI"
    assert normalize_currency("Ft") == "HUF"
    assert normalize_currency(None) is None


def test_offers_lowest_and_specifications() -> None:
    offers = [
        {"@type": "Offer", "price": "20.00", "priceCurrency": "EUR"},
        {"@type": "AggregateOffer", "lowPrice": 15, "highPrice": 30, "priceCurrency": "EUR"},
        {
            "@type": "Offer",
            "priceSpecification": [
                {"@type": "UnitPriceSpecification", "priceType": "ListPrice", "price": 9},
                {"@type": "DeliveryChargeSpecification", "price": 1},
                {"@type": "UnitPriceSpecification", "price": 17, "priceCurrency": "EUR"},
            ],
        },
        {"@type": "Offer", "price": 1, "priceCurrency": "points"},
    ]
    assert lowest(offer_quotes(offers, {})) == (Decimal("15"), "EUR")


def test_an_aggregate_offer_states_its_stock_in_the_offers_it_lists() -> None:
    """VTEX: the aggregate has the price, its listed offers the availability."""
    aggregate = {
        "@type": "AggregateOffer",
        "lowPrice": 1299.9,
        "priceCurrency": "BRL",
        "offers": [
            {"@type": "Offer", "price": 1299.9, "availability": "http://schema.org/OutOfStock"},
            {"@type": "Offer", "price": 1349.9, "availability": "http://schema.org/SoldOut"},
        ],
    }
    assert offer_terms(aggregate, {}) == [(Decimal("1299.9"), "BRL", "out_of_stock")]
    own = {**aggregate, "availability": "https://schema.org/InStock"}
    assert offer_terms(own, {}) == [(Decimal("1299.9"), "BRL", "in_stock")]  # its own says


def test_shared_symbols_take_the_shop_country_currency() -> None:
    assert shared_symbol("$ 24.990") == "$"
    assert shared_symbol("1 299 kr") == "kr"
    assert shared_symbol("US$ 5") == "$"  # currency_in_text names USD first; see crosscheck
    assert shared_symbol("12,50 €") is None
    assert currency_of_shop("$", "www.tienda.example.com.ar") == "ARS"
    assert currency_of_shop("kr", "shop.example.dk") == "DKK"
    assert currency_of_shop("元", "www.example.com.tw") == "TWD"
    assert currency_of_shop("$", "shop.example.com") is None  # .com says no country


def test_dot_grouped_amounts_of_whole_unit_currencies() -> None:
    assert in_whole_units("24.990", Decimal("24.990"), "CLP") == Decimal("24990")
    assert in_whole_units("1.299.000", Decimal("1299000"), "COP") == Decimal("1299000")
    assert in_whole_units("24.990", Decimal("24.990"), "EUR") == Decimal("24.990")  # has cents
    assert in_whole_units("24.5", Decimal("24.5"), "JPY") == Decimal("24.5")  # not grouped
    assert in_whole_units(24.99, Decimal("24.99"), "CLP") == Decimal("24.99")  # a number


@pytest.mark.parametrize(
    ("text", "money"),
    [
        ("$24.990", True),
        ("Rs 23,450", True),
        ("Preis: 12,90 €", True),  # a short label before it
        ("¥1,580 (税込)", True),  # a short note after it
        ("R 2,400", True),
        ("2320", False),  # an amount alone: its currency may sit in the next element
        ("EOS R5", False),  # a letter symbol inside a model name is no price
        ("Compatible with EOS R 6", False),
        ("Free shipping over $50", False),
        ("Now $79.00", True),  # the current price's word before it
        ("Was $99.00", False),  # an old price's is no current price
        ("39,95 € *", True),  # a German shop's VAT footnote mark
        ("US $49.99", True),
        ("12 ft", False),  # feet, not forints: the word symbols keep their case
        ("19€99", True),
        ("12\u2009499 ₽", True),
    ],
)
def test_a_text_that_is_an_amount_with_its_currency(text: str, money: bool) -> None:
    assert shows_money(text) is money
