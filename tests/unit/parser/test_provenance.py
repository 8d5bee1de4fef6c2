"""Every product says how it was found and how sure the parser is."""

from __future__ import annotations

from schemas.messages import CONFIDENT, Product
from services.parser.page import parse_page

URL = "https://shop.example.com/p/lamp"
JSONLD = (
    '<script type="application/ld+json">{"@type":"Product","name":"Desk Lamp","sku":"DL-1",'
    '"offers":{"@type":"Offer","price":"40.00","priceCurrency":"EUR","availability":"InStock"}}'
    "</script>"
)
VISIBLE = (
    '<h1>Desk Lamp</h1><span class="price">40,00 €</span>'
    '<form action="/cart/add"><button type="submit">Add to cart</button></form>'
)


def _product(head: str, body: str) -> Product:
    html = f"<html><head>{head}</head><body>{body}</body></html>".encode()
    product = parse_page(html, URL).product
    assert product is not None
    return product


def test_structured_data_is_surer_than_the_visible_layout() -> None:
    structured = _product(JSONLD, VISIBLE)
    visible = _product("", VISIBLE)
    assert (structured.found_by, visible.found_by) == ("jsonld", "visible")
    assert structured.confidence is not None and visible.confidence is not None
    assert structured.confidence > visible.confidence >= CONFIDENT


def test_a_conflict_is_reported_and_costs_confidence() -> None:
    calm = _product(JSONLD, VISIBLE)
    sold_out = _product(JSONLD, VISIBLE + '<p class="availability">Out of stock</p>')
    assert sold_out.availability == "out_of_stock"
    assert "availability" in sold_out.attributes["conflict"]
    assert sold_out.confidence is not None and calm.confidence is not None
    assert sold_out.confidence < calm.confidence


def test_opengraph_without_a_price_is_not_confident() -> None:
    og = '<meta property="og:type" content="product"><meta property="og:title" content="Desk Lamp">'
    product = _product(og, "<p>Call us for a quote.</p>")
    assert product.found_by == "opengraph"
    assert product.confidence is not None and product.confidence < CONFIDENT
