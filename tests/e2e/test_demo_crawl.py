"""End to end: the four services as real processes crawl the demo shop."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from control.client import TrawlClient
from demo.shop import DemoShop
from services.scheduler.catalog import save_source
from shared.sources import source_from_dict
from tests.support.stack import Stack

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(180)]


@pytest.fixture
async def shop():
    async with DemoShop(hosts=("127.0.0.2", "127.0.0.3"), port=0, products=60) as s:
        yield s


async def test_demo_crawl_end_to_end(shop, env, settings, pool, tmp_path: Path) -> None:
    definition = shop.source_definition("demo-shop")
    # No deny rules: robots.txt alone must keep the crawler off /cart and /account.
    definition["links"].pop("deny")
    async with pool.acquire() as conn:
        await save_source(conn, source_from_dict(definition))

    async with Stack(env, tmp_path / "logs") as stack, TrawlClient(settings) as client:
        reply = await client.trigger("demo-shop")
        assert reply.error is None, reply.error
        summary = await client.wait(reply.job_id, timeout=120)
        assert summary["status"] == "completed", stack.logs()
        products = {p["key"]: p for p in await client.products("demo-shop")}
        job = await client.job(reply.job_id)

    truth = {p["key"]: p for p in shop.truth()}
    assert set(products) == set(truth)
    for key, expected in truth.items():
        got = products[key]
        assert (got["name"], got["price"], got["currency"], got["availability"]) == (
            expected["name"],
            expected["price"],
            expected["currency"],
            expected["availability"],
        ), key
        assert got["last_seen_job"] == reply.job_id

    crawl_requests = [r for r in shop.request_log if r["path"] != "/robots.txt"]
    seen = Counter((r["host"], r["port"], r["path"]) for r in crawl_requests)
    twice = [k for k, n in seen.items() if n > 1]
    assert not twice, f"requested more than once: {twice}"
    forbidden = [r["path"] for r in shop.request_log if r["path"].startswith(("/cart", "/account"))]
    assert not forbidden
    robots = Counter(r["host"] for r in shop.request_log if r["path"] == "/robots.txt")
    assert set(robots.values()) == {1}

    counters = job["counters"]
    assert job["status"] == "completed"
    assert counters["open"] == 0
    assert counters["products"] == len(truth)
    assert counters.get("failed", 0) == 0
    assert counters["outcome_gone"] == 4  # the shop's broken links: 2 per host
    assert counters["outcome_robots_disallowed"] >= 2  # /cart and /account, never fetched
    assert counters["total"] == counters["done"]
    assert summary["refresh"]["applied"] == len(truth)


async def test_second_crawl_uses_conditional_requests(
    shop, env, settings, pool, tmp_path: Path
) -> None:
    async with pool.acquire() as conn:
        await save_source(conn, source_from_dict(shop.source_definition("demo-shop")))
    async with Stack(env, tmp_path / "logs") as stack, TrawlClient(settings) as client:
        first = await client.trigger("demo-shop")
        assert (await client.wait(first.job_id, timeout=120))["status"] == "completed"
        logged = len(shop.request_log)
        second = await client.trigger("demo-shop")
        assert second.job_id != first.job_id
        summary = await client.wait(second.job_id, timeout=120)
        assert summary["status"] == "completed", stack.logs()
        job = await client.job(second.job_id)
        products = await client.products("demo-shop")

    again = [r for r in shop.request_log[logged:] if r["path"] != "/robots.txt"]
    pages = [r for r in again if r["status"] in (200, 304)]
    resent = [
        (r["path"], r["status"], "If-None-Match" in r["headers"])
        for r in pages
        if r["status"] != 304
    ]
    assert pages and not resent, f"unchanged pages were re-sent: {resent[:5]}"
    assert all(r["bytes"] == 0 for r in pages)
    assert all("If-None-Match" in r["headers"] for r in pages)
    counters = job["counters"]
    # Every page was re-validated, its links re-discovered from the stored payload, and every
    # product counted as seen.
    assert counters["outcome_not_modified"] == len(pages)
    assert counters["products"] == len(shop.truth())
    assert summary["refresh"]["seen"] == len(shop.truth())
    assert all(p["consecutive_misses"] == 0 for p in products)
    assert len(products) == len(shop.truth())
