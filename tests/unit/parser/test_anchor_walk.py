"""The link pass walks the page's ``a`` elements by tag (``links._anchors``): an ``a`` without
``href`` is no link and no action, and image-map ``area`` links keep their place in document
order among the anchors."""

from __future__ import annotations

from services.parser.page import parse_page

URL = "https://shop.example/c/lamps"


def _urls(html: str) -> list[tuple[str, str]]:
    parsed = parse_page(html.encode(), URL, content_type="text/html")
    return [(link.url, link.kind) for link in parsed.links]


def test_area_links_keep_their_place_among_the_anchors() -> None:
    html = (
        '<html><body><a href="/first">First</a><map name="m">'
        '<area href="/mapped" shape="rect" coords="0,0,1,1"></map>'
        '<a href="/last">Last</a></body></html>'
    )
    assert [url for url, _ in _urls(html)] == [
        "https://shop.example/first",
        "https://shop.example/mapped",
        "https://shop.example/last",
    ]


def test_an_anchor_without_href_is_neither_a_link_nor_a_card_s_action() -> None:
    # with an href, each cart link makes its wrapper a card and the lamp its product
    card = '<div><a class="add-to-cart"{href}>Add</a><a href="/lamp-{i}">Lamp</a></div>'

    def page(href: str) -> str:
        cards = "".join(card.format(href=href, i=i) for i in range(2))
        return f"<html><body>{cards}</body></html>"

    lamps = [f"https://shop.example/lamp-{i}" for i in range(2)]
    with_href = dict(_urls(page(' href="/cart/add"')))
    without = _urls(page(""))
    assert [with_href[url] for url in lamps] == ["product", "product"]
    assert without == [(url, "page") for url in lamps]
