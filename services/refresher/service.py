"""Refresher: parse results → product upserts and snapshots; completed jobs → misses."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Coroutine, Sequence
from typing import Any

from schemas.messages import JobEvent
from services.refresher import store
from services.refresher.batcher import Batcher
from services.refresher.images import link_images
from services.refresher.misses import count_misses
from services.refresher.products import Applied, ParsedProducts, apply_results
from shared import names as n
from shared.bus import publish
from shared.consumer import Delivery
from shared.errors import Retry
from shared.service import Runtime
from shared.sources import source_from_dict

log = logging.getLogger("trawl.refresher")

# How long a completion waits in-process for the job's last products before a redelivery.
APPLY_WAIT = 20.0
# Parse results in flight per process: the upper bound of one batch. Deliveries wait at most
# BATCH_WAIT for companions, so a lone message is applied within a few milliseconds.
# (Measured: 3 or 4 batches in flight, or batches of 250 or 1000, were no faster end to end.)
PARSED_CONCURRENCY = 1000
BATCH_SIZE = 500
BATCH_WAIT = 0.005


class Refresher:
    def __init__(self, rt: Runtime) -> None:
        assert rt.pool is not None
        self.rt = rt
        self.pool = rt.pool
        rt.stats.update({"applied": 0, "duplicates": 0, "upserts": 0, "snapshots": 0, "batches": 0})
        rt.stats["jobs_counted"] = 0
        self.batcher: Batcher[ParsedProducts, Applied] = Batcher(
            self.apply, max_size=BATCH_SIZE, max_wait=BATCH_WAIT, name="refresher-apply"
        )

    async def on_parsed_batch(self, deliveries: list[Delivery[ParsedProducts]]) -> None:
        """A pulled batch in one transaction; the consumer acks it after the commit."""
        await self.apply([d.body for d in deliveries])

    async def on_parsed(self, d: Delivery[ParsedProducts]) -> None:
        # Returns once the batch holding this result is committed; the consumer acks then.
        await self.batcher.submit(d.body)

    async def apply(self, results: Sequence[ParsedProducts]) -> Applied:
        async with self.pool.acquire() as conn:
            done = await apply_results(conn, results)
        stats = self.rt.stats
        stats["batches"] += 1
        stats["applied"] += done.results
        stats["duplicates"] += done.duplicates
        stats["upserts"] += done.upserts
        stats["snapshots"] += done.snapshots
        return done

    async def on_job_completed(self, d: Delivery[JobEvent]) -> None:
        event = d.body
        if event.event != "completed":
            return
        expected = event.counters.get("products", 0)
        deadline = time.monotonic() + APPLY_WAIT
        async with self.pool.acquire() as conn:
            while True:
                applied = await store.count_applied_products(conn, event.job_id)
                if applied >= expected:
                    break
                if time.monotonic() > deadline:
                    raise Retry(
                        f"job {event.job_id}: {applied}/{expected} products applied", delay=5.0
                    )
                await asyncio.sleep(0.2)  # products are still arriving on the other consumer
            job = await store.job(conn, event.job_id)
            if job is None:
                raise Retry(f"job {event.job_id} not found", delay=5.0)
            source = source_from_dict(job.definition)
            async with conn.transaction():
                report = await count_misses(conn, job, source)
                # Every image entry of the job is done now: point its products at them.
                images = await link_images(conn, event.job_id, event.source)
        self.rt.stats["jobs_counted"] += 1
        counters = dict(event.counters)
        counters.update(
            {
                "applied": applied,
                "seen": report.seen,
                "missed": report.missed,
                "delisted": report.delisted,
                "counted": int(report.counted),
                "images_linked": images,
            }
        )
        refreshed = JobEvent(
            job_id=event.job_id,
            source=event.source,
            event="refreshed",
            status=event.status,
            kind=event.kind,
            counters=counters,
            at=time.time(),
        )
        await publish(
            self.rt.js,
            self.rt.names.job_event(event.job_id, "refreshed"),
            refreshed,
            msg_id=f"job-{event.job_id}-refreshed",
        )
        log.info(
            "job refreshed",
            extra={
                "action": "job_refreshed",
                "job_id": event.job_id,
                "counted": report.counted,
                "reason": report.reason,
                "missed": report.missed,
                "delisted": report.delisted,
            },
        )


async def start(rt: Runtime) -> list[Coroutine[Any, Any, None]]:
    refresher = Refresher(rt)
    consumers = [
        rt.consumer(
            n.PARSED,
            ParsedProducts,
            refresher.on_parsed,
            concurrency=PARSED_CONCURRENCY,
            batch=BATCH_SIZE,
            batch_handler=refresher.on_parsed_batch,
        ),
        rt.consumer(n.EVENTS, JobEvent, refresher.on_job_completed, concurrency=4),
    ]
    return [c.run() for c in consumers]
