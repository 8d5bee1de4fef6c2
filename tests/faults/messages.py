"""Hand-made messages on the real subjects, for the poison and duplicate tests: a job whose
work nobody fetches (no fetcher runs), and results for its entries as a fetcher would send."""

from __future__ import annotations

import json

import asyncpg
from nats.aio.client import Client

from schemas.messages import Attempt, FetchResult
from services.scheduler.catalog import save_source
from shared import names as n
from shared.names import Names
from shared.payloads import JetStreamPayloadStore
from shared.sources import source_from_dict
from tests.support.stack import eventually

SOURCE = {
    "name": "shop",
    "seeds": ["http://127.0.0.2:9/p/anvil", "http://127.0.0.2:9/p/bellows"],
    "allow_private": True,
    "robots": "ignore",
    "pacing": {"profile": "fast"},
}
# Only the scheduler and the refresher: the hand-made results are the only ones.
SCALE = "fetcher=0,parser=0"


def product_page(sku: str, name: str, price: str) -> bytes:
    ld = {
        "@context": "https://schema.org",
        "@type": "Product",
        "sku": sku,
        "name": name,
        "offers": {
            "@type": "Offer",
            "price": price,
            "priceCurrency": "EUR",
            "availability": "https://schema.org/InStock",
        },
    }
    return (
        f'<html><head><script type="application/ld+json">{json.dumps(ld)}</script></head>'
        f'<body><h1>{name}</h1><a href="/p/{sku.lower()}-related">related</a></body></html>'
    ).encode()


async def save_shop(pool: asyncpg.Pool) -> None:
    async with pool.acquire() as conn:
        await save_source(conn, source_from_dict(SOURCE))


async def dispatched_entries(pool: asyncpg.Pool, job_id: int, count: int) -> list[asyncpg.Record]:
    """The job's first entries, once the scheduler has dispatched them."""
    rows: list[asyncpg.Record] = []

    async def dispatched() -> bool:
        nonlocal rows
        async with pool.acquire() as conn:
            rows = await conn.fetch(
                "SELECT id, url, attempts, kind, depth FROM entries "
                "WHERE job_id = $1 AND state = 'dispatched' ORDER BY id",
                job_id,
            )
        return len(rows) >= count

    await eventually(dispatched, timeout=30, what=f"{count} dispatched entries")
    return rows[:count]


async def ok_result(
    nc: Client, names: Names, job_id: int, entry: asyncpg.Record, body: bytes
) -> FetchResult:
    """A successful fetch of ``entry`` whose body is stored like a fetcher stores it."""
    stored = await JetStreamPayloadStore(nc.jetstream(), names).put(body)
    return FetchResult(
        attempt=Attempt(
            job_id=job_id,
            entry_id=entry["id"],
            source="shop",
            url=entry["url"],
            kind=entry["kind"],
            depth=entry["depth"],
            number=entry["attempts"],
        ),
        outcome="ok",
        status=200,
        payload_ref=stored.ref,
        content_type="text/html",
        charset="utf-8",
        size=len(body),
        started_at=1.0,
        elapsed_ms=5.0,
    )


async def consumers_idle(nc: Client, names: Names, *durables: tuple[str, str]) -> None:
    """Until every (stream key, durable) consumer has nothing pending and nothing unacked."""
    js = nc.jetstream()

    async def idle() -> bool:
        for key, durable in durables:
            info = await js.consumer_info(names.stream(key), durable)
            if info.num_pending or info.num_ack_pending:
                return False
        return True

    await eventually(idle, timeout=60, what=f"consumers {durables} to be idle")


DLQ = n.DLQ
