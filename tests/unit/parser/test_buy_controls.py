"""Buy controls known by their words (``services.parser.visible.buy_controls``)."""

from __future__ import annotations

import pytest
from selectolax.lexbor import LexborHTMLParser

from services.parser.page import parse_page
from services.parser.visible import buy_controls


@pytest.mark.parametrize(
    "words",
    [
        "Adaugă în coș",
        "Kosárba",
        "اضف الى حقيبة التسوق",
        "أضف إلى عربة التسوق",
        "In winkelmandje",
        "Adicionar ao cesto",
        "Jetzt bestellen",
        "Agregar al carro",  # Chile's and Spain's "carro" as well as "carrito"
        "Pre-order",  # a product not yet out is bought by pre-ordering it
        "Vorbestellen",
        "Place Bid",  # an auction's item is bought by bidding
        "Make an offer",
        "Chat with seller",  # a classified ad's, by contacting its seller
        "Kontaktieren",
        "장바구니",  # "cart" alone on a button is the buy box's
        "Lägg i varukorg",
        "Beli Langsung",
        "+ Keranjang",
        "In den\n   Warenkorb",  # a label in two spans, on lines of their own
    ],
)
def test_words_that_buy(words: str) -> None:
    tree = LexborHTMLParser(f"<main><h1>Item</h1><button type='button'>{words}</button></main>")
    assert len(buy_controls(tree)) == 1


@pytest.mark.parametrize(
    "words", ["Kontaktformular öffnen", "Size guide", "Bid history", "장바구니 0"]
)
def test_words_that_do_not(words: str) -> None:
    tree = LexborHTMLParser(f"<main><h1>Item</h1><button type='button'>{words}</button></main>")
    assert buy_controls(tree) == []


@pytest.mark.parametrize(
    "control",
    [
        "<a href=\"javascript:buy_process('M1','c2hvcA==');\">單店購物車</a>",
        '<span onclick="Cart.addToCart(42)">→</span>',
        "<a href=\"JavaScript:AddCart('7')\"><img src=cart.gif></a>",
    ],
)
def test_controls_that_call_a_buy_script(control: str) -> None:
    """Older shops' buy boxes are links that call a script, whatever their words say."""
    tree = LexborHTMLParser(f"<main><h1>Item</h1>{control}</main>")
    assert len(buy_controls(tree)) == 1


@pytest.mark.parametrize(
    "control",
    [
        '<a href="javascript:void(0)" onclick="share()">Share</a>',
        '<a href="javascript:viewCart()">Cart</a>',  # the header's mini basket
        '<a href="javascript:buyerProtection()">Buyer protection</a>',
    ],
)
def test_scripts_that_do_not_buy(control: str) -> None:
    tree = LexborHTMLParser(f"<main><h1>Item</h1>{control}</main>")
    assert buy_controls(tree) == []


def _cards(count: int) -> str:
    return "".join(
        f"<li><a href='/p/chair-{i}'><img src='c{i}.jpg'></a><a href='/p/chair-{i}'>Chair {i}</a>"
        f"<span class='price'>£{i + 10}</span><button class='add-to-cart'>Add</button></li>"
        for i in range(count)
    )


def test_a_recommendation_row_of_buy_buttons_leaves_the_buy_box_alone() -> None:
    """Dozens of add-to-cart buttons in "related" rows: the buy box is still the one."""
    html = (
        "<html><body><main><h1>Oak table</h1><span class='price'>£450</span>"
        "<button class='add-to-cart'>Add to bag</button></main>"
        f"<section class='related-products'><ul>{_cards(50)}</ul></section></body></html>"
    )
    product = parse_page(html.encode(), "https://shop.example.com/p/oak-table").product
    assert product is not None and product.price == "450.00"


def test_a_grid_of_buy_buttons_is_still_a_listing() -> None:
    html = (
        f"<html><body><main><h1>Chairs</h1><ul class='grid'>{_cards(50)}</ul></main></body></html>"
    )
    assert parse_page(html.encode(), "https://shop.example.com/c/chairs").product is None


def test_a_sold_out_notice_stands_in_for_the_buy_button() -> None:
    html = (
        "<html><body><main><h1>Brown bear</h1><span class='price'>£25</span>"
        "<p class='stock-status'>Out of stock online</p></main>"
        f"<section class='related-products'><ul>{_cards(10)}</ul></section></body></html>"
    )
    product = parse_page(html.encode(), "https://shop.example.com/p/brown-bear").product
    assert product is not None and product.availability == "out_of_stock"


def test_a_grid_of_sold_out_cards_is_no_product() -> None:
    cards = "".join(
        f"<li><a href='/p/bear-{i}'><img src='b{i}.jpg'></a><span class='price'>£{i + 9}</span>"
        "<span class='stock'>Sold out</span></li>"
        for i in range(6)
    )
    html = f"<html><body><main><h1>Bears</h1><ul>{cards}</ul></main></body></html>"
    assert parse_page(html.encode(), "https://shop.example.com/c/bears").product is None


def test_an_ended_auction_is_still_the_item_page() -> None:
    """No bid box once the auction has ended; the marketplace item URL says what it is."""
    html = (
        b"<html><body><h1>Vintage camera</h1><span class='price'>EUR 120.00</span>"
        b"<p>Bidding has ended on this item.</p></body></html>"
    )
    product = parse_page(html, "https://market.example.com/itm/114400223311").product
    assert product is not None and product.sku == "114400223311"
    assert parse_page(html, "https://market.example.com/cameras/vintage").product is None


def test_the_title_is_a_named_h2_when_the_h1s_are_other_products() -> None:
    """Cards titled with <h1>s, the deal's own title an <h2> that the page's title names;
    the price read is the one after that heading, not the first card's."""
    cards = "".join(
        f"<li><h1>Other deal {i}</h1><span class='price'>{i + 1},000원</span></li>"
        for i in range(3)
    )
    html = (
        "<html><head><title>Plus-size lingerie set 75~120 - Deals</title></head><body>"
        f"<ul class='deals'>{cards}</ul><div class='deal'><h2>Plus-size lingerie set 75~120</h2>"
        "<span class='deal_price'>2,900원</span><button>바로구매</button></div></body></html>"
    )
    product = parse_page(html.encode(), "https://deals.example.kr/deal/3454863898").product
    assert product is not None and product.name == "Plus-size lingerie set 75~120"
    assert product.price == "2900.00"
