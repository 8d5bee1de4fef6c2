from __future__ import annotations

import gzip

import msgspec

from schemas.source import Source
from services.parser.formats import parse_payload
from services.parser.sitemap import parse_sitemap

SOURCE = msgspec.convert(
    {
        "name": "s",
        "seeds": ["https://shop.test/"],
        "links": {"product": {"pattern": "/p/[^/]+$"}, "pagination": {"pattern": "[?&]page=\\d+"}},
    },
    Source,
)

URLSET = b"""<?xml version="1.0" encoding="UTF-8"?>
<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">
  <url><loc>https://shop.test/p/kettle</loc><lastmod>2024-06-01</lastmod></url>
  <url><loc> https://shop.test/c/kitchen?page=2&amp;utm_source=x </loc></url>
  <url><loc><![CDATA[https://shop.test/about]]></loc></url>
  <url><loc>https://shop.test/p/kettle#reviews</loc></url>
  <url><loc>javascript:alert(1)</loc></url>
</urlset>"""

INDEX = b"""<?xml version="1.0" encoding="UTF-8"?>
<sitemapindex xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">
  <sitemap><loc>https://shop.test/sitemap-products.xml.gz</loc></sitemap>
  <sitemap><loc>https://shop.test/sitemap-pages.xml</loc></sitemap>
</sitemapindex>"""


def test_urlset_links_are_canonical_deduplicated_and_classified() -> None:
    links = {
        (link.url, link.kind)
        for link in parse_sitemap(URLSET, "https://shop.test/sitemap.xml", SOURCE)
    }
    assert links == {
        ("https://shop.test/p/kettle", "product"),
        ("https://shop.test/c/kitchen?page=2", "pagination"),
        ("https://shop.test/about", "page"),
    }


def test_an_index_yields_sitemaps_and_gzip_is_read() -> None:
    links = parse_sitemap(gzip.compress(INDEX), "https://shop.test/sitemap.xml.gz", SOURCE)
    assert [(link.url, link.kind) for link in links] == [
        ("https://shop.test/sitemap-products.xml.gz", "sitemap"),
        ("https://shop.test/sitemap-pages.xml", "sitemap"),
    ]


def test_robots_txt_sitemap_lines() -> None:
    body = (
        b"User-agent: *\nDisallow: /cart\nSitemap: https://shop.test/sitemap.xml\n"
        b"sitemap:https://shop.test/news.xml\n"
    )
    links = parse_sitemap(body, "https://shop.test/robots.txt", SOURCE)
    assert [(link.url, link.kind) for link in links] == [
        ("https://shop.test/sitemap.xml", "sitemap"),
        ("https://shop.test/news.xml", "sitemap"),
    ]


def test_payloads_route_by_format_and_garbage_is_harmless() -> None:
    page = parse_payload(URLSET, "https://shop.test/sitemap.xml", source=SOURCE)
    assert page.product is None and len(page.links) == 3
    assert (
        parse_payload(b"\x1f\x8b broken gzip", "https://shop.test/s.xml.gz", kind="sitemap").links
        == []
    )
    html = parse_payload(b"<html><a href='/p/x'>x</a></html>", "https://shop.test/", source=SOURCE)
    assert [link.url for link in html.links] == ["https://shop.test/p/x"]
