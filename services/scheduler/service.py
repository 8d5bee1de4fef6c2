"""Scheduler: subscriptions → handlers, the dispatch loop and the periodic tasks (sweeps.py)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Coroutine
from datetime import UTC, datetime
from typing import Any

import asyncpg
import msgspec
from nats.aio.msg import Msg

from schemas.messages import FetchResult, ParseResult, Trigger, TriggerReply
from services.scheduler.batches import GroupCommit
from services.scheduler.dispatch import Dispatcher
from services.scheduler.jobs import JobSources, complete_and_announce, publish_event
from services.scheduler.results import Applied, apply_fetch_results, apply_parse_results
from services.scheduler.robots import KnownRobots
from services.scheduler.schedules import claim_due, record_run
from services.scheduler.seen import SeenLinks
from services.scheduler.store import Conn
from services.scheduler.sweeps import Periods, Sweeps
from services.scheduler.triggers import start_job, trigger_digest
from shared.bus import encode
from shared.channels import FETCH_RESULTS, PARSE_RESULTS, TRIGGERS
from shared.consumer import Delivery, Subscriber
from shared.errors import Poison, Retry
from shared.periodic import TRANSIENT
from shared.service import DbRuntime
from shared.sources import source_to_dict
from shared.telemetry import consumer_span, current_traceparent

log = logging.getLogger("trawl.scheduler")


class Scheduler:
    def __init__(self, rt: DbRuntime, periods: Periods | None = None) -> None:
        self.rt = rt
        self.pool: asyncpg.Pool = rt.pool
        self.periods = periods or Periods()
        self.job_sources = JobSources()
        self.seen = SeenLinks()  # links known to be in their job: skip the admission query
        # robots.txt the fetchers know: links it disallows are settled, never dispatched.
        self.robots = KnownRobots(lambda: rt.js.key_value(rt.names.robots_bucket))
        self.dispatcher = Dispatcher(
            self.pool, rt.js, rt.names, self.job_sources, metrics=rt.metrics
        )
        self.wake = asyncio.Event()
        self.sweeps = Sweeps(
            self.pool,
            rt.js,
            rt.names,
            visibility_timeout=rt.settings.visibility_timeout,
            wake=self.wake,
        )
        self.trigger_decoder = msgspec.json.Decoder(Trigger)
        self.fetch_results = GroupCommit(self._apply_fetched)
        self.parse_results = GroupCommit(self._apply_parsed)
        rt.metrics.show("dispatched", rt.metrics.dispatched)

    # -- triggers ----------------------------------------------------------------------------
    async def handle_trigger(self, trigger: Trigger, raw: bytes) -> TriggerReply:
        digest = trigger_digest(trigger, raw)
        for attempt in range(3):
            try:
                async with self.pool.acquire() as conn:
                    reply, created = await start_job(conn, trigger, digest)
                    if created:
                        assert reply.job_id is not None  # a created job has its id
                        await self._publish_source(conn, reply.job_id)
                        await publish_event(
                            self.rt.js, self.rt.names, conn, reply.job_id, "started"
                        )
                break
            except asyncpg.UniqueViolationError:
                # Two triggers raced to start the source's job; the next try joins the winner.
                if attempt == 2:
                    raise
            except asyncpg.DataError as exc:  # e.g. a NUL byte: text Postgres cannot store
                raise Poison(f"malformed trigger: {exc}") from exc
        self.wake.set()
        log.info(
            "trigger accepted",
            extra={
                "action": "trigger_accepted",
                "job_id": reply.job_id,
                "source": trigger.source,
                "existing": reply.existing,
            },
        )
        return reply

    async def _publish_source(self, conn: Conn, job_id: int) -> None:
        """Put the job's source definition where stateless parsers can read it."""
        source, _ = await self.job_sources.get(conn, job_id)
        kv = await self.rt.js.key_value(self.rt.names.sources_bucket)
        await kv.put(f"job.{job_id}", msgspec.json.encode(source_to_dict(source)))

    async def on_trigger(self, d: Delivery[Trigger]) -> None:
        await self.handle_trigger(d.body, d.msg.data)

    async def on_trigger_request(self, msg: Msg) -> None:
        """Core-NATS request path: answer with the job id (or the error)."""
        if not msg.reply:
            return  # a plain publish: the stream consumer handles it
        with consumer_span(msg.subject, msg.headers, **{"trawl.path": "request"}):
            try:
                trigger = self.trigger_decoder.decode(msg.data)
                reply = await self.handle_trigger(trigger, msg.data)
            except (msgspec.DecodeError, msgspec.ValidationError) as exc:
                reply = TriggerReply(error=f"malformed trigger: {exc}")
            except Poison as exc:
                reply = TriggerReply(error=str(exc))
            except Exception as exc:
                log.exception("trigger request failed", extra={"action": "trigger_error"})
                reply = TriggerReply(error=f"internal error: {type(exc).__name__}: {exc}")
            with contextlib.suppress(Exception):
                await msg.respond(encode(reply))

    # -- results -----------------------------------------------------------------------------
    # Results handled concurrently are applied in groups, one transaction each (batches.py).
    async def on_fetched(self, d: Delivery[FetchResult]) -> None:
        await self.fetch_results.submit(d.body)

    async def on_parsed(self, d: Delivery[ParseResult]) -> None:
        await self.parse_results.submit((d.body, current_traceparent()))

    async def _apply_fetched(self, results: list[FetchResult]) -> list[Applied | None]:
        async with self.pool.acquire() as conn:
            try:
                applied = await apply_fetch_results(conn, results, self.job_sources)
            except asyncpg.DeadlockDetectedError as exc:
                raise Retry("deadlock", delay=0.2) from exc
            for result, done in zip(results, applied, strict=True):
                if done and done.state:
                    self.rt.metrics.fetch_applied(done.state, result.outcome)
            # A job with an entry this group left open (fetched, waiting) cannot be complete.
            open_jobs = {a.job_id for a in applied if a and a.state in ("fetched", "waiting")}
            closed = {a.job_id for a in applied if a and a.terminal}
            await self._maybe_complete(conn, closed - open_jobs)
        self.wake.set()
        return applied

    async def _apply_parsed(self, items: list[tuple[ParseResult, str | None]]) -> list[None]:
        robots = self.robots.batch()
        async with self.pool.acquire() as conn:
            try:
                applied = await apply_parse_results(
                    conn,
                    [result for result, _ in items],
                    self.job_sources,
                    self.seen,
                    traceparents=[traceparent for _, traceparent in items],
                    robots=robots,
                )
            except asyncpg.DeadlockDetectedError as exc:
                raise Retry("deadlock", delay=0.2) from exc
            self.rt.metrics.robots_settled(robots.settled)
            # A job this group left an entry open in (parsed before its fetch result) cannot
            # be complete. (Admitted links need not be open: a sitemap's unchanged URLs
            # enter done.)
            open_jobs = {a.job_id for a, _ in applied if a and not a.terminal}
            closed = {a.job_id for a, _ in applied if a and a.terminal}
            await self._maybe_complete(conn, closed - open_jobs)
        if any(admitted for _, admitted in applied):
            self.wake.set()  # new pending work (a parse result frees no slot)
        return [None] * len(items)

    async def _maybe_complete(self, conn: Conn, job_ids: set[int]) -> None:
        """Complete the jobs whose entries a batch closed, if nothing of them is open."""
        for job_id in sorted(job_ids):
            await complete_and_announce(self.rt.js, self.rt.names, conn, job_id)

    # -- loops -------------------------------------------------------------------------------
    async def dispatch_loop(self) -> None:
        """Dispatch while something is due; otherwise sleep until it is, or until a result or
        new work wakes the loop, at most 1 s (other replicas' changes). A wake that finds
        nothing due costs one statement, not a claim transaction.

        Due but nothing released (the domain locked by a group of results or another replica,
        or its entries' job paused): the next wake or the 1 s poll tries again, not a 10 ms
        poll for as long as the job stays paused."""
        stop = self.rt.stop
        while not stop.is_set():
            self.wake.clear()
            try:
                due = await self.dispatcher.due()
                if due.now and await self.dispatcher.cycle(promote=due.retries_now):
                    continue
            except TRANSIENT as exc:
                log.warning("dispatch failed: %s", exc, extra={"action": "dispatch_error"})
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(stop.wait(), 1.0)
                continue
            wait = None if due.now else due.wait
            timeout = 1.0 if wait is None else min(1.0, max(0.01, wait))
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._wake_or_stop(), timeout)

    async def _wake_or_stop(self) -> None:
        waiters = [
            asyncio.ensure_future(self.wake.wait()),
            asyncio.ensure_future(self.rt.stop.wait()),
        ]
        try:
            await asyncio.wait(waiters, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for w in waiters:
                w.cancel()

    async def run_due_schedules(self) -> None:
        """Start every due schedule run; every replica runs this, SKIP LOCKED shares the work."""
        while await self.run_one_schedule():
            pass

    async def run_one_schedule(self) -> bool:
        """Claim and start one due run; False when nothing is due."""
        async with self.pool.acquire() as conn:
            claimed = await claim_due(conn, datetime.now(UTC))
        if claimed is None:
            return False
        row, trigger = claimed
        job_id, error = None, None
        try:
            reply = await self.handle_trigger(trigger, encode(trigger))
            job_id = reply.job_id
        except Poison as exc:
            error = str(exc)
        async with self.pool.acquire() as conn:
            await record_run(conn, row["id"], job_id, error)
        log.info(
            "schedule run",
            extra={
                "action": "schedule_run",
                "schedule_id": row["id"],
                "job_id": job_id,
                "error": error,
            },
        )
        return True

    def periodic(self) -> list[Coroutine[Any, Any, None]]:
        """The periodic tasks (see sweeps.py for which run cluster-wide, and why)."""
        every, sweeps, p = self.rt.every, self.sweeps, self.periods
        return [
            every(p.sweep, sweeps.recover_stale_entries, cluster=True),
            every(p.recheck, sweeps.recheck_has_pending, cluster=True),
            every(p.sweep, sweeps.complete_unfinished_jobs, cluster=True),
            every(p.sweep, sweeps.republish_lost_events, cluster=True),
            every(p.progress, sweeps.publish_progress, cluster=True),
            every(p.sweep, sweeps.publish_active_proxies, cluster=True),
            every(p.schedules, self.run_due_schedules),
        ]


async def start(rt: DbRuntime) -> list[Coroutine[Any, Any, None]]:
    sched = Scheduler(rt)
    concurrency = rt.settings.concurrency
    consumers: list[Subscriber[Any]] = [
        rt.consumer(TRIGGERS, sched.on_trigger, concurrency=8),
        rt.consumer(FETCH_RESULTS, sched.on_fetched, concurrency=concurrency),
        rt.consumer(PARSE_RESULTS, sched.on_parsed, concurrency=concurrency),
    ]
    await rt.nc.subscribe(
        rt.names.trigger, queue=rt.names.trigger_queue, cb=sched.on_trigger_request
    )
    return [*(c.run() for c in consumers), sched.dispatch_loop(), *sched.periodic()]
