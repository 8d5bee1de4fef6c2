"""Whether a node sits in a recommendations container, asked of many nodes with one memo."""

from __future__ import annotations

from selectolax.lexbor import LexborHTMLParser

from services.parser.microdata import _TILE_CLIMB, in_tile_container


def test_a_memo_filled_by_a_deep_climb_does_not_answer_for_a_shallow_one() -> None:
    """A button twelve levels under a related-products row climbs out of reach of the row;
    a button right under the same wrapper is in it, asked first or second."""
    depth = _TILE_CLIMB
    opening = "".join(f"<div class='w{i}'>" for i in range(depth))
    closing = "</div>" * depth
    html = (
        "<div class='related-products'>"
        f"{opening}<button id='deep'>Add</button>{closing.replace('</div>', '', 1)}"
        "<button id='near'>Add</button></div></div>"
    )
    tree = LexborHTMLParser(f"<html><body>{html}</body></html>")
    deep, near = tree.css_first("#deep"), tree.css_first("#near")
    assert deep is not None and near is not None
    assert not in_tile_container(deep) and in_tile_container(near)  # no memo: the reference
    memo: dict[int, bool] = {}
    assert not in_tile_container(deep, memo)
    assert in_tile_container(near, memo)  # the old memo had said "no" for near's wrapper
    memo = {}
    assert in_tile_container(near, memo) and not in_tile_container(deep, memo)


def test_rows_named_by_their_purpose_or_by_their_slider_library() -> None:
    """nopCommerce's "also purchased" grid and a bxSlider row (PrestaShop 1.6's products of
    the same category) are recommendation rows; a product's own block is not."""
    html = (
        "<div class='also-purchased-products-grid'><div class='item-box'>"
        "<button id='nop'>Add to cart</button></div></div>"
        "<div id='productscategory_list'><ul class='bxslider clearfix'><li class='product-box'>"
        "<a id='bx' class='ajax_add_to_cart_button'>Ajouter au panier</a></li></ul></div>"
        "<div class='product-essential'><button id='own'>Add to cart</button></div>"
    )
    tree = LexborHTMLParser(f"<html><body>{html}</body></html>")
    nodes = [tree.css_first(f"#{name}") for name in ("nop", "bx", "own")]
    assert all(node is not None for node in nodes)
    assert [in_tile_container(node) for node in nodes if node is not None] == [True, True, False]
