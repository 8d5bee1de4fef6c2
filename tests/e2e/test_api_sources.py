"""End to end: API sources (GraphQL, Shopify-style, cursor) crawled from the demo shop's API —
every option's price and stock, refresh misses, retries resuming at the failed page, payloads,
replay and ``trawl parse``, and the pagination guards."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

import pytest

from control.client import TrawlClient
from control.replay import replay_job
from demo import api
from demo.faults import Faults
from demo.shop import DemoShop
from services.scheduler.catalog import save_source
from shared.names import Names
from shared.payloads import JetStreamPayloadStore
from shared.sources import source_from_dict
from tests.support.stack import Stack

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(120)]

TRAWL = str(Path(sys.executable).with_name("trawl"))
FIELDS = ("sku", "name", "brand", "price", "sale_price", "currency", "availability", "stock")
PER_PAGE = 10


@pytest.fixture
async def shop():
    async with DemoShop(hosts=("127.0.0.2",), port=0, products=60) as s:
        yield s


def api_source(shop: DemoShop, name: str, api_section: dict[str, Any], **extra: Any) -> dict:
    host = shop.base_urls[0].removeprefix("http://")
    return {
        "name": name,
        "api": api_section,
        "allowed_domains": [host],
        "allow_private": ["127.0.0.2/32"],
        "pacing": {"profile": "fast"},
        **extra,
    }


def graphql(shop: DemoShop, name: str = "gql", **extra: Any) -> dict:
    section = {
        "preset": "graphql",
        "url": f"{shop.base_urls[0]}/graphql",
        "pagination": {"per_page": PER_PAGE},
    }
    return api_source(shop, name, section, **extra)


async def save(pool, definition: dict) -> None:
    async with pool.acquire() as conn:
        await save_source(conn, source_from_dict(definition))


async def crawl(client: TrawlClient, source: str, kind: str = "discovery") -> dict:
    reply = await client.trigger(source, kind=kind)
    assert reply.error is None, reply.error
    summary = await client.wait(reply.job_id, timeout=90)
    assert summary["status"] == "completed", summary
    summary["job"] = await client.job(reply.job_id)
    summary["products"] = {p["key"]: p for p in await client.products(source)}
    return summary


def assert_matches(products: dict[str, dict], truth: list[dict]) -> None:
    expected = {t["key"]: t for t in truth}
    assert set(products) == set(expected)
    for key, want in expected.items():
        got = products[key]
        assert {f: got[f] for f in FIELDS} == {f: want[f] for f in FIELDS}, key


def graphql_pages(shop: DemoShop) -> list[tuple[int, int]]:
    """(page, status) of every GraphQL request, in order."""
    hits = sorted(
        (r for r in shop.request_log if r["path"] == "/graphql"), key=lambda r: r["t_start"]
    )
    return [(json.loads(r["body"])["variables"]["page"], r["status"]) for r in hits]


async def test_graphql_and_shopify_sources_crawl_every_option(
    shop, env, settings, pool, nc, namespace, tmp_path: Path
) -> None:
    await save(pool, graphql(shop))
    shopify = {
        "preset": "shopify",
        "url": f"{shop.base_urls[0]}/products.json?page={{page}}&limit={{per_page}}",
        "pagination": {"per_page": 7},
        "mapping": {"fields": {"currency": "'EUR'"}},  # merged into the preset's mapping
    }
    await save(pool, api_source(shop, "shopify", shopify))
    async with Stack(env, tmp_path / "logs") as stack, TrawlClient(settings) as client:
        gql, shp = await asyncio.gather(crawl(client, "gql"), crawl(client, "shopify"))
        assert gql["job"]["counters"]["parse_errors"] == 0, stack.logs()

    truth = api.truth(shop.catalog, 0)
    assert_matches(gql["products"], truth)
    assert len(truth) > 60  # options expanded: one product per option
    assert {t["availability"] for t in truth} >= {"in_stock", "out_of_stock", "preorder"}
    assert any(t["sale_price"] for t in truth)
    shopify_truth = [{**t, "currency": "EUR"} for t in api.truth(shop.catalog, 0, "shopify")]
    assert_matches(shp["products"], shopify_truth)

    # Pages 0..5 once each (60 items, 10 per page: the running total ends it), sent as JSON.
    assert graphql_pages(shop) == [(n, 200) for n in range(6)]
    post = next(r for r in shop.request_log if r["path"] == "/graphql")
    assert post["method"] == "POST"
    assert post["headers"]["Content-Type"] == "application/json"
    assert post["headers"]["Accept"] == "application/json"
    # Shopify: pages 1..9, the ninth short (60 = 8 × 7 + 4).
    listing = [r["path"] for r in shop.request_log if r["path"].startswith("/products.json")]
    assert listing == [f"/products.json?page={n}&limit=7" for n in range(1, 10)]  # as written
    # The job counts products, not pages: the refresher waited for every one.
    assert gql["job"]["counters"]["products"] == len(truth)
    assert gql["refresh"]["applied"] == len(truth)

    # Raw JSON payloads are stored like any page's; replay re-maps them without the shop.
    async with pool.acquire() as conn:
        types = await conn.fetch(
            "SELECT DISTINCT p.content_type FROM payloads p JOIN entries e "
            "ON e.job_id = p.job_id AND e.url = p.url WHERE p.job_id = $1 AND e.kind <> 'image'",
            gql["job_id"],
        )
        ref = await conn.fetchval(
            "SELECT ref FROM payloads WHERE job_id = $1 AND content_type = 'application/json' "
            "ORDER BY fetched_at LIMIT 1",
            gql["job_id"],
        )
    assert [r["content_type"] for r in types] == ["application/json"]
    store = JetStreamPayloadStore(nc.jetstream(), Names(namespace))
    report = await replay_job(pool, store, gql["job_id"])
    assert (report.pages, report.products, report.missing_payloads) == (6, len(truth), 0)

    # `trawl parse` maps a stored JSON payload with the source's rules.
    payload = tmp_path / "page.json"
    payload.write_bytes(await store.get(ref))
    proc = await asyncio.create_subprocess_exec(
        TRAWL, "parse", str(payload), "--source", "gql", "--json", env=env,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    out, err = await proc.communicate()
    assert proc.returncode == 0, err.decode()
    parsed = json.loads(out)["products"]
    first_page = {t["key"] for t in truth if t["sku"].split("-")[1] <= "00010"}
    assert {p["key"] for p in parsed} == first_page


async def test_refresh_marks_delisted_options_out_of_stock_at_third_miss(
    shop, env, settings, pool, tmp_path: Path
) -> None:
    await save(pool, graphql(shop))
    before = {t["key"]: t for t in api.truth(shop.catalog, 0)}
    after = {t["key"]: t for t in api.truth(shop.catalog, 1)}
    gone = set(before) - set(after)
    changed = {k for k in after if (after[k]["price"], after[k]["stock"]) != (
        before[k]["price"], before[k]["stock"])}  # fmt: skip
    assert gone and changed
    async with Stack(env, tmp_path / "logs"), TrawlClient(settings) as client:
        first = await crawl(client, "gql")
        assert set(first["products"]) == set(before)
        shop.set_epoch(1)
        for n in (1, 2, 3):
            run = await crawl(client, "gql", kind="refresh")
            assert (run["refresh"]["missed"], run["refresh"]["seen"]) == (len(gone), len(after))
            for key in gone:
                got = run["products"][key]
                assert got["consecutive_misses"] == n, (n, key)
                assert (got["delisted_at"] is not None) == (n == 3), (n, key)
                if n == 3:
                    assert got["availability"] == "out_of_stock", key
                else:
                    assert got["availability"] == before[key]["availability"], (n, key)
            assert run["refresh"]["delisted"] == (len(gone) if n == 3 else 0)
            assert_matches({k: run["products"][k] for k in after}, list(after.values()))
    # A refresh of an API source pages the API again; it never visits product pages.
    assert not [r for r in shop.request_log if r["path"].startswith("/p/")]


async def test_429_on_page_3_backs_off_and_resumes_at_page_3(
    shop, env, settings, pool, tmp_path: Path
) -> None:
    shop.faults = Faults(retry_after=1, script={"/graphql?page=3&perPage=10": [429]})
    definition = graphql(shop, retry={"max_retries": 2, "base_delay": 0.5, "jitter": 0})
    definition["retry"]["blocked_base_delay"] = 0.5
    await save(pool, definition)
    async with Stack(env, tmp_path / "logs"), TrawlClient(settings) as client:
        run = await crawl(client, "gql")
    assert_matches(run["products"], api.truth(shop.catalog, 0))
    assert graphql_pages(shop) == [(0, 200), (1, 200), (2, 200), (3, 429)] + [
        (n, 200) for n in (3, 4, 5)
    ]
    hits = sorted(
        (r for r in shop.request_log if r["path"] == "/graphql"), key=lambda r: r["t_start"]
    )
    refused, retried = hits[3], hits[4]
    assert retried["t_start"] - refused["t_end"] >= 1.0  # Retry-After holds the host
    assert retried["headers"]["User-Agent"] != refused["headers"]["User-Agent"]


async def test_pagination_guards_stop_loops_with_an_error_in_the_job(
    shop, env, settings, pool, tmp_path: Path
) -> None:
    base = shop.base_urls[0]
    stuck = {
        "preset": "graphql",  # its item mapping, on GET endpoints
        "method": "GET",
        "graphql": None,
        "url": f"{base}/api/stuck?cursor={{cursor}}&limit=5",
        "pagination": {"strategy": "cursor", "next_cursor": "next_cursor", "per_page": 5},
        "mapping": {"items": "items"},
    }
    endless = {
        **stuck,
        "url": f"{base}/api/endless?page={{page}}&limit=5",
        "pagination": {"strategy": "page", "per_page": 5, "max_pages": 4, "total": None},
    }
    await save(pool, api_source(shop, "stuck", stuck))
    await save(pool, api_source(shop, "endless", endless))
    async with Stack(env, tmp_path / "logs"), TrawlClient(settings) as client:
        runs = await asyncio.gather(crawl(client, "stuck"), crawl(client, "endless"))
        errors = [await _errors(pool, r["job_id"]) for r in runs]
    for run in runs:
        assert run["job"]["counters"]["parse_errors"] == 1, run["job"]["counters"]
        assert len(run["products"]) > 0  # what was read before the guard is kept
    assert "repeated cursor 'c2'" in errors[0][0]
    assert "max_pages (4)" in errors[1][0]
    stuck_hits = [r["path"] for r in shop.request_log if r["path"].startswith("/api/stuck")]
    endless_hits = [r["path"] for r in shop.request_log if r["path"].startswith("/api/endless")]
    assert len(stuck_hits) == 2 and len(endless_hits) == 4


async def _errors(pool, job_id: int) -> list[str]:
    async with pool.acquire() as conn:
        rows = await conn.fetch(
            "SELECT parse_error FROM entries WHERE job_id = $1 AND parse_error IS NOT NULL",
            job_id,
        )
    return [r["parse_error"] for r in rows]
