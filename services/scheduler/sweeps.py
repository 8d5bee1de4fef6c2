"""The scheduler's periodic upkeep, one named task each (``Runtime.every``).

Cluster-wide (one replica at a time, the one holding the scheduler's lease, shared.leases):

- ``recover_stale_entries``: work dispatched without a result within the visibility timeout
  goes back to pending, or fails once its attempts exceed the retry budget (SKIP LOCKED would
  make it safe on every replica, but one pass over the in-flight entries per interval is
  enough);
- ``recheck_has_pending``: the backstop for the domains' pending flag (a full scan, 30 s);
- ``complete_unfinished_jobs``: jobs whose last entry closed without anyone completing them
  (completion is atomic, so this is about not running N scans, not about duplicates);
- ``republish_lost_events``: final events a crash lost; must be cluster-wide;
- ``publish_progress``: one ``progress`` event per running job per interval, whatever the
  replica count; must be cluster-wide;
- ``publish_active_proxies``: the fetchers' proxy list (one writer, written only on change).

On every replica: the schedule runs (``Scheduler.run_due_schedules``: ``SKIP LOCKED`` shares
the due runs out, so more replicas start them sooner) and the dispatch loop, which is not
periodic.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass

import asyncpg
from nats.js import JetStreamContext

from services.scheduler import store
from services.scheduler.jobs import complete_and_announce, publish_event
from services.scheduler.proxies import publish_active_proxies
from shared.names import Names

log = logging.getLogger("trawl.scheduler.sweeps")


@dataclass(frozen=True)
class Periods:
    """Seconds between runs of each periodic task."""

    sweep: float = 2.0  # stale recovery, unfinished jobs, lost events, proxies
    progress: float = 2.0
    recheck: float = 30.0  # the has_pending backstop
    schedules: float = 1.0


class Sweeps:
    def __init__(
        self,
        pool: asyncpg.Pool,
        js: JetStreamContext,
        names: Names,
        *,
        visibility_timeout: float,
        wake: asyncio.Event,
    ) -> None:
        self.pool = pool
        self.js = js
        self.names = names
        self.visibility_timeout = visibility_timeout
        self.wake = wake  # the dispatch loop's: recovered work can go at once

    async def recover_stale_entries(self) -> None:
        async with self.pool.acquire() as conn:
            recovered, failed = await store.frontier.recover_stale(conn, self.visibility_timeout)
        if recovered:
            log.warning(
                "recovered %d stale entries",
                recovered,
                extra={"action": "stale_recovered", "count": recovered},
            )
            self.wake.set()
        if failed:
            # Past the retry budget: failed, never re-dispatched (complete_unfinished_jobs
            # then closes a job whose last entry this was).
            log.warning(
                "%d stale entries failed: no result within the retry budget",
                failed,
                extra={"action": "stale_failed", "count": failed},
            )

    async def recheck_has_pending(self) -> None:
        """A domain must never starve silently."""
        async with self.pool.acquire() as conn:
            await store.frontier.recheck_has_pending(conn)

    async def complete_unfinished_jobs(self) -> None:
        async with self.pool.acquire() as conn:
            for job_id in await store.jobs.running_ids(conn):
                await complete_and_announce(self.js, self.names, conn, job_id)

    async def republish_lost_events(self) -> None:
        """Final events are deduplicated by message id, so publishing one again is safe."""
        async with self.pool.acquire() as conn:
            for job_id, status in await store.jobs.unpublished_final(conn):
                event = "completed" if status == "completed" else "cancelled"
                await publish_event(self.js, self.names, conn, job_id, event)

    async def publish_progress(self) -> None:
        async with self.pool.acquire() as conn:
            for job_id in await store.jobs.running_ids(conn):
                if await store.jobs.status(conn, job_id) == "running":
                    await publish_event(self.js, self.names, conn, job_id, "progress")

    async def publish_active_proxies(self) -> None:
        async with self.pool.acquire() as conn:
            await publish_active_proxies(conn, self.js, self.names)
