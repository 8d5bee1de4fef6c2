"""End to end: verify before alerting, with the services as real processes, the demo shop's
epoch switch and a webhook receiver on loopback.

Across the epoch change the shop sells some products out for real; besides, it answers one
product page "sold out" for one response only (a planted transient), and another the same way
but then blocks the re-check (403, no retries). Verification must:

- cancel the transient (no event, no alert, the row still in stock);
- let every real sold-out through: one event each (the crawl's, verified by a verify job) and
  one signed webhook each;
- call the blocked re-check unknown (no event, the row unchanged);
- report the cancelled count (the verify jobs' counters, /api/changes/verification's counts);
- re-check as another browser than the fetch that saw the change.
"""

from __future__ import annotations

from pathlib import Path
from urllib.parse import urlsplit

import msgspec
import pytest

from control.client import TrawlClient
from demo.faults import Faults
from demo.shop import DemoShop
from schemas.messages import ProductChange
from services.notifier.webhook import verify
from services.refresher import store
from services.scheduler.catalog import save_source
from shared.sources import source_from_dict
from tests.e2e.test_alerts import LOOPBACK, _crawl, _rule, _sent, receiver
from tests.support.stack import Stack, eventually

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]

SOLD_OUT = "out_of_stock"


async def _candidates(pool) -> dict[tuple[str, str], tuple[str, int | None]]:
    """(key, kind) → (verification, verify job) of every candidate."""
    async with pool.acquire() as conn:
        rows = await conn.fetch(
            "SELECT key, kind, verification, verify_job FROM product_events "
            "WHERE verification IS NOT NULL"
        )
    return {(r["key"], r["kind"]): (r["verification"], r["verify_job"]) for r in rows}


async def test_verification_cancels_a_transient_sold_out_and_lets_real_ones_through(
    env, settings, pool, tmp_path: Path
) -> None:
    async with (
        DemoShop(hosts=("127.0.0.2",), port=0, products=40) as shop,
        receiver() as hook,
    ):
        definition = shop.source_definition("demo-shop")
        definition["retry"] = {"max_retries": 0}  # a blocked re-check fails at once
        async with pool.acquire() as conn:
            await save_source(conn, source_from_dict(definition))
        before = {p["key"]: p for p in shop.truth()}
        shop.set_epoch(1)
        after = {p["key"]: p for p in shop.truth()}
        real = {
            k
            for k, p in after.items()
            if p["availability"] == SOLD_OUT and before[k]["availability"] != SOLD_OUT
        }
        steady = sorted(
            k
            for k, p in after.items()
            if p["availability"] == "in_stock"
            and (p["price"], p["availability"]) == (before[k]["price"], before[k]["availability"])
        )
        assert real and len(steady) >= 2, "the epoch sold nothing out"
        transient, blocked = steady[0], steady[1]
        path = {k: urlsplit(after[k]["url"]).path for k in (transient, blocked)}

        async with Stack(env, tmp_path / "logs") as stack, TrawlClient(settings) as client:
            await _crawl(client, shop, 0, "discovery", stack)
            rule, secret = await _rule(
                pool, condition="out_of_stock", webhook=hook.url, allow_private=LOOPBACK
            )
            # The crawl's fetch of each page sees it sold out (one response only); the blocked
            # one's re-check then gets a 403 (its script's second answer).
            shop.faults = Faults(
                sold_out={path[transient]: 1, path[blocked]: 1},
                script={path[blocked]: [200, 403]},
            )
            job = await _crawl(client, shop, 1, "refresh", stack)

            async def settled() -> bool:
                got = await _candidates(pool)
                keys = {key for key, _ in got}
                pending = any(state == "pending" for state, _ in got.values())
                return {transient, blocked} | real <= keys and not pending

            await eventually(settled, timeout=120, what="every candidate settled", interval=0.2)
            got = await _candidates(pool)
            assert got[(transient, SOLD_OUT)][0] == "cancelled", stack.logs()
            assert got[(blocked, SOLD_OUT)][0] == "unknown", stack.logs()
            confirmed = {key for (key, kind), (state, _) in got.items() if state == "confirmed"}
            assert {key for (key, kind) in got if kind == SOLD_OUT} == real | {transient, blocked}
            assert confirmed == real

            async def delivered() -> bool:
                return await _sent(pool) >= len(real)

            await eventually(delivered, timeout=60, what=f"{len(real)} alerts", interval=0.2)

            # Reported: each verify job's refreshed counters, and the API's counts.
            verify_jobs = {v for _, v in got.values() if v is not None}
            summaries = [await client.wait(v, timeout=60) for v in sorted(verify_jobs)]
            totals = {
                k: sum(s["refresh"][k] for s in summaries)
                for k in ("verify_confirmed", "verify_cancelled", "verify_unknown")
            }
            # A sighting's confirmation happens as it is applied; the completion counts the rest.
            assert totals["verify_cancelled"] == 1 and totals["verify_unknown"] == 1, summaries
            async with pool.acquire() as conn:
                counts = await store.verification_counts(
                    conn, store.ChangeFilter(source="demo-shop")
                )
            assert counts["cancelled"] == 1 and counts["unknown"] == 1, counts
            assert counts["confirmed"] == sum(state == "confirmed" for state, _ in got.values())
            products = {p["key"]: p for p in await client.products("demo-shop")}

        # One signed webhook per real sold-out, none for the transient or the blocked one.
        assert hook.calls
        keys = []
        for headers, body in hook.calls:
            assert verify(secret, headers, body), headers
            event = msgspec.json.decode(body, type=ProductChange)
            assert event.kind == SOLD_OUT and event.job_id == job, event
            assert event.verified_by in verify_jobs, event
            keys.append(event.key)
        assert sorted(keys) == sorted(real)
        assert headers["Trawl-Delivery"].startswith(f"{rule}.")
        for key in (transient, blocked):
            assert products[key]["availability"] == "in_stock", products[key]
            # The re-check came as another browser than the crawl's fetch that saw "sold out".
            agents = [
                r["headers"].get("User-Agent") for r in shop.request_log if r["path"] == path[key]
            ]
            assert len(agents) == 3, agents  # the first crawl, the second, the re-check
            assert agents[2] != agents[1], agents
        for key in real:
            assert products[key]["availability"] == SOLD_OUT, products[key]
