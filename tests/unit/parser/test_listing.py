"""A listing page yields no product: reached as pagination, or its cards link elsewhere."""

from __future__ import annotations

from pathlib import Path

import msgspec
import pytest

from schemas.source import Source
from services.parser.formats import parse_payload
from services.parser.listing import is_shop_page

CORPUS = Path(__file__).parent / "corpus"
PAGE = (CORPUS / "listing_reached_as_pagination.html").read_bytes()
URL = "https://hearth-goods.example.com/c/kettles?page=3"


def test_the_kind_travels_from_the_fetch_to_the_page_parse() -> None:
    assert parse_payload(PAGE, URL, kind="pagination").product is None
    # Without knowing how it was reached, one card with one buy button reads as a product:
    # that is why the kind matters.
    assert parse_payload(PAGE, URL, kind="page").product is not None


def test_the_source_pagination_pattern_marks_a_listing() -> None:
    source = msgspec.convert(
        {
            "name": "hearth",
            "seeds": ["https://hearth-goods.example.com/c/kettles"],
            "links": {"pagination": {"pattern": r"[?&]page=\d+"}},
        },
        Source,
    )
    assert parse_payload(PAGE, URL, source=source).product is None


def _page(body: str) -> bytes:
    return f"<html><body>{body}</body></html>".encode()


def test_the_block_that_holds_the_title_is_no_card() -> None:
    """Colour swatches link elsewhere with images, beside the title and the buy box."""
    body = (
        "<div class='product'><h1>Wool scarf, red</h1>"
        "<a href='/p/wool-scarf-blue'><img src='blue.jpg'></a>"
        "<span class='price'>€20</span><button class='add-to-cart'>Add to cart</button></div>"
    )
    product = parse_payload(_page(body), "https://shop.example.com/p/wool-scarf-red").product
    assert product is not None and product.name == "Wool scarf, red"


def test_a_card_beside_the_listing_title_is_still_a_card() -> None:
    body = (
        "<h1>Scarves</h1><ul><li><a href='/p/wool-scarf'><img src='s.jpg'></a>"
        "<span class='price'>€20</span><button class='add-to-cart'>Add to cart</button></li></ul>"
    )
    assert parse_payload(_page(body), "https://shop.example.com/c/scarves").product is None


def test_a_control_before_the_title_is_no_buy_box() -> None:
    """A header's basket, then the category's title and its grid: still a listing."""
    cards = "".join(
        f"<li><a href='/p/plant-{i}'><img src='{i}.jpg'></a>"
        f"<span class='price'>€{i + 3}</span></li>"
        for i in range(8)
    )
    body = (
        "<div><div><a class='add-to-cart' href='/basket'>Basket</a></div>"
        f"<h1>Shrubs</h1><ul>{cards}</ul></div>"
    )
    assert parse_payload(_page(body), "https://shop.example.com/c/shrubs").product is None


@pytest.mark.parametrize(
    "owner",
    [
        "<a href='/brands/acme'><img class='brand-logo' src='acme.png'></a>",
        "<a class='product-manufacturer__link' href='/acme'>Maker: <img src='acme.png'></a>",
        "Sold by <a id='seller_name' href='/shops/acme'>Acme</a>",
    ],
)
def test_the_brand_or_seller_link_in_a_buy_box_is_no_card(owner: str) -> None:
    body = (
        "<h1>Wool scarf</h1><div class='gallery'><img src='scarf.jpg'></div>"
        f"<div class='buy-box'><div>{owner}</div><span class='price'>€20</span>"
        "<form action='/cart/add'><button type='submit'>Add to cart</button></form></div>"
    )
    product = parse_payload(_page(body), "https://shop.example.com/p/wool-scarf").product
    assert product is not None and product.name == "Wool scarf"


def test_a_card_with_a_brand_logo_is_still_a_card() -> None:
    card = (
        "<li><a href='/p/wool-scarf'><img src='s.jpg'></a><img class='brand-logo' src='b.png'>"
        "<span class='price'>€20</span><button class='add-to-cart'>Add to cart</button></li>"
    )
    body = f"<h1>Scarves</h1><ul>{card}</ul>"
    assert parse_payload(_page(body), "https://shop.example.com/c/scarves").product is None


@pytest.mark.parametrize(
    ("url", "shop_page"),
    [
        ("https://s.example/basket/", True),
        ("https://s.example/de/warenkorb", True),
        ("https://s.example/account/login", True),
        ("https://s.example/search?q=tent", True),
        ("https://s.example/catalogsearch/result/?q=tent", True),
        ("https://s.example/product-reviews/B08T5QN7ZQ/?pageNumber=2", True),
        ("https://s.example/index.php?route=product/category&path=20_27&page=3", True),
        ("https://s.example/index.php?controller=cart&action=show", True),
        ("https://s.example/collections/rucksaecke?page=3", True),  # a Shopify collection
        ("https://s.example/collections/all", True),
        ("https://s.example/collections/packs/products/alpine-30l", False),  # its product
        # a product's own page, whatever words its slug holds
        ("https://s.example/products/cart-organizer-tray", False),
        ("https://s.example/index.php?route=product/product&product_id=42", False),
        ("https://s.example/p/search-light-200lm", False),
        ("https://jo.s.example/ar/search/145678901/toyota-camry-2016", False),  # an ad's page
    ],
)
def test_a_shops_basket_account_search_and_category_pages(url: str, shop_page: bool) -> None:
    assert is_shop_page(url) is shop_page
