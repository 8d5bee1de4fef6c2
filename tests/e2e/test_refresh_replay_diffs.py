"""End to end: after a crawl and a refresh of the demo shop, with the shop stopped — replay
reproduces the products from stored payloads, payload records and diffs, job-to-job diffs; the
functions and the CLI (``trawl replay|payloads|diff --json``) agree."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

import pytest

from control import payload_index as idx
from control.client import TrawlClient
from control.replay import replay_job
from demo.shop import DemoShop
from services.refresher.store import list_products
from services.scheduler.catalog import save_source
from shared.names import Names
from shared.payloads import JetStreamPayloadStore
from shared.sources import source_from_dict
from tests.support.stack import Stack

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(180)]

TRAWL = str(Path(sys.executable).with_name("trawl"))


async def trawl(env: dict[str, str], *args: str) -> object:
    proc = await asyncio.create_subprocess_exec(
        TRAWL,
        *args,
        "--json",
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await proc.communicate()
    assert proc.returncode == 0, (args, err.decode())
    return json.loads(out)


async def test_replay_and_diffs_without_the_shop(
    env, settings, pool, nc, namespace, tmp_path: Path
) -> None:
    shop = DemoShop(hosts=("127.0.0.2", "127.0.0.3"), port=0, products=60)
    await shop.start()
    try:
        before = {p["key"]: p for p in shop.truth()}
        async with pool.acquire() as conn:
            # The job diff reads the crawls' own snapshots: verification (which has a verify
            # job write a held change's snapshot) is tested in tests/e2e/test_verification.py.
            definition = {**shop.source_definition("demo-shop"), "verify": False}
            await save_source(conn, source_from_dict(definition))
        async with Stack(env, tmp_path / "logs"), TrawlClient(settings) as client:
            first = await client.trigger("demo-shop")
            assert (await client.wait(first.job_id, timeout=120))["status"] == "completed"
            shop.set_epoch(1)
            second = await client.trigger("demo-shop", kind="refresh")
            assert (await client.wait(second.job_id, timeout=120))["status"] == "completed"
            ok_pages = (await client.job(first.job_id))["counters"]["outcome_ok"]
    finally:
        await shop.stop()  # from here on, no page can be fetched
    requests = len(shop.request_log)
    after = {p["key"]: p for p in shop.truth()}
    gone = set(before) - set(after)
    repriced = {k for k in after if after[k]["price"] != before[k]["price"]}
    restocked = {k for k in after if after[k]["availability"] != before[k]["availability"]}
    job1, job2 = first.job_id, second.job_id
    store = JetStreamPayloadStore(nc.jetstream(), Names(namespace))

    async with pool.acquire() as conn:
        crawled = await list_products(conn, "demo-shop")
        victim = sorted(set(after) - gone)[0]
        await conn.execute(
            "UPDATE products SET price = 1.00, name = 'tampered', availability = 'unknown' "
            "WHERE source = 'demo-shop' AND key = $1",
            victim,
        )

    # Replay: the same products, the tampered row restored, and one snapshot for that fix.
    report = await trawl(env, "replay", str(job2))
    assert report["products"] == len(after) and report["missing_payloads"] == 0, report
    assert report["snapshots"] == 1, report
    async with pool.acquire() as conn:
        assert await list_products(conn, "demo-shop") == crawled
    # An older job changes nothing a newer job has seen since (its older prices stay history).
    old = await replay_job(pool, store, job1)
    assert old.products == len(before) and old.upserts == 0 and old.snapshots == 0, old
    async with pool.acquire() as conn:
        assert await list_products(conn, "demo-shop") == crawled
    assert len(shop.request_log) == requests

    # Job to job: the delisted are removed, the repriced and restocked show up, nothing added.
    async with pool.acquire() as conn:
        jobs_diff = await idx.diff_jobs(conn, "demo-shop", job1, job2)
    assert jobs_diff["added"] == []
    assert set(jobs_diff["removed"]) == gone
    assert {c["key"] for c in jobs_diff["price_changes"]} == repriced
    assert {c["key"] for c in jobs_diff["stock_changes"]} == restocked
    for c in jobs_diff["price_changes"]:
        assert (c["price_a"], c["price_b"]) == (before[c["key"]]["price"], after[c["key"]]["price"])
    assert await trawl(env, "diff", "demo-shop", str(job1), str(job2)) == jobs_diff

    # Payloads: the index, the newest for a URL, and a diff of a repriced product's two pages.
    key = sorted(repriced)[0]
    url = after[key]["url"]
    async with pool.acquire() as conn:
        listed = await idx.list_payloads(conn, job_id=job1, limit=1000)
        assert len(listed) == ok_pages
        of_url = await idx.list_payloads(conn, url=url)
        assert [p["job_id"] for p in of_url] == [job2, job1]
        latest = await idx.latest_payload(conn, url)
        assert latest == of_url[0]
        meta = await idx.payload_meta(conn, latest["ref"])
        assert meta["url"] == url and meta["fetches"] == 1
        page_diff = await idx.diff_payloads(store, conn, of_url[1]["ref"], of_url[0]["ref"])
    assert page_diff["product_changes"]["price"] == {
        "a": before[key]["price"],
        "b": after[key]["price"],
    }
    assert not page_diff["same_body"]
    assert after[key]["price"] in page_diff["diff"]
    assert await trawl(env, "payloads", "diff", "--url", url) == page_diff
    assert await trawl(env, "payloads", "latest", url) == latest
    assert await trawl(env, "payloads", "list", "--url", url) == of_url
    shown = await trawl(env, "payloads", "show", latest["ref"], "--body")
    assert after[key]["name"] in shown["body"]
