"""Time ``parse_page`` over a generated product page: ``python -m bench.parser_bench [N]``.

The page has what real product pages carry: a JSON-LD product with variants, OpenGraph tags,
microdata breadcrumbs, ~200 navigation/footer links, recommendation tiles and a long
description. ``--cold`` clears the URL cache before every page (no link seen before).

``--site N`` parses instead the product pages of a generated static shop of N products
(``bench.static_site``: 30-60 KB pages, ~200 links each), each once and at its own URL, as a
crawl meets them: links shared by the whole site are seen before, the page's own are not.
``--links`` also reports the link pass alone (``extract_links``, as ``parse_page`` calls it).
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from services.parser import page
from services.parser.page import parse_page
from shared.urls import _canonicalize

URL = "https://shop.example.com/products/trail-runner-2?utm_source=bench"


def build_page() -> bytes:
    product = {
        "@context": "https://schema.org",
        "@type": "ProductGroup",
        "name": "Trail Runner 2",
        "productGroupID": "TR-2",
        "brand": {"@type": "Brand", "name": "Stride"},
        "image": [f"https://cdn.example.com/tr2-{i}.jpg" for i in range(6)],
        "hasVariant": [
            {
                "@type": "Product",
                "sku": f"TR-2-{size}",
                "offers": {
                    "@type": "Offer",
                    "price": f"{89 + size % 3}.95",
                    "priceCurrency": "USD",
                    "availability": "https://schema.org/InStock",
                },
            }
            for size in range(36, 47)
        ],
    }
    nav = "".join(
        f'<li><a href="/collections/cat-{i}?ref=nav">Category {i}</a></li>' for i in range(150)
    )
    footer = "".join(f'<a href="/pages/info-{i}">Info {i}</a>' for i in range(40))
    tiles = "".join(
        f'<div class="product-card"><a href="/products/rec-{i}"><img src="/i/{i}.jpg">'
        f'<span class="price">$4{i}.00</span></a></div>'
        for i in range(16)
    )
    text = "<p>" + "Breathable mesh upper, grippy lugs and a rock plate. " * 400 + "</p>"
    html = f"""<!doctype html><html lang="en"><head><meta charset="utf-8">
<title>Trail Runner 2 | Shop</title><link rel="canonical" href="https://shop.example.com/products/trail-runner-2">
<meta property="og:type" content="product"><meta property="og:title" content="Trail Runner 2">
<meta property="og:image" content="https://cdn.example.com/tr2-0.jpg">
<meta property="product:price:amount" content="89.95">
<meta property="product:price:currency" content="USD">
<script type="application/ld+json">{json.dumps(product)}</script>
<script>window.dataLayer = [{{"event": "view_item", "items": [{{"id": "TR-2"}}]}}];</script>
</head><body><header><nav><ul>{nav}</ul></nav></header>
<ol itemscope itemtype="https://schema.org/BreadcrumbList"><li itemprop="itemListElement" itemscope
itemtype="https://schema.org/ListItem"><a itemprop="item" href="/"><span itemprop="name">Home</span>
</a></li></ol>
<main><h1>Trail Runner 2</h1><span class="price">$89.95</span>
<form action="/cart/add"><button type="submit">Add to cart</button></form>{text}
<section class="related-products">{tiles}</section></main><footer>{footer}</footer></body></html>"""
    return html.encode("utf-8")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("n", nargs="?", type=int, default=2000)
    parser.add_argument("--cold", action="store_true", help="clear the URL cache every page")
    parser.add_argument("--site", type=int, metavar="PRODUCTS", help="parse a static shop's pages")
    parser.add_argument("--links", action="store_true", help="with --site: time the link pass")
    args = parser.parse_args()
    if args.site:
        site_bench(args.site, links=args.links)
        return
    body = build_page()
    result = parse_page(body, URL)
    assert result.product is not None, "the bench page must yield a product"
    start, cpu = time.perf_counter(), time.process_time()
    for _ in range(args.n):
        if args.cold:
            _canonicalize.cache_clear()
        parse_page(body, URL)
    elapsed, cpu = time.perf_counter() - start, time.process_time() - cpu
    # CPU time is the figure to compare: wall time on a shared machine measures its neighbours.
    print(
        f"{args.n} pages of {len(body) / 1024:.0f} KiB, {len(result.links)} links: "
        f"{args.n / elapsed:,.0f} pages/s ({elapsed / args.n * 1e3:.2f} ms/page wall, "
        f"{cpu / args.n * 1e3:.2f} ms/page CPU)"
    )


def _timed(fn: Callable[..., Any], times: list[float]) -> Callable[..., Any]:
    def timed(*args: Any, **kwargs: Any) -> Any:
        cpu = time.process_time()
        try:
            return fn(*args, **kwargs)
        finally:
            times.append(time.process_time() - cpu)

    return timed


def site_bench(products: int, *, links: bool = False) -> None:
    from bench.static_site import generate

    with tempfile.TemporaryDirectory() as tmp:
        site = generate(Path(tmp), products=products)
        pages = [(f"http://127.0.0.1:8080{p.path}", (site.root / p.path[1:]).read_bytes())
                 for p in site.products]  # fmt: skip
    times: list[float] = []
    counts: list[int] = []
    link_times: list[float] = []
    if links:  # the name parse_page calls, wrapped for this process only
        page.extract_links = _timed(page.extract_links, link_times)  # type: ignore[assignment]
    for url, body in pages:
        cpu = time.process_time()
        result = parse_page(body, url, content_type="text/html")
        times.append(time.process_time() - cpu)
        counts.append(len(result.links))
        assert result.product is not None, url
    total = sum(times)
    print(
        f"{len(pages)} product pages of {sum(len(b) for _, b in pages) / len(pages) / 1024:.0f} "
        f"KiB, {statistics.mean(counts):.0f} links: {total / len(pages) * 1e3:.2f} ms/page CPU "
        f"(median {statistics.median(times) * 1e3:.2f})"
    )
    if link_times:
        print(
            f"  extract_links: {sum(link_times) / len(link_times) * 1e3:.3f} ms/page CPU "
            f"(median {statistics.median(link_times) * 1e3:.3f})"
        )


if __name__ == "__main__":
    main()
