"""A crawl under fire and the checks every fault test makes afterwards: the job completed, the
catalog equals the shop's truth, nothing was written twice, the history is consistent and the
DLQ is empty."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import asyncpg

from control.client import TrawlClient
from demo.shop import DemoShop
from services.scheduler.catalog import save_source
from shared import names as n
from shared.sources import source_from_dict

# Faults stall work until JetStream redelivers it or the scheduler's stale recovery takes it
# back; a short visibility timeout keeps these tests within minutes.
FAULT_ENV = {"TRAWL_VISIBILITY_TIMEOUT": "10"}


async def save_shop_source(
    pool: asyncpg.Pool,
    shop: DemoShop,
    name: str = "shop",
    max_in_flight: int = 4,
    *,
    images: bool = True,
) -> None:
    definition = shop.source_definition(name)
    definition["pacing"] = {"min_delay": 0, "max_delay": 0, "max_in_flight": max_in_flight}
    definition["images"] = images
    async with pool.acquire() as conn:
        await save_source(conn, source_from_dict(definition))


async def crawl(
    client: TrawlClient,
    source: str,
    during: Callable[[int], Awaitable[None]] | None = None,
    *,
    timeout: float = 240.0,
) -> dict[str, Any]:
    """Trigger, run ``during(job_id)`` (the faults), then wait for completion + refresh."""
    reply = await client.trigger(source, timeout=30)
    assert reply.error is None, reply.error
    assert reply.job_id is not None
    if during is not None:
        await during(reply.job_id)
    return await client.wait(reply.job_id, timeout=timeout, refreshed_timeout=120)


async def dlq_size(client: TrawlClient) -> int:
    assert client.nc is not None
    info = await client.nc.jetstream().stream_info(client.names.stream(n.DLQ))
    return info.state.messages


async def dead_letter_reasons(client: TrawlClient, limit: int = 20) -> list[str]:
    """The first letters of the DLQ, as "subject: reason" (for an assertion's message)."""
    assert client.nc is not None
    js = client.nc.jetstream()
    stream = client.names.stream(n.DLQ)
    info = await js.stream_info(stream)
    found = []
    for seq in range(info.state.first_seq, min(info.state.last_seq, info.state.first_seq + limit)):
        try:
            msg = await js.get_msg(stream, seq)
        except Exception:  # a gap in the stream: nothing to show
            continue
        reason = (msg.headers or {}).get(n.DLQ_REASON, "")
        found.append(f"{msg.subject}: {reason[:300]}")
    return found


async def check_crawl(
    client: TrawlClient,
    pool: asyncpg.Pool,
    shop: DemoShop,
    summary: dict[str, Any],
    logs: str,
    *,
    dead_letters: int = 0,
) -> None:
    """The invariants of a crawl that survived its faults (``dead_letters``: the letters the
    test's own poison made; the crawl must add none)."""
    job_id = summary["job_id"]
    assert summary["status"] == "completed", f"{summary}\n{logs}"
    source = summary["source"]

    products = {p["key"]: p for p in await client.products(source)}
    truth = {p["key"]: p for p in shop.truth()}
    assert set(products) == set(truth), (set(truth) ^ set(products), logs)
    for key, expected in truth.items():
        got = products[key]
        fields = ("name", "price", "currency", "availability")
        assert tuple(got[f] for f in fields) == tuple(expected[f] for f in fields), key
        assert got["last_seen_job"] == job_id

    async with pool.acquire() as conn:
        rows = await conn.fetchval("SELECT count(*) FROM products WHERE source = $1", source)
        assert rows == len(truth)
        # A first crawl writes exactly one snapshot per product, however often it was delivered.
        snaps = await conn.fetch(
            "SELECT key, count(*) AS n FROM snapshots WHERE source = $1 GROUP BY key", source
        )
        assert {r["key"] for r in snaps} == set(truth)
        assert all(r["n"] == 1 for r in snaps), [r["key"] for r in snaps if r["n"] > 1]
        applied = await conn.fetchval(
            "SELECT count(DISTINCT product_key) FROM applied_results WHERE job_id = $1", job_id
        )
        assert applied == len(truth)

        # Every page is finished, and its history is a run of numbered attempts.
        open_ = await conn.fetchval(
            "SELECT count(*) FROM entries WHERE job_id = $1 AND state NOT IN ('done')", job_id
        )
        assert open_ == 0, await conn.fetch(
            "SELECT url, state, last_outcome FROM entries WHERE job_id = $1 AND state <> 'done'",
            job_id,
        )
        bad = await conn.fetch(
            """SELECT e.id, e.url, e.attempts, array_agg(a.attempt_id) AS ids
               FROM entries e LEFT JOIN attempts a ON a.entry_id = e.id
               WHERE e.job_id = $1
               GROUP BY e.id
               HAVING count(a.attempt_id) = 0
                   OR count(a.attempt_id) > e.attempts
                   OR bool_or(a.attempt_id NOT LIKE e.id || '.%')
                   OR bool_or(split_part(a.attempt_id, '.', 2)::int NOT BETWEEN 1 AND e.attempts)
                   OR bool_or(a.job_id <> e.job_id)""",
            job_id,
        )
        assert not bad, [dict(r) for r in bad[:5]]
        # Every successful fetch has its payload recorded.
        unstored = await conn.fetchval(
            """SELECT count(*) FROM attempts a
               WHERE a.job_id = $1 AND a.outcome = 'ok'
                 AND (a.payload_ref IS NULL
                      OR NOT EXISTS (SELECT 1 FROM payloads p WHERE p.ref = a.payload_ref))""",
            job_id,
        )
        assert unstored == 0
    letters = await dlq_size(client)
    assert letters == dead_letters, (letters, await dead_letter_reasons(client))
