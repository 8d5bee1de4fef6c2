"""End to end: the refresh lifecycle on the demo shop — price/stock history, consecutive misses,
delisting after exactly the threshold, a bad crawl that counts nothing, and returning products.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from control.client import TrawlClient
from demo.faults import Faults
from demo.shop import DemoShop
from services.scheduler.catalog import save_source
from shared.sources import source_from_dict
from tests.support.stack import Stack

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(240)]


@pytest.fixture
async def shop():
    async with DemoShop(hosts=("127.0.0.2", "127.0.0.3"), port=0, products=60) as s:
        yield s


async def _snapshots(pool) -> Counter[str]:
    async with pool.acquire() as conn:
        rows = await conn.fetch("SELECT key FROM snapshots WHERE source = 'demo-shop'")
    return Counter(r["key"] for r in rows)


async def _run(client: TrawlClient, kind: str = "refresh") -> dict:
    reply = await client.trigger("demo-shop", kind=kind)
    assert reply.error is None, reply.error
    summary = await client.wait(reply.job_id, timeout=120)
    assert summary["status"] == "completed", summary
    assert "refresh" in summary, f"no refreshed event: {summary}"
    summary["job"] = await client.job(reply.job_id)
    summary["products_by_key"] = {p["key"]: p for p in await client.products("demo-shop")}
    return summary


async def test_refresh_lifecycle(shop, env, settings, pool, tmp_path: Path) -> None:
    definition = shop.source_definition("demo-shop")
    # A failed page fails at once (no retry delays) and the threshold is the default 3.
    definition["retry"] = {"max_retries": 0}
    # Categories are seeds and their products one hop away: a crawl seeded at one product page
    # then reaches its neighbours, not the catalog.
    definition["links"]["max_depth"] = 1
    # The rows must show each crawl's truth as it completes: verification before alerting
    # (tests/e2e/test_verification.py) would hold stock changes and delistings until a verify
    # job re-checks them.
    definition["verify"] = False
    async with pool.acquire() as conn:
        await save_source(conn, source_from_dict(definition))

    before = {p["key"]: p for p in shop.truth()}
    shop.set_epoch(1)
    after = {p["key"]: p for p in shop.truth()}
    gone = set(before) - set(after)
    repriced = {k for k in after if after[k]["price"] != before[k]["price"]}
    restocked = {k for k in after if after[k]["availability"] != before[k]["availability"]}
    unchanged = set(after) - repriced - restocked
    assert gone and repriced and restocked and unchanged
    shop.set_epoch(0)

    async with Stack(env, tmp_path / "logs") as stack, TrawlClient(settings) as client:
        # Epoch 0: the first crawl, one snapshot per product.
        first = await _run(client, kind="discovery")
        assert set(first["products_by_key"]) == set(before), stack.logs()
        assert await _snapshots(pool) == Counter(set(before))

        # A crawl narrowed to one product page counts no misses for the rest of the catalog.
        one = next(iter(before.values()))
        reply = await client.trigger("demo-shop", kind="refresh", seeds=[one["url"]])
        assert reply.error is None, reply.error
        narrow = await client.wait(reply.job_id, timeout=120)
        assert 1 <= narrow["refresh"]["seen"] < len(before), narrow
        assert narrow["refresh"]["missed"] == 0, narrow
        async with pool.acquire() as conn:
            reason = await conn.fetchval(
                "SELECT reason FROM miss_counts WHERE job_id = $1", reply.job_id
            )
        assert reason and "partial" in reason, (reason, narrow["refresh"])
        assert {p["consecutive_misses"] for p in await client.products("demo-shop")} == {0}

        # Epoch 1: three refreshes; the delisted count one miss each and fall at the third.
        shop.set_epoch(1)
        for n in (1, 2, 3):
            run = await _run(client)
            products = run["products_by_key"]
            counters = run["job"]["counters"]
            assert run["refresh"]["missed"] == len(gone), (n, run["refresh"])
            assert run["refresh"]["seen"] == len(after), (n, run["refresh"])
            for key in gone:
                assert products[key]["consecutive_misses"] == n, (n, key)
                if n < 3:
                    assert products[key]["delisted_at"] is None, (n, key)
                    assert products[key]["availability"] == before[key]["availability"]
                else:
                    assert products[key]["availability"] == "out_of_stock", key
                    assert products[key]["delisted_at"] is not None, key
            assert run["refresh"]["delisted"] == (len(gone) if n == 3 else 0)
            for key, truth in after.items():
                got = products[key]
                assert (got["price"], got["availability"]) == (
                    truth["price"],
                    truth["availability"],
                ), key
                assert got["consecutive_misses"] == 0 and got["delisted_at"] is None, key
                assert got["last_seen_job"] == run["job_id"], key
            if n > 1:
                # Nothing changed since the first refresh: (nearly) every page answered 304
                # and its products, re-parsed from the stored payload, counted as seen.
                assert counters["outcome_not_modified"] > 10 * counters.get("outcome_ok", 0)

        snaps = await _snapshots(pool)
        for key in unchanged:
            assert snaps[key] == 1, key  # the first sighting only
        for key in repriced | restocked:
            assert snaps[key] == 2, key  # one per change (price and stock change together)
        for key in gone:
            assert snaps[key] == (1 if before[key]["availability"] == "out_of_stock" else 2), key

        # A crawl with half the pages failing counts no misses at all.
        state = {k: p["consecutive_misses"] for k, p in run["products_by_key"].items()}
        shop.faults = Faults(rate_503=0.5, seed=7)
        bad = await _run(client)
        assert bad["job"]["counters"].get("failed", 0) > 0, bad["job"]["counters"]
        assert bad["refresh"]["missed"] == 0, bad["refresh"]
        assert {k: p["consecutive_misses"] for k, p in bad["products_by_key"].items()} == state
        async with pool.acquire() as conn:
            reason = await conn.fetchval(
                "SELECT reason FROM miss_counts WHERE job_id = $1", bad["job_id"]
            )
        assert reason and "failure rate" in reason

        # Back to epoch 0: the delisted products return, reset and restored.
        shop.faults = Faults()
        shop.set_epoch(0)
        back = await _run(client)
        assert back["refresh"]["missed"] == 0, back["refresh"]
        for key, truth in before.items():
            got = back["products_by_key"][key]
            assert got["consecutive_misses"] == 0 and got["delisted_at"] is None, key
            assert (got["price"], got["availability"]) == (
                truth["price"],
                truth["availability"],
            ), key
