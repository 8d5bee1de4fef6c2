"""The link pass memoises what a site's hrefs mean (``links._site_hrefs``): the memo must give
every page the answer a fresh parse gives, whatever the site, the page's directory, its
``<base href>``, or where on the page the link sits (a card, an action's card)."""

from __future__ import annotations

import random

import pytest

from services.parser import links
from services.parser.page import parse_page
from shared.urls import canonicalize


def _kinds(html: str, url: str) -> dict[str, str]:
    parsed = parse_page(html.encode(), url, content_type="text/html")
    return {link.url: link.kind for link in parsed.links}


def _fresh(html: str, url: str) -> dict[str, str]:
    """The same parse with every memo of the link pass emptied first."""
    links._site_hrefs.cache_clear()
    links._resolve.cache_clear()
    links._MARKS.clear()
    return _kinds(html, url)


NAV = (
    '<nav><a href="/c/lamps">Lamps</a><a href="news">News</a><a href="/p/desk-lamp">Desk</a></nav>'
)


def test_a_root_relative_href_belongs_to_its_site() -> None:
    html = f"<html><body>{NAV}</body></html>"
    first = _kinds(html, "https://one.example/a/b")
    second = _kinds(html, "https://two.example/a/b")
    assert first["https://one.example/c/lamps"] == "page"
    assert second["https://two.example/c/lamps"] == "page"
    assert second["https://two.example/p/desk-lamp"] == "product"
    assert not any(url.startswith("https://one.example") for url in second)


def test_a_relative_href_resolves_against_each_page() -> None:
    html = f"<html><body>{NAV}</body></html>"
    assert "https://shop.example/a/news" in _kinds(html, "https://shop.example/a/page")
    assert "https://shop.example/b/c/news" in _kinds(html, "https://shop.example/b/c/page")


def test_base_href_moves_relative_and_root_relative_links() -> None:
    html = f'<html><head><base href="https://cdn.shop.example/x/"></head><body>{NAV}</body></html>'
    plain = _kinds(f"<html><body>{NAV}</body></html>", "https://shop.example/y/page")
    assert "https://shop.example/c/lamps" in plain
    based = parse_page(html.encode(), "https://shop.example/y/page", content_type="text/html")
    urls = {link.url for link in based.links}
    # Both hrefs now resolve on the base's host, outside the page's site: not followed, and
    # above all not answered from the memo the plain page filled.
    assert "https://shop.example/c/lamps" not in urls
    assert "https://shop.example/y/news" not in urls


def test_a_link_is_a_card_on_one_page_and_navigation_on_another() -> None:
    cards = "".join(
        f'<div class="product-card"><a href="/item-{i}">Item {i}</a></div>' for i in range(3)
    )
    listing = f"<html><body>{cards}</body></html>"
    other = '<html><body><nav><a href="/item-1">Item 1</a></nav></body></html>'
    assert _kinds(listing, "https://shop.example/c/lamps")["https://shop.example/item-1"] == (
        "product"
    )
    assert _kinds(other, "https://shop.example/c/chairs")["https://shop.example/item-1"] == "page"


def test_cards_known_by_their_actions_after_the_links_before_them() -> None:
    # The image and title links come before the add-to-cart link that tells the card: the
    # pass learns it at the end and must give the same kinds as a pass that knew it first.
    cards = "".join(
        f'<div><a href="/lamp-{i}"><img src="/i/{i}.jpg"></a><a href="/lamp-{i}">Lamp {i}</a>'
        f'<a href="/cart/add?id={i}">Add to cart</a></div>'
        for i in range(3)
    )
    html = f'<html><body><a href="/lamp-0">Top seller</a>{cards}</body></html>'
    url = "https://shop.example/c/lamps"
    kinds = _kinds(html, url)
    assert [kinds[f"https://shop.example/lamp-{i}"] for i in range(3)] == ["product"] * 3
    assert kinds == _fresh(html, url)
    assert _kinds(html, url) == kinds  # and again from the memo


