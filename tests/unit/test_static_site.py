"""The static bench site's shape (bench/static_site.py): page sizes, links per page, cards per
listing, pagination, robots.txt, and a truth that matches the pages. No server."""

from __future__ import annotations

import hashlib
import json
import statistics
from pathlib import Path
from urllib.parse import parse_qsl, urlsplit

import pytest
from protego import Protego
from selectolax.lexbor import LexborHTMLParser

from bench.static_site import CARDS_PER_LISTING, FACET_PARAMS, Site, generate, listing_path

BASE = "http://shop.test"


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Site:
    # 1,200 products in the 20 categories: 60 a category, two or three listing pages each.
    out = tmp_path_factory.mktemp("static-site")
    return generate(out / "site", products=1200, seed=7, truth_file=out / "truth.json")


def _tree(site: Site, path: str) -> LexborHTMLParser:
    return LexborHTMLParser((site.root / path.lstrip("/")).read_text())


def _hrefs(tree: LexborHTMLParser, selector: str = "a[href]") -> list[str]:
    return [a.attributes["href"] or "" for a in tree.css(selector)]


def _listings(site: Site) -> list[str]:
    return [listing_path(c, n) for c, pages in site.listings.items() for n in range(1, pages + 1)]


def test_product_pages_weigh_30_to_60_kb_around_45(site: Site) -> None:
    sizes = [(site.root / p.path.lstrip("/")).stat().st_size for p in site.products]
    assert sizes == site.product_sizes
    assert min(sizes) >= 30_000
    assert max(sizes) <= 60_000
    assert 40_000 <= statistics.median(sizes) <= 50_000


def test_pages_carry_about_200_links_of_every_kind(site: Site) -> None:
    counts = []
    for path in [*_listings(site), *(p.path for p in site.products[::8])]:
        tree = _tree(site, path)
        hrefs = _hrefs(tree)
        counts.append(len(hrefs))
        assert tree.css_first("header nav.main-nav") is not None
        assert len(_hrefs(tree, "footer a[href]")) >= 30
        assert len(_hrefs(tree, "nav.breadcrumbs a[href]")) >= 1
        assert any("utm_source=" in h for h in _hrefs(tree, "li.product-card a[href]"))
        assert any(urlsplit(h).query.startswith(FACET_PARAMS) for h in hrefs)
    assert min(counts) >= 150
    assert max(counts) <= 260
    assert 180 <= statistics.mean(counts) <= 230


def test_listings_have_20_to_30_cards_and_numbered_pagination(site: Site) -> None:
    lo, hi = CARDS_PER_LISTING
    for category, pages in site.listings.items():
        assert pages >= 2
        for n in range(1, pages + 1):
            tree = _tree(site, listing_path(category, n))
            assert lo <= len(tree.css("li.product-card")) <= hi
            pager = _hrefs(tree, "nav.pagination a[href]")
            others = {listing_path(category, k) for k in range(1, pages + 1)} - {
                listing_path(category, n)
            }
            assert others <= set(pager)  # few pages: every other page is linked by number
            nxt = tree.css_first("nav.pagination a[rel=next]")
            if n < pages:
                assert nxt is not None
                assert nxt.attributes["href"] == listing_path(category, n + 1)
            else:
                assert nxt is None


def test_long_listings_number_a_window_of_pages(tmp_path: Path) -> None:
    shop = generate(tmp_path / "site", products=400, categories=1, seed=5)
    ((category, pages),) = shop.listings.items()
    assert pages >= 13
    seen: list[str] = []
    path: str | None = listing_path(category, 1)
    while path:  # rel=next from the first page visits every page once, in order
        tree = _tree(shop, path)
        n = len(seen) + 1
        numbered = {int(a.text()) for a in tree.css("nav.pagination a[href]") if a.text().isdigit()}
        window = {k for k in range(n - 3, n + 4) if 1 <= k <= pages and k != n}
        assert numbered == window | ({1, pages} - {n})
        seen.append(path)
        nxt = tree.css_first("nav.pagination a[rel=next]")
        path = nxt.attributes["href"] if nxt is not None else None
    assert seen == [listing_path(category, k) for k in range(1, pages + 1)]


def test_product_pages_have_related_products_and_jsonld(site: Site) -> None:
    for p in site.products[:40]:
        tree = _tree(site, p.path)
        related = _hrefs(tree, ".related li.product-card a[href]")
        assert len(related) >= 20
        assert all(h.startswith("/p/") and "utm_" in h for h in related)
        scripts = [
            json.loads(s.text())
            for s in tree.css('script[type="application/ld+json"]')
            if '"Product"' in s.text()
        ]
        assert len(scripts) == 1
        assert scripts[0]["sku"] == p.sku


def test_truth_matches_the_pages(site: Site) -> None:
    assert site.truth_file is not None
    truth = json.loads(site.truth_file.read_text())
    assert len(truth) == len(site.products) == 1200
    assert len({t["sku"] for t in truth}) == len(truth)
    for t in truth:
        tree = _tree(site, t["path"])
        (data,) = [
            json.loads(s.text())
            for s in tree.css('script[type="application/ld+json"]')
            if '"Product"' in s.text()
        ]
        offer = data["offers"]
        assert (data["sku"], data["name"]) == (t["sku"], t["name"])
        assert (offer["price"], offer["priceCurrency"]) == (t["price"], t["currency"])
        assert offer["availability"].endswith(t["availability"])
    # Every product is on exactly one listing page.
    listed: list[str] = []
    for path in _listings(site):
        listed += [
            urlsplit(h).path for h in _hrefs(_tree(site, path), "a.product-card__title[href]")
        ]
    assert sorted(listed) == sorted(t["path"] for t in truth)


def test_robots_disallows_facets_and_allows_every_page(site: Site) -> None:
    robots = Protego.parse((site.root / "robots.txt").read_text())
    pages = ["/", *_listings(site), *(p.path for p in site.products)]
    pages += [f"/info/{p.name}" for p in (site.root / "info").iterdir()]
    assert len(pages) == site.pages
    for path in pages:
        assert robots.can_fetch(BASE + path, "*"), path
    facets = set()
    for path in _listings(site)[:3] + [p.path for p in site.products[:3]]:
        for href in _hrefs(_tree(site, path)):
            query = dict(parse_qsl(urlsplit(href).query))
            if any(k in query for k in FACET_PARAMS):
                facets.add(href)
            elif query:  # the only other query parameters are tracking ones
                assert all(k.startswith("utm_") for k in query), href
                assert robots.can_fetch(BASE + href, "*"), href
    assert facets
    for href in facets:
        assert not robots.can_fetch(BASE + href, "*"), href


def test_the_same_seed_writes_the_same_bytes(tmp_path: Path) -> None:
    def digest(root: Path) -> str:
        h = hashlib.sha256()
        for f in sorted(root.rglob("*")):
            if f.is_file():
                h.update(str(f.relative_to(root)).encode() + f.read_bytes())
        return h.hexdigest()

    a = generate(tmp_path / "a", products=30, categories=2, seed=3)
    b = generate(tmp_path / "b", products=30, categories=2, seed=3)
    c = generate(tmp_path / "c", products=30, categories=2, seed=4)
    assert a.truth() == b.truth()
    assert digest(a.root) == digest(b.root) != digest(c.root)
