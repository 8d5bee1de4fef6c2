"""The demo shop: catalog determinism, markup, epochs, conditional requests, faults, logging."""

from __future__ import annotations

import asyncio
import json
import signal
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from urllib.parse import urlsplit

import aiohttp
import pytest
from selectolax.lexbor import LexborHTMLParser as HTMLParser

from demo.catalog import Catalog
from demo.faults import RESET, FaultInjector, Faults
from demo.shop import DemoShop

HOSTS = ("127.0.0.2", "127.0.0.3")
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
async def shop(tmp_path: Path) -> AsyncIterator[DemoShop]:
    # 150 products over 8 categories: ~19 per category, 3 listing pages of 8.
    shop = DemoShop(hosts=HOSTS, port=0, products=150, seed=1, log_path=tmp_path / "log.jsonl")
    await shop.start()
    try:
        yield shop
    finally:
        await shop.stop()


@pytest.fixture
async def http() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession() as session:
        yield session


async def get(http: aiohttp.ClientSession, url: str, **kw: object) -> tuple[int, str]:
    async with http.get(url, **kw) as resp:  # type: ignore[arg-type]
        return resp.status, await resp.text()


def json_ld_product(html: str) -> dict[str, object]:
    for node in HTMLParser(html).css('script[type="application/ld+json"]'):
        data = json.loads(node.text())
        if data.get("@type") == "Product":
            return data
    raise AssertionError("no Product JSON-LD")


def slug_of(href: str) -> str:
    return urlsplit(href).path.removeprefix("/p/")


# -- catalog ---------------------------------------------------------------------------------
def test_catalog_is_deterministic() -> None:
    for epoch in (0, 1, 2):
        assert Catalog(1, 60).truth(epoch) == Catalog(1, 60).truth(epoch)
    assert Catalog(1, 60).truth(0) != Catalog(2, 60).truth(0)
    truth = Catalog(1, 60).truth(0)
    assert len(truth) == 60
    assert len({p["sku"] for p in truth}) == 60
    assert {p["currency"] for p in truth} == {"EUR", "USD"}
    assert {p["availability"] for p in truth} <= {"in_stock", "out_of_stock", "preorder"}
    assert all(p["key"] == p["sku"] and p["price"].count(".") == 1 for p in truth)


def test_epochs_delist_reprice_and_restock_deterministic_shares() -> None:
    catalog = Catalog(7, 1000)
    base = {p["sku"]: p for p in catalog.truth(0)}
    one = {p["sku"]: p for p in catalog.truth(1)}
    assert len(one) == 900
    assert {p["sku"] for p in catalog.delisted(1)} == base.keys() - one.keys()
    repriced = [s for s in one if one[s]["price"] != base[s]["price"]]
    restocked = [s for s in one if one[s]["availability"] != base[s]["availability"]]
    assert len(repriced) == 135
    assert len(restocked) == 90
    # Cumulative: what epoch 1 delisted stays delisted.
    assert not (base.keys() - one.keys()) & {p["sku"] for p in catalog.truth(2)}


# -- pages -----------------------------------------------------------------------------------
async def test_home_links_categories_of_its_host(
    shop: DemoShop, http: aiohttp.ClientSession
) -> None:
    for host, base in enumerate(shop.base_urls):
        status, html = await get(http, f"{base}/")
        assert status == 200
        hrefs = {a.attributes["href"] for a in HTMLParser(html).css(".category-tile a")}
        assert hrefs == {f"/c/{c}?page=1" for c in shop.catalog.host_categories(host)}


