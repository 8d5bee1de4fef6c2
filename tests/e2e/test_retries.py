"""Retries and back-off against scripted failures of the demo shop."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import urlsplit

import pytest

from control.client import TrawlClient
from demo.faults import Faults
from demo.shop import DemoShop
from services.scheduler.catalog import save_source
from shared.sources import source_from_dict
from tests.support.stack import Stack

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(120)]

BASE, FACTOR, BLOCKED = 0.5, 2.0, 1.0


async def test_retry_policy_outcomes_and_host_backoff(env, settings, pool, tmp_path: Path):
    async with DemoShop(hosts=("127.0.0.2", "127.0.0.3"), port=0, products=16) as shop:
        host_a = urlsplit(shop.base_urls[0]).netloc
        paths = [urlsplit(p["url"]).path for p in shop.truth() if host_a in p["url"]]
        flaky, blocked, limited, dead = paths[:4]
        shop.faults = Faults(
            retry_after=2,
            script={
                flaky: [503, 503, 200],
                blocked: [403, 200],
                limited: [429, 200],
                dead: [503, 503, 503, 503, 503],
            },
        )
        definition = shop.source_definition("flaky")
        # One request at a time per host, no delay: gaps come from retries and back-off only.
        definition["pacing"] = {"min_delay": 0, "max_delay": 0, "max_in_flight": 1}
        definition["retry"] = {
            "max_retries": 2,
            "base_delay": BASE,
            "factor": FACTOR,
            "jitter": 0,
            "blocked_base_delay": BLOCKED,
        }
        async with pool.acquire() as conn:
            await save_source(conn, source_from_dict(definition))
        async with Stack(env, tmp_path / "logs") as stack, TrawlClient(settings) as client:
            reply = await client.trigger("flaky")
            summary = await client.wait(reply.job_id, timeout=100)
            assert summary["status"] == "completed", stack.logs()
            products = {p["key"] for p in await client.products("flaky")}
        log = [r for r in shop.request_log if r["path"] != "/robots.txt"]

    def hits(path: str) -> list[dict]:
        return sorted((r for r in log if r["path"] == path), key=lambda r: r["t_start"])

    # 503, 503, then 200: the third attempt succeeds after base, then base * factor.
    first, second, third = hits(flaky)
    assert [r["status"] for r in (first, second, third)] == [503, 503, 200]
    assert second["t_start"] - first["t_end"] >= BASE
    assert third["t_start"] - second["t_end"] >= BASE * FACTOR

    # 403: blocked, the long cool-down, and a fresh identity for the retry.
    refused, allowed = hits(blocked)
    assert (refused["status"], allowed["status"]) == (403, 200)
    assert allowed["t_start"] - refused["t_end"] >= BLOCKED
    assert refused["headers"]["User-Agent"] != allowed["headers"]["User-Agent"]

    # 429 with Retry-After: 2 → the whole host waits, not only that URL.
    limited_hit = hits(limited)[0]
    assert limited_hit["status"] == 429
    same_host = [
        r
        for r in log
        if r["host"] == limited_hit["host"]
        and r["port"] == limited_hit["port"]
        and r["t_start"] > limited_hit["t_end"]
    ]
    assert same_host and min(r["t_start"] for r in same_host) - limited_hit["t_end"] >= 2.0

    # Out of retries: 1 + max_retries attempts, then failed; the job still completes.
    assert [r["status"] for r in hits(dead)] == [503, 503, 503]
    counters = summary["counters"]
    assert counters["failed"] == 1
    assert counters["outcome_gone"] >= 1  # broken links: 404 → gone, never retried
    assert all(len(hits(r["path"])) == 1 for r in log if r["status"] == 404)
    assert len(products) == len(shop.truth()) - 1  # all but the dead page's product
