"""Refresher: parse results → product upserts and snapshots; completed jobs → misses."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Coroutine, Sequence
from typing import Any

from schemas.messages import JobEvent
from services.refresher import changes, store, verification
from services.refresher.claims import check_completed, unclaimed
from services.refresher.images import link_images
from services.refresher.misses import count_misses
from services.refresher.products import Applied, ParsedProducts, apply_results
from shared.bus import send
from shared.channels import JOB_EVENTS, PARSE_RESULTS
from shared.consumer import Delivery, Subscriber
from shared.errors import Retry
from shared.metrics import Metrics
from shared.service import DbRuntime
from shared.sources import source_from_dict

log = logging.getLogger("trawl.refresher")

# How long a completion waits in-process for the job's last products before a redelivery.
APPLY_WAIT = 20.0
# Parse results in flight per process, in pulled batches of up to BATCH_SIZE (one transaction
# each). (Measured: 3 or 4 batches in flight, or batches of 250 or 1000, were no faster end to
# end.)
PARSED_CONCURRENCY = 1000
BATCH_SIZE = 500
# Change events not published this long after they were recorded were left by a crash between
# the commit and the publish; the sweep (every SWEEP_EVERY s, one replica) publishes them.
SWEEP_AFTER = 10.0
SWEEP_EVERY = 15.0
SWEEP_BATCH = 500


class Counts:
    """The refresher's own counters: shown in its stats (the keys) and served on /metrics."""

    def __init__(self, metrics: Metrics) -> None:
        count = metrics.counter
        self.applied = count(
            "trawl.refresher.results",
            "Parse results applied (redeliveries excluded).",
            unit="{result}",
            stat="applied",
        )
        self.duplicates = count(
            "trawl.refresher.duplicates",
            "Parse results already applied (redeliveries): nothing changed.",
            unit="{result}",
            stat="duplicates",
        )
        self.upserts = count(
            "trawl.refresher.upserts",
            "Products inserted or updated.",
            unit="{product}",
            stat="upserts",
        )
        self.snapshots = count(
            "trawl.refresher.snapshots",
            "Snapshots written (a price or availability changed).",
            unit="{snapshot}",
            stat="snapshots",
        )
        self.batches = count(
            "trawl.refresher.batches",
            "Batches of parse results applied, one transaction each.",
            unit="{batch}",
            stat="batches",
        )
        self.changes = count(
            "trawl.refresher.changes",
            "Product change events recorded (new, price, stock, delisted, relisted).",
            unit="{event}",
            stat="changes",
        )
        self.jobs_counted = count(
            "trawl.refresher.jobs",
            "Completed jobs whose misses were counted.",
            unit="{job}",
            stat="jobs_counted",
        )
        self.candidates = count(
            "trawl.refresher.verify.candidates",
            "Changes held for verification (out of stock, delisted, a large price change).",
            unit="{candidate}",
            stat="verify_candidates",
        )
        self.confirmed = count(
            "trawl.refresher.verify.confirmed",
            "Candidates a verify job's re-check confirmed: their events were emitted.",
            unit="{candidate}",
            stat="verify_confirmed",
        )
        self.cancelled = count(
            "trawl.refresher.verify.cancelled",
            "Candidates a verify job's re-check contradicted: no event.",
            unit="{candidate}",
            stat="verify_cancelled",
        )
        self.unknown = count(
            "trawl.refresher.verify.unknown",
            "Candidates whose re-check said nothing (blocked, failed, unsure): no event.",
            unit="{candidate}",
            stat="verify_unknown",
        )