async def test_product_page_json_ld_matches_truth(
    shop: DemoShop, http: aiohttp.ClientSession
) -> None:
    truth = shop.truth()
    for record in (truth[0], truth[1], truth[-1]):  # both hosts
        status, html = await get(http, record["url"])
        assert status == 200
        assert 10_000 < len(html) < 40_000
        ld = json_ld_product(html)
        assert ld["sku"] == record["sku"]
        assert ld["name"] == record["name"]
        assert ld["brand"] == {"@type": "Brand", "name": record["brand"]}
        assert ld["image"] == record["image"]
        assert ld["url"] == record["url"]
        offer = ld["offers"]
        assert isinstance(offer, dict)
        assert offer["price"] == record["price"]
        assert offer["priceCurrency"] == record["currency"]
        expected = {"in_stock": "InStock", "out_of_stock": "OutOfStock", "preorder": "PreOrder"}
        assert offer["availability"] == "https://schema.org/" + expected[record["availability"]]
        tree = HTMLParser(html)
        assert tree.css_first('link[rel="canonical"]').attributes["href"] == record["url"]
        assert tree.css_first('meta[property="og:type"]').attributes["content"] == "product"
        price = tree.css_first("span.price").text()
        cents = record["price"].split(".")[1]
        assert cents in price and ("€" in price if record["currency"] == "EUR" else "$" in price)
        related = tree.css(".related a")
        assert 3 <= len(related) <= 4
        origin = record["url"].rsplit("/p/", 1)[0]
        host = shop.catalog.by_slug[slug_of(record["url"])].host
        for a in related:  # related tiles stay on the product's host and are live products
            slug = slug_of(a.attributes["href"])
            assert shop.catalog.by_slug[slug].host == host
            assert (await get(http, origin + a.attributes["href"]))[0] == 200
        assert tree.css_first('a[href="/cart"]') is not None
        assert tree.css_first('a[href="/account"]') is not None


async def test_pages_are_only_served_by_their_host(
    shop: DemoShop, http: aiohttp.ClientSession
) -> None:
    record = shop.truth()[0]
    own = shop.catalog.by_slug[slug_of(record["url"])].host
    other = shop.base_urls[1 - own]
    assert (await get(http, f"{other}/p/{slug_of(record['url'])}"))[0] == 404
    category = record["category"]
    assert (await get(http, f"{other}/c/{category}"))[0] == 404
    assert (await get(http, f"{shop.base_urls[own]}/c/{category}"))[0] == 200
    assert (await get(http, f"{shop.base_urls[own]}/no/such/page"))[0] == 404


