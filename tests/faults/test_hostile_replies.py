"""Replies that made results nobody could encode or publish (issue 17, defect 3): a non-UTF-8
byte in the Content-Type charset and in Last-Modified, JSON-LD with a lone surrogate, a 2 MB
product name. Each crawl used to leave its entry dispatched or fetched, re-dispatched by stale
recovery for ever; now the results are made safe where they are built, and every page ends."""

from __future__ import annotations

from pathlib import Path

import pytest

from control.client import TrawlClient
from services.scheduler.catalog import save_source
from shared.sources import source_from_dict
from tests.faults.crawl import FAULT_ENV
from tests.faults.hostile import PAGES, HostileShop
from tests.support.stack import Stack

pytestmark = [pytest.mark.faults, pytest.mark.timeout(180)]


async def test_every_hostile_reply_ends_its_page_and_the_job_completes(
    env, settings, pool, tmp_path: Path
) -> None:
    env = {**env, **FAULT_ENV}
    async with HostileShop() as shop:
        definition = {
            "name": "hostile",
            "seeds": [f"{shop.base}/"],
            "allow_private": True,
            "robots": "ignore",
            "pacing": {"min_delay": 0, "max_delay": 0, "max_in_flight": 4},
            "retry": {"max_retries": 1, "base_delay": 0.2, "jitter": 0},
        }
        async with pool.acquire() as conn:
            await save_source(conn, source_from_dict(definition))
        async with Stack(env, tmp_path / "logs") as stack, TrawlClient(settings) as client:
            reply = await client.trigger("hostile")
            assert reply.job_id is not None, reply.error
            summary = await client.wait(reply.job_id, timeout=120, refreshed_timeout=60)
            assert summary["status"] == "completed", stack.logs()
            products = {p["key"]: p for p in await client.products("hostile")}
            async with pool.acquire() as conn:
                entries = await conn.fetch(
                    "SELECT url, state, attempts, last_outcome, parse_error FROM entries "
                    "WHERE job_id = $1",
                    reply.job_id,
                )
            assert not any(c.restarts for c in stack.sup.children), stack.logs()
    # Every page fetched once, parsed and closed: none left in flight, none re-dispatched.
    by_path = {e["url"].removeprefix(shop.base): dict(e) for e in entries}
    assert set(by_path) == {"/", *PAGES}, by_path
    for path, entry in by_path.items():
        assert (entry["state"], entry["attempts"]) == ("done", 1), (path, entry)
        assert shop.hits[path] == 1, (path, shop.hits)
    # And every product is there, made safe: no page lost to its poison.
    assert {key: p["name"] for key, p in products.items()} == {
        key: name for _, key, name in PAGES.values()
    }