class Refresher:
    def __init__(self, rt: DbRuntime) -> None:
        self.rt = rt
        self.pool = rt.pool
        self.counts = Counts(rt.metrics)
        self.policies = verification.Policies()

    async def on_parsed_batch(self, deliveries: list[Delivery[ParsedProducts]]) -> None:
        """A pulled batch in one transaction; the consumer acks it after the commit. A result
        the frontier does not back is ``Poison``: the batch goes again one by one (the
        consumer's rule), so the others are applied and only it is dead-lettered (or retried,
        when its dispatch may not be visible yet: claims.py)."""
        results = [d.body for d in deliveries]
        async with self.pool.acquire() as conn:
            await unclaimed(conn, [r.attempt for r in results])
        await self.apply(results)

    async def apply(self, results: Sequence[ParsedProducts]) -> Applied:
        async with self.pool.acquire() as conn:
            done = await apply_results(conn, results, policies=self.policies)
            # After the commit: a crash before the publish leaves the events to the sweep,
            # and a verify job not asked for to the sweep too.
            await changes.publish_pending(self.rt, conn, done.events)
            refused = await verification.request(self.rt.nc, self.rt.names, conn, done.rechecks)
        counts = self.counts
        counts.candidates.add(done.candidates)
        counts.confirmed.add(done.confirmed)
        counts.unknown.add(refused)
        counts.batches.add()
        counts.applied.add(done.results)
        counts.duplicates.add(done.duplicates)
        counts.upserts.add(done.upserts)
        counts.snapshots.add(done.snapshots)
        counts.changes.add(len(done.events))
        return done

    async def sweep_changes(self) -> None:
        """Publish change events whose publish a crash interrupted (the outbox's backstop)."""
        async with self.pool.acquire() as conn:
            while True:
                async with conn.transaction():
                    events = await store.unpublished_events(conn, SWEEP_AFTER, SWEEP_BATCH)
                    await changes.publish_pending(self.rt, conn, events)
                if events:
                    log.info(
                        "change events swept",
                        extra={"action": "changes_swept", "events": len(events)},
                    )
                if len(events) < SWEEP_BATCH:
                    return

    async def sweep_checks(self) -> None:
        """Verification's backstop: ask again for verify jobs nobody answered, settle the
        candidates of verify jobs that finished before their link was recorded, and give up
        (unknown) on candidates no scheduler took for an hour."""
        async with self.pool.acquire() as conn:
            unlinked = await store.unlinked_rechecks(conn, SWEEP_AFTER, SWEEP_BATCH)
            refused = await verification.request(self.rt.nc, self.rt.names, conn, unlinked)
            for job_id, source in await store.finished_verify_jobs(conn):
                async with conn.transaction():
                    done = await verification.resolve(conn, job_id, source)
                await changes.publish_pending(self.rt, conn, done.events)
                self._count_resolution(done)
            abandoned = await store.abandon_unlinked(conn, verification.GIVE_UP_AFTER)
            self.counts.unknown.add(refused + abandoned)

    def _count_resolution(self, done: verification.Resolution) -> None:
        self.counts.confirmed.add(done.confirmed)
        self.counts.cancelled.add(done.cancelled)
        self.counts.unknown.add(done.unknown)
        self.counts.changes.add(len(done.events))

    async def on_job_completed(self, d: Delivery[JobEvent]) -> None:
        event = d.body
        if event.event != "completed":
            return
        deadline = time.monotonic() + APPLY_WAIT
        async with self.pool.acquire() as conn:
            job = check_completed(event, await store.job(conn, event.job_id))
            expected = await store.job_products_found(conn, event.job_id)
            while True:
                applied = await store.count_applied_products(conn, event.job_id)
                if applied >= expected:
                    break
                if time.monotonic() > deadline:
                    raise Retry(
                        f"job {event.job_id}: {applied}/{expected} products applied", delay=5.0
                    )
                await asyncio.sleep(0.2)  # products are still arriving on the other consumer
            source = source_from_dict(job.definition)
            async with conn.transaction():
                report = await count_misses(conn, job, source)
                # Every image entry of the job is done now: point its products at them.
                images = await link_images(conn, event.job_id, event.source)
                # A verify job's re-checks are all in: settle its candidates, once (locked).
                checked = verification.Resolution()
                if job.kind == "verify":
                    checked = await verification.resolve(conn, job.job_id, job.source)
                candidates = await store.job_candidates(conn, job.job_id)
            await changes.publish_pending(self.rt, conn, report.events + checked.events)
            refused = await verification.request(self.rt.nc, self.rt.names, conn, report.rechecks)
            self.counts.unknown.add(refused)
            self.counts.changes.add(len(report.events))
            self.counts.candidates.add(report.candidates)
            self._count_resolution(checked)
        self.counts.jobs_counted.add()
        counters = dict(event.counters)
        counters.update(
            {
                "applied": applied,
                "seen": report.seen,
                "missed": report.missed,
                "delisted": report.delisted,
                "counted": int(report.counted),
                "images_linked": images,
                # Of a crawl job: its changes held for verification, by how they ended so far.
                # Of a verify job: what its re-checks settled.
                "candidates": sum(candidates.values()),
                "verify_confirmed": checked.confirmed,
                "verify_cancelled": checked.cancelled,
                "verify_unknown": checked.unknown,
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
        await send(
            self.rt.js,
            self.rt.names,
            JOB_EVENTS,
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
                "confirmed": checked.confirmed,
                "cancelled": checked.cancelled,
                "unknown": checked.unknown,
            },
        )


async def start(rt: DbRuntime) -> list[Coroutine[Any, Any, None]]:
    refresher = Refresher(rt)
    consumers: list[Subscriber[Any]] = [
        rt.batch_consumer(
            PARSE_RESULTS.view(ParsedProducts),
            refresher.on_parsed_batch,
            concurrency=PARSED_CONCURRENCY,
            batch=BATCH_SIZE,
        ),
        rt.consumer(JOB_EVENTS, refresher.on_job_completed, concurrency=4),
    ]
    return [c.run() for c in consumers] + [
        rt.every(SWEEP_EVERY, refresher.sweep_changes, cluster=True),
        rt.every(SWEEP_EVERY, refresher.sweep_checks, cluster=True),
    ]
