"""The variant a page's URL selects (``services.parser.selected``)."""

from __future__ import annotations

from decimal import Decimal

from services.parser.selected import selected_terms

PAGE = "https://shop.example.com/p/mug"


def _offer(sku: str, price: str, url: str = PAGE, stock: str = "InStock") -> dict:
    return {"@type": "Offer", "sku": sku, "price": price, "priceCurrency": "EUR",
            "availability": f"https://schema.org/{stock}", "url": url}  # fmt: skip


def test_an_offer_whose_url_is_the_page_with_its_query_is_selected() -> None:
    offers = [
        _offer("M-1", "9.00", f"{PAGE}?variant=1"),
        _offer("M-2", "12.00", f"{PAGE}?variant=2"),
    ]
    assert selected_terms(offers, [], {}, f"{PAGE}?variant=2") == [
        (Decimal("12.00"), "EUR", "in_stock")
    ]


def test_a_query_value_naming_a_variant_sku_selects_it() -> None:
    variants = [
        {"@type": "Product", "sku": "55001", "offers": _offer("55001", "20.00")},
        {
            "@type": "Product",
            "sku": "55002",
            "offers": _offer("55002", "25.00", stock="OutOfStock"),
        },
    ]
    assert selected_terms([], variants, {}, f"{PAGE}?childSku=55002") == [
        (Decimal("25.00"), "EUR", "out_of_stock")
    ]


def test_offers_that_all_repeat_the_page_url_select_nothing() -> None:
    offers = [_offer("M-1", "9.00", f"{PAGE}?ref=home"), _offer("M-2", "12.00", f"{PAGE}?ref=home")]
    assert selected_terms(offers, [], {}, f"{PAGE}?ref=home") == []


def test_a_page_without_a_query_selects_nothing() -> None:
    assert selected_terms([_offer("M-1", "9.00")], [], {}, PAGE) == []
