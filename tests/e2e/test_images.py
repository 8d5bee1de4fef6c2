"""Product images: fetched once through the pipeline, stored by content, never re-downloaded,
and the product row points at its own image."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from control.client import TrawlClient
from demo.shop import DemoShop, image_bytes
from services.scheduler.catalog import save_source
from shared.bus import connect
from shared.names import Names
from shared.payloads import JetStreamPayloadStore
from shared.sources import source_from_dict
from tests.support.stack import Stack

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(180)]


async def test_each_image_is_fetched_once_and_the_product_points_at_it(
    env, settings, pool, tmp_path: Path
) -> None:
    async with DemoShop(hosts=("127.0.0.2", "127.0.0.3"), port=0, products=40) as shop:
        async with pool.acquire() as conn:
            await save_source(conn, source_from_dict(shop.source_definition("shop")))
        async with Stack(env, tmp_path / "logs") as stack, TrawlClient(settings) as client:
            first = await client.trigger("shop")
            summary = await client.wait(first.job_id, timeout=120)
            assert summary["status"] == "completed", stack.logs()
            first_requests = list(shop.request_log)
            second = await client.trigger("shop")
            assert (await client.wait(second.job_id, timeout=120))["status"] == "completed"
            second_requests = shop.request_log[len(first_requests) :]
            async with pool.acquire() as conn:
                rows = await conn.fetch(
                    "SELECT key, image, image_ref FROM products WHERE source = 'shop'"
                )
                failed = await conn.fetchval(
                    "SELECT count(*) FROM entries WHERE kind = 'image' AND state <> 'done'"
                )
        truth = shop.truth()

    images = [r for r in first_requests if r["path"].startswith("/img/")]
    per_image = Counter((r["host"], r["port"], r["path"]) for r in images)
    assert len(per_image) == len(truth) and set(per_image.values()) == {1}
    # Requested as a browser requests an <img>, not as a page navigation.
    for r in images:
        assert r["headers"]["Sec-Fetch-Dest"] == "image"
        assert r["headers"]["Accept"].startswith("image/")
    # The second crawl re-visits every page and fetches no image again.
    assert second_requests and not [r for r in second_requests if "/img/" in r["path"]]
    assert failed == 0

    assert len(rows) == len(truth)
    nc = await connect(settings.nats_url, name="test-images")
    try:
        store = JetStreamPayloadStore(nc.jetstream(), Names(settings.namespace))
        for row in rows:
            assert row["image_ref"] and row["image_ref"].startswith("js:"), row
            name = row["image"].rsplit("/", 1)[1]
            assert await store.get(row["image_ref"]) == image_bytes(name)
    finally:
        await nc.close()
    assert len({r["image_ref"] for r in rows}) == len(rows)  # each its own image
