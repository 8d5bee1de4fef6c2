"""Seeds of every kind against the demo shop: sitemaps announced in robots.txt, and keyword
searches with per-keyword counts."""

from __future__ import annotations

from pathlib import Path

import pytest

from control.client import TrawlClient
from demo.shop import DemoShop
from services.scheduler.catalog import save_source
from shared.sources import source_from_dict
from tests.support.stack import Stack

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(120)]


async def test_sitemaps_from_robots_txt_find_every_product(
    env, settings, pool, tmp_path: Path
) -> None:
    async with DemoShop(hosts=("127.0.0.2", "127.0.0.3"), port=0, products=40) as shop:
        definition = shop.source_definition("mapped")
        definition["seeds"] = []
        definition["sitemaps"] = "robots"
        definition["links"]["max_depth"] = 2  # robots.txt → sitemap → pages
        # sitemaps: robots needs an origin per host: the allowed domains give them.
        definition["seeds"] = [f"{u}/" for u in shop.base_urls]
        async with pool.acquire() as conn:
            await save_source(conn, source_from_dict(definition))
        async with Stack(env, tmp_path / "logs") as stack, TrawlClient(settings) as client:
            reply = await client.trigger("mapped")
            summary = await client.wait(reply.job_id, timeout=100)
            assert summary["status"] == "completed", stack.logs()
            products = {p["key"] for p in await client.products("mapped")}
            first_crawl = len(shop.request_log)
            # Again, from the sitemaps alone: their <lastmod> is older than our copies, so no
            # page is fetched, and every product still counts as seen.
            definition = {
                **definition,
                "seeds": [],
                "sitemaps": [f"{u}/sitemap.xml" for u in shop.base_urls],
            }
            async with pool.acquire() as conn:
                await save_source(conn, source_from_dict(definition))
            again = await client.trigger("mapped")
            second = await client.wait(again.job_id, timeout=100)
            assert second["status"] == "completed", stack.logs()
            misses = {p["consecutive_misses"] for p in await client.products("mapped")}
        paths = {r["path"] for r in shop.request_log}
        refetched = [
            r["path"] for r in shop.request_log[first_crawl:] if r["path"].startswith("/p/")
        ]
    assert "/sitemap.xml" in paths
    assert products == {p["key"] for p in shop.truth()}
    assert refetched == []
    assert second["refresh"]["seen"] == len(products) and misses == {0}


async def test_keyword_searches_are_seeds_with_per_keyword_counts(
    env, settings, pool, tmp_path: Path
) -> None:
    async with DemoShop(hosts=("127.0.0.2",), port=0, products=40) as shop:
        definition = shop.source_definition("searched")
        definition["seeds"] = []
        definition["search"] = {"url": f"{shop.base_urls[0]}/search?q={{keyword}}&page=1"}
        async with pool.acquire() as conn:
            await save_source(conn, source_from_dict(definition))
        async with Stack(env, tmp_path / "logs") as stack, TrawlClient(settings) as client:
            reply = await client.trigger("searched", keywords=["kettle", "lamp"])
            summary = await client.wait(reply.job_id, timeout=100)
            assert summary["status"] == "completed", stack.logs()
            products = {p["name"] for p in await client.products("searched")}
        searched = [r["path"] for r in shop.request_log if r["path"].startswith("/search")]
        truth = shop.truth()
    assert any("q=kettle" in p for p in searched) and any("q=lamp" in p for p in searched)
    counters = summary["counters"]
    for keyword in ("kettle", "lamp"):
        matching = {p["name"] for p in truth if keyword in p["name"].lower()}
        assert matching <= products, keyword  # every matching product was reached
        assert counters[f"kw:{keyword}:pages"] >= 1
        assert counters[f"kw:{keyword}:products"] >= (1 if matching else 0)
