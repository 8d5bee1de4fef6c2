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
