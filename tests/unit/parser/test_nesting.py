"""The guard against hostile nesting (``page._too_deep``) in front of lexbor, which builds
deeply nested trees in quadratic time: a page nested past ``MAX_NESTING`` yields nothing, and a
large page with many void elements (which the guard's first, cheaper count takes for
openings) is still parsed."""

from __future__ import annotations

import json

import pytest

from services.parser.page import MAX_NESTING, NESTING_CHECK_FROM, parse_page

URL = "https://shop.example/p/1"
PRODUCT = json.dumps(
    {"@type": "Product", "sku": "S-1", "name": "Lamp", "offers": {"price": "9.50"}}
)
HEAD = f'<html><head><script type="application/ld+json">{PRODUCT}</script></head><body>'


def _page(body: str) -> bytes:
    html = HEAD + body + '<a href="/p/2">next product</a></body></html>'
    assert len(html) > NESTING_CHECK_FROM
    return html.encode()


@pytest.mark.parametrize(
    "unit",
    ["<div>", "<div><br>", "<div></br>", "<span><img>", "<DIV class=x>"],
)
def test_a_page_nested_too_deep_is_not_parsed(unit: str) -> None:
    body = unit * (MAX_NESTING + 50) + "x" * NESTING_CHECK_FROM
    parsed = parse_page(_page(body), URL, content_type="text/html")
    assert parsed.product is None
    assert parsed.links == []


def test_many_void_elements_at_shallow_depth_are_parsed() -> None:
    # 6,000 <br> and <img> in one div: deep by the cheap count (voids count as openings),
    # shallow by the exact one.
    body = "<div>" + "line<br><img src=/i.png>" * 3000 + "</div>" + "<p>text</p>" * 2000
    parsed = parse_page(_page(body), URL, content_type="text/html")
    assert parsed.product is not None and parsed.product.sku == "S-1"
    assert [link.url for link in parsed.links] == ["https://shop.example/p/2"]


def test_deep_but_within_the_limit_is_parsed() -> None:
    body = "<div>" * (MAX_NESTING - 100) + "x" + "</div>" * (MAX_NESTING - 100)
    body += "<p>filler</p>" * (NESTING_CHECK_FROM // 10)
    parsed = parse_page(_page(body), URL, content_type="text/html")
    assert parsed.product is not None
