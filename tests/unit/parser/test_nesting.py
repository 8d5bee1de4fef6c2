"""The guard against hostile nesting (``parser.nesting``) in front of lexbor, which builds
deeply nested trees in quadratic time: a page nested past ``MAX_NESTING`` yields nothing, and a
large page with many void elements (which the guard's first, cheaper count takes for
openings) is still parsed."""

from __future__ import annotations

import json
import re

import pytest

from services.parser.nesting import CAREFUL_FROM, MAX_NESTING, too_deep
from services.parser.nesting import CHECK_FROM as NESTING_CHECK_FROM
from services.parser.page import parse_page

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
    # shallow by the model of lexbor's stack.
    body = "<div>" + "line<br><img src=/i.png>" * 3000 + "</div>" + "<p>text</p>" * 2000
    parsed = parse_page(_page(body), URL, content_type="text/html")
    assert parsed.product is not None and parsed.product.sku == "S-1"
    assert [link.url for link in parsed.links] == ["https://shop.example/p/2"]


def test_deep_but_within_the_limit_is_parsed() -> None:
    body = "<div>" * (MAX_NESTING - 100) + "x" + "</div>" * (MAX_NESTING - 100)
    body += "<p>filler</p>" * (NESTING_CHECK_FROM // 10)
    parsed = parse_page(_page(body), URL, content_type="text/html")
    assert parsed.product is not None


@pytest.mark.parametrize(
    "unit",
    [
        "<div></span>",  # a closing tag with no open element of its name is ignored
        "<p><div></span>",  # ... or with a special element above it
        "<div><!--</div>-->",  # a closing tag in a comment is text
        '<div><a title="</div></a>">',  # ... and in a quoted attribute value
        "<div><script>'</div>'</script>",  # ... and in a script
        "<div></body>",  # </body> closes nothing
        "<form><div></form>",  # </form> leaves what the form holds open
        "<li><ul></li>",  # </li> does not close past a list
    ],
)
def test_closing_tags_lexbor_ignores_do_not_hide_nesting(unit: str) -> None:
    # Each unit nests one or two elements deeper in lexbor, whatever it seems to close: past
    # CAREFUL_FROM start tags, the model of lexbor's stack sees it.
    reps = CAREFUL_FROM // len(re.findall("<[a-zA-Z]", unit)) + 1
    assert too_deep(HEAD + unit * reps)


def test_a_large_well_formed_page_is_not_too_deep() -> None:
    # Past CAREFUL_FROM start tags and deep by the cheap count, with what real pages hold:
    # comments, scripts with markup in strings, quoted values with ">" and "</", implied
    # closings (<p> and <li> never closed).
    card = (
        '<div class="card"><!-- <div> --><a href="/p" title="a > b </div>">x</a>'
        "<script>var t = '<div><span>';</script><p>text<li>item</div>"
    )
    page = HEAD + "<div><ul>" + card * (CAREFUL_FROM // 5) + "</ul></div>"
    assert not too_deep(page)
