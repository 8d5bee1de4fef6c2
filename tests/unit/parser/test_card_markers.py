"""Product cards known by their markers alone (``data-product-id``, microdata ``ItemList``
members), whose links have no product URL shape: the card query's less common alternatives,
which no corpus page exercises."""

from __future__ import annotations

from services.parser.page import parse_page

URL = "https://shop.example/c/lamps"


def _kinds(html: str) -> dict[str, str]:
    parsed = parse_page(html.encode(), URL, content_type="text/html")
    return {link.url: link.kind for link in parsed.links}


def test_cards_marked_by_data_product_id() -> None:
    cards = "".join(
        f'<div data-product-id="{i}"><div class="media"><a href="/lamp-{i}">Lamp {i}</a>'
        "</div></div>"
        for i in range(3)
    )
    kinds = _kinds(f"<html><body><h1>Lamps</h1>{cards}<a href='/about'>About</a></body></html>")
    assert [kinds[f"https://shop.example/lamp-{i}"] for i in range(3)] == ["product"] * 3
    assert kinds["https://shop.example/about"] == "page"


def test_cards_marked_as_itemlist_members() -> None:
    items = "".join(
        '<li itemprop="itemListElement" itemscope itemtype="https://schema.org/Product">'
        f'<span><a itemprop="url" href="/lamp-{i}">Lamp {i}</a></span></li>'
        for i in range(3)
    )
    html = (
        '<html><body><ul itemscope itemtype="https://schema.org/ItemList">'
        f"{items}</ul><a href='/about'>About</a></body></html>"
    )
    kinds = _kinds(html)
    assert [kinds[f"https://shop.example/lamp-{i}"] for i in range(3)] == ["product"] * 3
    assert kinds["https://shop.example/about"] == "page"


def test_card_markers_written_in_capitals_still_make_cards() -> None:
    # the marker alternatives are left out of the card query on pages whose markup lacks the
    # names; the test is on the lowered bytes, so capitals keep them in
    cards = "".join(
        f'<DIV DATA-PRODUCT-ID="{i}"><DIV><A HREF="/lamp-{i}">Lamp {i}</A></DIV></DIV>'
        for i in range(2)
    )
    items = "".join(
        f'<LI ITEMSCOPE ITEMTYPE="https://schema.org/Product"><SPAN><A HREF="/desk-{i}">Desk</A>'
        "</SPAN></LI>"
        for i in range(2)
    )
    html = (
        f'<html><body>{cards}<UL ITEMSCOPE ITEMTYPE="https://schema.org/ItemList">{items}</UL>'
        "</body></html>"
    )
    kinds = _kinds(html)
    urls = [f"https://shop.example/{name}-{i}" for name in ("lamp", "desk") for i in range(2)]
    assert [kinds[url] for url in urls] == ["product"] * 4


def test_cards_named_by_their_platforms() -> None:
    """JTL-Shop's productbox and Shopware 5's product--box: cards whose buy controls are form
    buttons, which the pass that knows cards by their actions (anchors only) does not see."""
    for card in ("productbox productbox-column", "product--box box--basic"):
        cards = "".join(
            f'<div class="{card}"><a href="/lamp-{i}"><img src="/l{i}.jpg"></a>'
            f'<form method="post"><button>Add to cart</button></form></div>'
            for i in range(3)
        )
        kinds = _kinds(f"<html><body><h1>Lamps</h1>{cards}<a href='/about'>About</a></body></html>")
        assert [kinds[f"https://shop.example/lamp-{i}"] for i in range(3)] == ["product"] * 3, card
        assert kinds["https://shop.example/about"] == "page"
