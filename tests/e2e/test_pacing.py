"""Per-domain pacing, read from the shop's request log: no host is ever hit faster than its
policy, however many scheduler and fetcher replicas run."""

from __future__ import annotations

import itertools
from collections import defaultdict
from pathlib import Path

import pytest

from control.client import TrawlClient
from demo.shop import DemoShop
from services.scheduler.catalog import save_source
from shared.sources import source_from_dict
from tests.support.stack import Stack

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(120)]

MIN_DELAY, MAX_DELAY = 0.2, 0.4


def _check_pacing(log: list[dict]) -> dict[str, tuple[float, float]]:
    """Per host: no overlap, no gap under MIN_DELAY. Returns each host's (first, last) time."""
    by_host: dict[str, list[dict]] = defaultdict(list)
    for r in log:
        if r["path"] != "/robots.txt":  # robots.txt is fetched once, outside the page pace
            by_host[f"{r['host']}:{r['port']}"].append(r)
    spans = {}
    for host, reqs in by_host.items():
        reqs.sort(key=lambda r: r["t_start"])
        for prev, nxt in itertools.pairwise(reqs):
            gap = nxt["t_start"] - prev["t_end"]
            assert gap >= MIN_DELAY, f"{host}: {nxt['path']} only {gap:.3f}s after {prev['path']}"
        spans[host] = (reqs[0]["t_start"], reqs[-1]["t_end"])
    return spans


@pytest.mark.parametrize("scale", [None, "scheduler=2,fetcher=3"], ids=["single", "replicas"])
async def test_hosts_are_paced_and_progress_interleaved(
    env, settings, pool, tmp_path: Path, scale: str | None
) -> None:
    async with DemoShop(hosts=("127.0.0.2", "127.0.0.3"), port=0, products=16) as shop:
        definition = shop.source_definition("paced")
        definition["pacing"] = {"min_delay": MIN_DELAY, "max_delay": MAX_DELAY, "max_in_flight": 1}
        async with pool.acquire() as conn:
            await save_source(conn, source_from_dict(definition))
        async with (
            Stack(env, tmp_path / "logs", scale=scale) as stack,
            TrawlClient(settings) as client,
        ):
            reply = await client.trigger("paced")
            summary = await client.wait(reply.job_id, timeout=100)
            assert summary["status"] == "completed", stack.logs()
        log = list(shop.request_log)
        truth = shop.truth()

    spans = _check_pacing(log)
    assert len(spans) == 2
    (a0, a1), (b0, b1) = spans.values()
    # Interleaved: the crawl takes about as long as the slower host, not the sum of both.
    total = max(a1, b1) - min(a0, b0)
    assert total < 0.75 * ((a1 - a0) + (b1 - b0)), (total, a1 - a0, b1 - b0)
    pages = [(r["host"], r["port"], r["path"]) for r in log if r["path"] != "/robots.txt"]
    assert len(pages) == len(set(pages)), "a page was fetched twice"
    assert summary["counters"]["products"] == len(truth)