async def test_listing_pagination_covers_every_product_once(
    shop: DemoShop, http: aiohttp.ClientSession
) -> None:
    hrefs_seen: list[str] = []
    for category in shop.catalog.categories:
        url = shop.catalog.category_url(category)
        slugs: list[str] = []
        pages = 0
        while url:
            status, html = await get(http, url)
            assert status == 200
            pages += 1
            tree = HTMLParser(html)
            cards = [a.attributes["href"] for a in tree.css("a.product-card")]
            hrefs_seen += cards
            slugs += [slug_of(h) for h in cards if not slug_of(h).startswith("discontinued-")]
            nxt = tree.css_first("nav.pagination a[rel=next]")
            head_next = tree.css_first('link[rel="next"]')
            assert (nxt is None) == (head_next is None)
            url = head_next.attributes["href"] if head_next else ""
            if nxt:
                assert url.endswith(nxt.attributes["href"])
        expected = [
            urlsplit(p["url"]).path.removeprefix("/p/")
            for p in shop.truth()
            if p["category"] == category
        ]
        assert sorted(slugs) == sorted(expected)
        assert len(slugs) == len(set(slugs))
        assert pages == -(-len(expected) // 8)
    # Tracking params, fragments and broken links are all present somewhere.
    assert any("utm_source=newsletter" in h for h in hrefs_seen)
    assert any(h.endswith("#reviews") for h in hrefs_seen)
    broken = [h for h in hrefs_seen if "/p/discontinued-" in h]
    assert len(broken) == 2 * len(shop.base_urls)
    base = shop.base_urls[0]
    assert (await get(http, base + broken[0]))[0] == 404


async def test_robots_txt_and_sitemap(shop: DemoShop, http: aiohttp.ClientSession) -> None:
    base = shop.base_urls[1]
    status, robots = await get(http, f"{base}/robots.txt")
    assert status == 200
    lines = robots.splitlines()
    assert "User-agent: *" in lines
    assert "Disallow: /cart" in lines
    assert "Disallow: /account" in lines
    assert f"Sitemap: {base}/sitemap.xml" in lines
    # Disallowed pages exist, so a crawler ignoring robots shows up in the log.
    assert (await get(http, f"{base}/cart"))[0] == 200
    status, sitemap = await get(http, f"{base}/sitemap.xml")
    assert status == 200
    locs = set(HTMLParser(sitemap).css("loc"))
    assert locs
    on_host = {p["url"] for p in shop.truth() if p["url"].startswith(base + "/")}
    assert {n.text() for n in locs} >= on_host
    assert "<lastmod>" in sitemap


async def test_search_lists_matching_products(shop: DemoShop, http: aiohttp.ClientSession) -> None:
    base = shop.base_urls[0]
    status, html = await get(http, f"{base}/search?q=kettle")
    assert status == 200
    names = [n.text() for n in HTMLParser(html).css("a.product-card h3")]
    assert names and all("kettle" in n.lower() for n in names)


async def test_epoch_one_delists_and_reprices(shop: DemoShop, http: aiohttp.ClientSession) -> None:
    before = {p["sku"]: p for p in shop.truth()}
    shop.set_epoch(1)
    after = {p["sku"]: p for p in shop.truth()}
    gone = [before[s] for s in before.keys() - after.keys()]
    assert len(gone) == 15
    for record in gone[:3]:
        assert (await get(http, record["url"]))[0] == 404
    repriced = [p for s, p in after.items() if p["price"] != before[s]["price"]]
    assert repriced
    status, html = await get(http, repriced[0]["url"])
    assert status == 200
    assert json_ld_product(html)["offers"]["price"] == repriced[0]["price"]  # type: ignore[index]


async def test_etag_gives_304(shop: DemoShop, http: aiohttp.ClientSession) -> None:
    url = shop.truth()[0]["url"]
    async with http.get(url) as resp:
        etag = resp.headers["ETag"]
        assert resp.headers["Last-Modified"]
    async with http.get(url, headers={"If-None-Match": etag}) as resp:
        assert resp.status == 304
        assert await resp.read() == b""
    shop.etags = False
    async with http.get(url, headers={"If-None-Match": etag}) as resp:
        assert resp.status == 200


async def test_scripted_faults(shop: DemoShop, http: aiohttp.ClientSession) -> None:
    path = "/c/kitchen?page=1"
    url = shop.base_urls[0] + path
    shop.faults = Faults(script={path: [503, 503, 200], "/robots.txt": [429]}, retry_after=7)
    assert [(await get(http, url))[0] for _ in range(4)] == [503, 503, 200, 200]
    async with http.get(shop.base_urls[0] + "/robots.txt") as resp:
        assert resp.status == 429
        assert resp.headers["Retry-After"] == "7"
    # Two resets: aiohttp's client silently retries an idempotent request once.
    shop.faults = Faults(script={path: [RESET, RESET]})
    with pytest.raises(aiohttp.ServerDisconnectedError):
        await get(http, url)
    assert (await get(http, url))[0] == 200
    assert [r["status"] for r in shop.request_log[-3:]] == [0, 0, 200]


async def test_a_planted_transient_sold_out(shop: DemoShop, http: aiohttp.ClientSession) -> None:
    record = next(r for r in shop.truth() if r["availability"] == "in_stock")
    path = urlsplit(record["url"]).path
    shop.faults = Faults.from_dict({"sold_out": {path: 1}})
    stock = []
    for _ in range(3):
        status, html = await get(http, record["url"])
        offer = json_ld_product(html)["offers"]
        assert status == 200 and isinstance(offer, dict)
        stock.append(str(offer["availability"]).rsplit("/", 1)[-1])
    assert stock == ["OutOfStock", "InStock", "InStock"]  # one response only
    with pytest.raises(ValueError, match="sold_out"):
        Faults(sold_out={path: -1})


def test_random_faults_are_seeded_and_spare_robots() -> None:
    faults = Faults(rate_429=0.2, rate_503=0.2, rate_reset=0.1, seed=5)
    a, b = FaultInjector(faults), FaultInjector(faults)
    first = [a.decide(f"/p/{i}") for i in range(200)]
    assert first == [b.decide(f"/p/{i}") for i in range(200)]
    statuses = [d.status for d in first]
    assert 20 < statuses.count(429) < 60
    assert 20 < statuses.count(503) < 60
    assert 5 < sum(d.reset for d in first) < 40
    assert all(d.retry_after == 1 for d in first if d.status == 429)
    assert all(a.decide("/robots.txt", exempt=True).status is None for _ in range(50))
    with pytest.raises(ValueError):
        Faults.from_dict({"rate_429": 0.1, "bogus": 1})


async def test_request_log(shop: DemoShop, http: aiohttp.ClientSession) -> None:
    base = shop.base_urls[1]
    await get(http, f"{base}/robots.txt", headers={"User-Agent": "trawl-test"})
    await get(http, f"{base}/nope?x=1")
    await get(http, f"{base}/_shop/truth")  # control traffic is not logged
    robots, nope = shop.request_log
    host, port = urlsplit(base).hostname, urlsplit(base).port
    assert robots["host"] == host and robots["port"] == port
    assert robots["method"] == "GET" and robots["path"] == "/robots.txt"
    assert robots["status"] == 200 and robots["bytes"] > 0
    assert robots["headers"]["User-Agent"] == "trawl-test"
    assert robots["t_start"] <= robots["t_end"] <= nope["t_start"]
    assert nope["path"] == "/nope?x=1" and nope["status"] == 404
    assert shop.log_path is not None
    lines = shop.log_path.read_text().splitlines()
    assert [json.loads(line) for line in lines] == shop.request_log
    assert await shop.wait_for_request(lambda r: r["status"] == 404) == nope


async def test_control_endpoints_and_source_definition(
    shop: DemoShop, http: aiohttp.ClientSession
) -> None:
    base = shop.base_urls[0]
    _, body = await get(http, f"{base}/_shop/source")
    source = json.loads(body)
    assert source == shop.source_definition()
    assert source["allowed_domains"] == [urlsplit(u).netloc for u in shop.base_urls]
    assert source["allow_private"] == ["127.0.0.2/32", "127.0.0.3/32"]
    assert len(source["seeds"]) == len(shop.catalog.categories)
    for seed in source["seeds"]:
        assert (await get(http, seed))[0] == 200
    async with http.post(f"{base}/_shop/epoch?n=1") as resp:
        assert resp.status == 200
    assert shop.epoch == 1
    _, body = await get(http, f"{shop.base_urls[1]}/_shop/truth")
    assert json.loads(body) == shop.truth()
    async with http.post(f"{base}/_shop/faults", json={"script": {"/": [503]}}) as resp:
        assert resp.status == 200
    assert (await get(http, f"{base}/"))[0] == 503
    async with http.post(f"{base}/_shop/faults", json={"nonsense": 1}) as resp:
        assert resp.status == 400


async def test_fixed_port_is_shared_by_hosts() -> None:
    probe = DemoShop(hosts=HOSTS, port=0, products=10)
    await probe.start()
    port = urlsplit(probe.base_urls[0]).port
    await probe.stop()  # a port that was free a moment ago
    shop = DemoShop(hosts=HOSTS, port=port or 0, products=10)
    await shop.start()
    try:
        assert shop.base_urls == [f"http://{h}:{port}" for h in HOSTS]
        assert shop.truth()[0]["url"].startswith(shop.base_urls[0])
    finally:
        await shop.stop()


async def test_process_mode_serves_until_sigterm(tmp_path: Path) -> None:
    truth_file = tmp_path / "truth.json"
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "demo",
        "--hosts",
        ",".join(HOSTS),
        "--port",
        "0",
        "--products",
        "30",
        "--truth-file",
        str(truth_file),
        cwd=ROOT,
        stdout=asyncio.subprocess.PIPE,
    )
    try:
        assert proc.stdout is not None
        line = (await asyncio.wait_for(proc.stdout.readline(), 30)).decode()
        assert line.startswith("demo shop: http://127.0.0.2:")
        bases = line.split()[2:]
        assert len(bases) == 2
        async with aiohttp.ClientSession() as http:
            _, body = await get(http, f"{bases[1]}/_shop/truth")
        truth = json.loads(body)
        assert truth == json.loads(truth_file.read_text())
        assert len(truth) == 30 and truth[0]["url"].startswith(bases[0])
    finally:
        proc.send_signal(signal.SIGTERM)
        assert await asyncio.wait_for(proc.wait(), 10) == 0
