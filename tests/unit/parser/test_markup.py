"""Queries leave out only what cannot match: an attribute name missing from the page's markup
(whatever its case there) is on no element, and the readers that skip their query on that
ground find what they found before on pages whose markup writes the names in capitals."""

from __future__ import annotations

from selectolax.lexbor import LexborHTMLParser

from services.parser.markup import Alternative, Markup, Query
from services.parser.page import parse_page

URL = "https://shop.test/p/lamp"
QUERY = Query(
    Alternative("h1"),
    Alternative('[itemprop="price"]', names=(b"itemprop",)),
    Alternative("[data-sku]", names=(b"data-sku",)),
)


def _matches(html: str) -> list[str | None]:
    body = html.encode()
    tree = LexborHTMLParser(body)
    return [node.tag for node in tree.css(QUERY.on(Markup(body)))]


def test_alternatives_whose_names_the_page_lacks_are_left_out() -> None:
    assert QUERY.on(Markup(b"<h1>Lamp</h1><span class=price>9</span>")) == "h1"
    assert QUERY.on(None) == QUERY.css


def test_names_in_any_case_keep_their_alternative() -> None:
    html = '<h1>Lamp</h1><SPAN ItemProp="price">9</SPAN><LI DATA-SKU="L1">Lamp</LI>'
    assert _matches(html) == ["h1", "span", "li"]


def test_a_name_found_only_in_text_keeps_the_alternative_harmlessly() -> None:
    html = "<h1>Lamp</h1><p>itemprop data-sku</p>"
    assert QUERY.on(Markup(html.encode())) == QUERY.css
    assert _matches(html) == ["h1"]


def test_capitalised_microdata_and_swatches_are_still_read() -> None:
    html = (
        '<html><body><DIV ITEMSCOPE ITEMTYPE="https://schema.org/Product">'
        '<H1 ITEMPROP="name">Desk Lamp</H1><META ITEMPROP="sku" CONTENT="DL-1">'
        '<DIV ITEMPROP="offers" ITEMSCOPE ITEMTYPE="https://schema.org/Offer">'
        '<SPAN ITEMPROP="price" CONTENT="19.90">19,90 €</SPAN>'
        '<META ITEMPROP="priceCurrency" CONTENT="EUR"></DIV></DIV>'
        '<UL CLASS="colour-swatches"><LI DATA-COLOR="Red" DATA-SKU="DL-1-R">Red</LI>'
        '<LI DATA-COLOR="Blue" DATA-SKU="DL-1-B">Blue</LI></UL></body></html>'
    )
    parsed = parse_page(html.encode(), URL, content_type="text/html")
    assert parsed.product is not None
    assert (parsed.product.sku, parsed.product.price, parsed.product.found_by) == (
        "DL-1",
        "19.90",
        "microdata",
    )
    assert sorted(v.sku for v in parsed.variants if v.sku) == ["DL-1-B", "DL-1-R"]
