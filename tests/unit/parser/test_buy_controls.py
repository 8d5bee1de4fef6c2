"""Buy controls known by their words (``services.parser.visible.buy_controls``)."""

from __future__ import annotations

import pytest
from selectolax.lexbor import LexborHTMLParser

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
        "Place Bid",  # an auction's item is bought by bidding
        "Make an offer",
        "Chat with seller",  # a classified ad's, by contacting its seller
        "Kontaktieren",
    ],
)
def test_words_that_buy(words: str) -> None:
    tree = LexborHTMLParser(f"<main><h1>Item</h1><button type='button'>{words}</button></main>")
    assert len(buy_controls(tree)) == 1


@pytest.mark.parametrize("words", ["Kontaktformular öffnen", "Size guide", "Bid history"])
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
