"""Navigation, end to end: a crawl of the demo shop reaches each page the way a visitor does.
The seed is typed (no Referer, ``Sec-Fetch-Site: none``); a page found on another carries that
page as Referer with ``same-origin``; an image carries its product page."""

from __future__ import annotations

from pathlib import Path

import pytest

from control.client import TrawlClient
from demo.shop import DemoShop
from services.scheduler.catalog import save_source
from shared.sources import source_from_dict
from tests.support.stack import Stack

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(180)]


async def test_discovered_pages_carry_the_page_that_linked_them(
    env, settings, pool, tmp_path: Path
) -> None:
    async with DemoShop(hosts=("127.0.0.2",), port=0, products=12) as shop:
        async with pool.acquire() as conn:
            await save_source(conn, source_from_dict(shop.source_definition("shop")))
        async with Stack(env, tmp_path / "logs") as stack, TrawlClient(settings) as client:
            job = await client.trigger("shop")
            summary = await client.wait(job.job_id, timeout=120)
            assert summary["status"] == "completed", stack.logs()
        base = shop.base_urls[0]
        log = [r for r in shop.request_log if r["path"] != "/robots.txt"]

    def header(r: dict, name: str) -> str | None:
        return {k.lower(): v for k, v in r["headers"].items()}.get(name.lower())

    seeds = [r for r in log if header(r, "Referer") is None]
    found = [r for r in log if header(r, "Referer") is not None]
    assert seeds and found
    assert all(header(r, "Sec-Fetch-Site") == "none" for r in seeds)
    requested = {r["path"] for r in log}
    for r in found:
        referer = header(r, "Referer") or ""
        # The linking page is one this crawl fetched, on the same origin.
        assert referer.startswith(base + "/") and referer.removeprefix(base) in requested, referer
        assert header(r, "Sec-Fetch-Site") == "same-origin"
    products = [r for r in found if r["path"].startswith("/p/")]
    images = [r for r in found if r["path"].startswith("/img/")]
    assert products and images, sorted(requested)
    assert all(header(r, "Sec-Fetch-Dest") == "document" for r in products)
    assert all(header(r, "Sec-Fetch-Dest") == "image" for r in images)
    # An image's Referer is the product page it was read from.
    assert all((header(r, "Referer") or "").removeprefix(base).startswith("/p/") for r in images)
