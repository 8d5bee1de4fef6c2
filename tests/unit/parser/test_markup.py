"""Queries leave out only what cannot match: an attribute name (or, on a page without numeric
character references, a value word) missing from the page's markup
(whatever its case there) is on no element, and the readers that skip their query on that
ground find what they found before on pages whose markup writes the names in capitals."""

from __future__ import annotations

import pytest
from selectolax.lexbor import LexborHTMLParser

from services.parser.markup import Alternative, Markup, Query, contains
from services.parser.page import parse_page
from services.parser.visible import buy_controls

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


VALUES = Query(
    Alternative("h1"),
    Alternative('[class*="sold-out" i]', words=(b"sold-out",)),
    Alternative('[itemprop="price"]', values=((b"itemprop", b"price"),)),
)


def _found(html: str) -> list[str | None]:
    body = html.encode()
    return [node.tag for node in LexborHTMLParser(body).css(VALUES.on(Markup(body)))]


def test_a_word_missing_from_the_markup_leaves_its_alternative_out() -> None:
    markup = Markup(b'<h1>Lamp</h1><p class="stock" itemprop="name">price: 9</p>')
    assert VALUES.on(markup) == "h1"


def test_values_written_in_any_case_or_spacing_keep_their_alternative() -> None:
    html = (
        '<h1>Lamp</h1><P CLASS="Label SOLD-OUT">x</P><span itemprop = price>9</span>'
        "<b itemprop='price'>9</b><i ITEMPROP=\"price\">9</i>"
    )
    assert _found(html) == ["h1", "p", "span", "b", "i"]


def test_an_attribute_that_only_holds_the_value_elsewhere_is_left_out() -> None:
    markup = Markup(b'<h1>Lamp</h1><p itemprop="name" class="price">9</p>')
    assert VALUES.on(markup) == "h1"


def test_numeric_references_keep_every_value_alternative() -> None:
    # lexbor reads "&#115;old-out" as "sold-out": a page with references is not tested.
    html = '<h1>Lamp</h1><p class="&#115;old-out">x</p><i itemprop="&#x70;rice">9</i>'
    assert VALUES.on(Markup(html.encode())) == VALUES.css
    assert _found(html) == ["h1", "p", "i"]


@pytest.mark.parametrize(
    ("haystack", "needle"),
    [
        (b"<div itemscope>", b"itemscope"),
        (b"<div itemscope>", b"itemscopes"),
        (b"ab\x00cd\x00itemprop", b"\x00itemprop"),  # NULs inside either: not C strings
        (b"abc\x00", b"\x00x"),
        (b"short", b"longer than it"),
        (b"", b"x"),
        (b"anything", b""),
        (b"x" * 70_000 + b"typeof", b"typeof"),  # at the very end of a long page
        (b"typeo" * 20_000, b"typeof"),  # near misses all along
    ],
)
def test_contains_answers_as_in_does(haystack: bytes, needle: bytes) -> None:
    assert contains(haystack, needle) is (needle in haystack)


def test_a_word_a_named_reference_could_spell_is_refused() -> None:
    for word in (b"add_to_cart", b"fjord", b"Price", b"javascript:"):
        with pytest.raises(ValueError):
            Alternative("[class]", words=(word,))


@pytest.mark.parametrize(
    "html",
    [
        '<form action="/Cart/Add"><BUTTON TYPE="SUBMIT">Add</BUTTON></form>',
        '<div class="pdp"><a class="Buy-Now" href="/x">Go</a></div>',
        '<a href="JavaScript:buy_process(42)">Order</a><button>Search</button>',
        '<button class="x">In den Warenkorb</button><input type=submit value="Buy now">',
        '<a role="button" onclick="addToCart(1)">+</a>',
        "<p>no controls here</p>",
    ],
)
def test_buy_controls_read_with_the_markup_are_those_read_without(html: str) -> None:
    body = f"<html><body><h1>Lamp</h1>{html}</body></html>".encode()
    tree = LexborHTMLParser(body)
    ids = [n.mem_id for n in buy_controls(tree)]
    assert [n.mem_id for n in buy_controls(tree, Markup(body))] == ids
