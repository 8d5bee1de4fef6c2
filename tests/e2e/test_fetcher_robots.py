"""robots.txt with two fetcher processes: forbidden paths never requested, robots.txt fetched
once per host (the KV cache and its lease are shared by the replicas)."""

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


async def test_two_fetchers_share_robots(env, settings, pool, tmp_path: Path) -> None:
    async with DemoShop(hosts=("127.0.0.2", "127.0.0.3"), port=0, products=40) as shop:
        definition = shop.source_definition("demo-shop")
        definition["links"].pop("deny")  # robots.txt alone keeps the crawler off /cart, /account
        async with pool.acquire() as conn:
            await save_source(conn, source_from_dict(definition))
        async with (
            Stack(env, tmp_path / "logs", scale="fetcher=2") as stack,
            TrawlClient(settings) as client,
        ):
            reply = await client.trigger("demo-shop")
            summary = await client.wait(reply.job_id, timeout=120)
            assert summary["status"] == "completed", stack.logs()
            job = await client.job(reply.job_id)
            workers = await client.workers()

    fetchers = [w for w in workers if "fetcher" in str(w)]
    assert len(fetchers) >= 2, workers
    forbidden = [r["path"] for r in shop.request_log if r["path"].startswith(("/cart", "/account"))]
    assert not forbidden
    robots = Counter(r["host"] for r in shop.request_log if r["path"] == "/robots.txt")
    assert robots == Counter({"127.0.0.2": 1, "127.0.0.3": 1})
    assert job["counters"]["outcome_robots_disallowed"] >= 2
