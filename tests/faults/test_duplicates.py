"""Duplicate deliveries on the real subjects: the same fetch result and the same parse result
published twice (as a publisher retrying without a msg id would) change nothing the second
time."""

from __future__ import annotations

from pathlib import Path

import pytest

from control.client import TrawlClient
from schemas.messages import Link, ParseResult, Product
from shared import names as n
from shared.bus import encode
from tests.faults.messages import (
    SCALE,
    consumers_idle,
    dispatched_entries,
    ok_result,
    product_page,
    save_shop,
)
from tests.support.stack import Stack, eventually

pytestmark = [pytest.mark.faults, pytest.mark.timeout(120)]


async def test_duplicate_fetch_and_parse_results_have_no_double_effects(
    env, settings, pool, tmp_path: Path
) -> None:
    await save_shop(pool)
    async with (
        Stack(env, tmp_path / "logs", scale=SCALE) as stack,
        TrawlClient(settings) as client,
    ):
        assert client.nc is not None
        names, js = client.names, client.nc.jetstream()
        reply = await client.trigger("shop")
        assert reply.job_id is not None, reply.error
        job_id = reply.job_id
        (entry,) = await dispatched_entries(pool, job_id, 1)

        body = product_page("ANVIL-1", "Anvil", "49.90")
        fetched = await ok_result(client.nc, names, job_id, entry, body)
        parsed = ParseResult(
            attempt=fetched.attempt,
            payload_ref=fetched.payload_ref,
            product=Product(
                key="ANVIL-1", sku="ANVIL-1", name="Anvil", price="49.90", currency="EUR",
                availability="in_stock", url=entry["url"],
            ),
            links=[Link(url="http://127.0.0.2:9/p/anvil-1-related", kind="product")],
        )  # fmt: skip
        # No msg id: both copies are stored and delivered, like two deliveries of one message.
        for _ in range(2):
            await js.publish(names.fetched, encode(fetched))
            await js.publish(names.parsed, encode(parsed))

        await consumers_idle(
            client.nc,
            names,
            (n.FETCHED, "scheduler-fetched"),
            (n.PARSED, "scheduler-parsed"),
            (n.PARSED, "refresher-parsed"),
        )

        async def closed() -> bool:
            async with pool.acquire() as conn:
                state = await conn.fetchval("SELECT state FROM entries WHERE id = $1", entry["id"])
            return state == "done"

        await eventually(closed, timeout=30, what="the entry to be done")
        async with pool.acquire() as conn:
            attempts = await conn.fetchval(
                "SELECT count(*) FROM attempts WHERE entry_id = $1", entry["id"]
            )
            payloads = await conn.fetchval(
                "SELECT count(*) FROM payloads WHERE attempt_id = $1", fetched.attempt.id
            )
            products = await conn.fetch("SELECT key FROM products WHERE source = 'shop'")
            snapshots = await conn.fetchval(
                "SELECT count(*) FROM snapshots WHERE source = 'shop' AND key = 'ANVIL-1'"
            )
            applied = await conn.fetchval(
                "SELECT count(*) FROM applied_results WHERE attempt_id = $1", fetched.attempt.id
            )
            related = await conn.fetch(
                "SELECT state FROM entries WHERE job_id = $1 AND url LIKE '%anvil-1-related'",
                job_id,
            )
            in_flight, dispatched = await conn.fetchrow(
                """SELECT in_flight, (SELECT count(*) FROM entries
                                      WHERE domain = $1 AND state = 'dispatched')
                   FROM domains WHERE domain = $1""",
                "127.0.0.2:9",
            )
        job = await client.job(job_id)

    assert attempts == 1
    assert payloads == 1
    assert [r["key"] for r in products] == ["ANVIL-1"]
    assert snapshots == 1
    assert applied == 1
    assert len(related) == 1
    counters = job["counters"]
    assert counters["products"] == 1, counters
    assert counters["outcome_ok"] == 1, counters
    # The duplicate fetch result freed the domain's slot once, not twice.
    assert in_flight == dispatched
    assert not any(c.restarts for c in stack.sup.children)
