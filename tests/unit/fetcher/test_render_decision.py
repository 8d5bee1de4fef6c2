"""``render: auto``'s decision (``services.fetcher.render.decide``): a document that shows a
product or a listing is stored as fetched, a shell that scripts fill is rendered, and a domain
whose shell rendered into content is rendered without asking until its time runs out."""

from __future__ import annotations

import pytest

from services.fetcher.render.decide import LISTING_LINKS, Learnt, shows_content

NAV = '<header><a href="/">Home</a><a href="/c/a">A</a><a href="/c/b">B</a></header>'
CARDS = "".join(f'<a href="/p/{i}">Item {i}</a>' for i in range(LISTING_LINKS))


@pytest.mark.parametrize(
    "html",
    [
        '<script type="application/ld+json">{"@type": "Product", "name": "Lamp"}</script>',
        '<script type="application/ld+json">{"@graph": [{"@type":"Offer"}]}</script>',
        '<div itemscope itemtype="https://schema.org/Product"><h1>Lamp</h1></div>',
        '<meta property="og:type" content="product">',
        '<meta property="product:price:amount" content="9.99">',
        f"{NAV}<main>{CARDS}</main>",
    ],
)
def test_a_document_that_shows_a_product_or_a_listing_is_stored_as_fetched(html: str) -> None:
    assert shows_content(f"<html><head></head><body>{html}</body></html>".encode())


@pytest.mark.parametrize(
    "html",
    [
        '<div id="app"></div><script src="/app.js"></script>',
        # links only in the page's chrome: header, nav, footer, scripts, templates
        f'{NAV}<nav>{CARDS}</nav><footer>{CARDS}</footer><div id="root"></div>',
        f"<template>{CARDS}</template><main>{CARDS[: CARDS.index('</a>') + 4]}</main>",
        '<script type="application/ld+json">{"@type": "WebSite"}</script>',
    ],
)
def test_a_shell_that_scripts_fill_is_rendered(html: str) -> None:
    assert not shows_content(f"<html><body>{html}</body></html>")


def test_a_learnt_domain_needs_the_browser_until_its_time_runs_out() -> None:
    learnt = Learnt(ttl=3600)
    assert not learnt.needs_browser("shop:example.com")
    learnt.remember("shop:example.com")
    assert learnt.needs_browser("shop:example.com")
    assert not learnt.needs_browser("shop:other.example")  # per domain
    assert not learnt.needs_browser("other:example.com")  # and per source
    expired = Learnt(ttl=-1)  # already past: as if the day had gone by
    expired.remember("shop:example.com")
    assert not expired.needs_browser("shop:example.com")