def test_a_pager_link_keeps_its_kind_when_a_card_also_holds_its_url() -> None:
    pager = '<div class="pagination"><a href="/c/lamps?page=2">2</a></div>'
    cards = "".join(
        f'<div><a href="/c/lamps?page=2">Lamp {i}</a><a href="/cart/add?id={i}">Buy</a></div>'
        for i in range(2)
    )
    html = f"<html><body>{pager}{cards}</body></html>"
    url = "https://shop.example/c/lamps"
    assert _kinds(html, url)["https://shop.example/c/lamps?page=2"] == "pagination"
    assert _kinds(html, url) == _fresh(html, url)


def test_the_memo_is_bounded() -> None:
    memo = links._site_hrefs("https://bounded.example")
    for i in range(links.MAX_SITE_HREFS + 10):
        links._href(memo, {}, f"/p/item-{i}", "https://bounded.example", "https://x.example/", None)
    assert len(memo) <= links.MAX_SITE_HREFS


def test_an_href_first_met_in_a_card_still_says_action_outside_one() -> None:
    site = "https://actions.example"
    marked = "".join(
        f'<div class="product-card"><a href="/lamp-{i}">Lamp {i}</a>'
        f'<a href="/cart/add?id={i}">Buy</a></div>'
        for i in range(3)
    )
    _kinds(f"<html><body>{marked}</body></html>", f"{site}/c/marked")
    # The same buy links, now in cards no class marks: the links are known by the buy links.
    bare = "".join(
        f'<div><a href="/lamp-{i}">Lamp {i}</a><a href="/cart/add?id={i}">Buy</a></div>'
        for i in range(3)
    )
    html = f"<html><body>{bare}</body></html>"
    kinds = _kinds(html, f"{site}/c/bare")
    assert [kinds[f"{site}/lamp-{i}"] for i in range(3)] == ["product"] * 3
    assert kinds == _fresh(html, f"{site}/c/bare")


@pytest.mark.parametrize("seed", range(3))
def test_an_href_stripped_of_tracking_resolves_as_canonicalize_says(seed: int) -> None:
    # ``_resolve`` drops tracking parameters before canonicalising when that cannot change
    # the answer: held against canonicalize itself on hrefs built from awkward pieces.
    heads = ["/", "/p/", "https://", "https://h.example", "http://H.example:80/x", "//", "", "/."]
    pieces = [
        "/p/lamp", "lamp", "../x", "./", "//other.example/p", "https://Shop.Example:443/a",
        "http:", "javascript:x", "?", "&", "&&", "=", ";", ":", "..", "utm_source=a",
        "UTM_Medium=b", "utm_", "gclid=1", "GCLID", "gclidx=2", "fbclid=", "q=1", "q=a b",
        "q='x'", "%20", "#frag", "/./", "é", "\\", "\t", "@", "mc_eid=3", "utm_x=http://a",
    ]  # fmt: skip
    rng = random.Random(seed)
    bases = ["https://shop.example/a/b?q=1", "http://h.example", "https://shop.example/dir/"]
    for _ in range(3000):
        raw = rng.choice(heads) + "".join(rng.choice(pieces) for _ in range(rng.randint(0, 5)))
        if "?" not in raw and rng.random() < 0.8:
            raw = raw + "?" + "&".join(rng.choice(pieces) for _ in range(rng.randint(1, 4)))
        for base in bases:
            resolved = links._resolve(raw, base)
            assert (resolved[0] if resolved else None) == canonicalize(raw, base), (raw, base)


def test_one_page_s_tracked_hrefs_stay_out_of_the_site_memo() -> None:
    site = "https://tracked.example"
    cards = "".join(
        f'<div class="product-card"><a href="/p/item-{i}?utm_campaign=page-7&utm_medium=x">'
        f'<img src="/i/{i}.jpg"></a><a href="/p/item-{i}?utm_campaign=page-7&utm_medium=x">'
        f"Item {i}</a></div>"
        for i in range(3)
    )
    html = f'<html><body><a href="/c/all">All</a>{cards}</body></html>'
    kinds = _kinds(html, f"{site}/p/item-7")
    assert [kinds[f"{site}/p/item-{i}"] for i in range(3)] == ["product"] * 3
    assert set(links._site_hrefs(site)) == {"/c/all"}
    assert kinds == _fresh(html, f"{site}/p/item-7")
