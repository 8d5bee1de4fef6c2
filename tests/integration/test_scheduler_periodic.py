"""The scheduler's periodic tasks across replicas: the cluster-wide ones run on one replica at a
time (a lease row in Postgres), so two schedulers publish one progress event per interval for
a running job, not two; and when the leading replica stops, the other takes over."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass

import asyncpg
import msgspec
import pytest

from schemas.messages import JobEvent, Trigger
from services.scheduler.catalog import save_source
from services.scheduler.service import Scheduler
from services.scheduler.sweeps import Periods
from shared.db import open_pool
from shared.names import Names
from shared.provision import provision
from shared.service import DbRuntime
from shared.sources import source_from_dict

PROGRESS = 0.3  # seconds between progress events
SOURCE = {
    "name": "shop",
    "seeds": ["http://127.0.0.2:9/a", "http://127.0.0.2:9/b"],
    "allow_private": ["127.0.0.2/32"],
}


@dataclass
class Replica:
    rt: DbRuntime
    scheduler: Scheduler
    tasks: list[asyncio.Task[None]]

    async def stop(self) -> None:
        self.rt.stop.set()
        await asyncio.wait_for(asyncio.gather(*self.tasks), 10)


@contextlib.asynccontextmanager
async def replica(settings, nc, database_url: str) -> AsyncIterator[Replica]:
    """One scheduler replica running its periodic tasks only (no consumers, no dispatch: the
    job's entries stay pending, so the job keeps running)."""
    pool = await open_pool(database_url, min_size=1, max_size=4, attempts=3)
    names = Names(settings.namespace)
    rt = DbRuntime("scheduler", settings, names, nc, nc.jetstream(), asyncio.Event(), pool=pool)
    scheduler = Scheduler(rt, Periods(sweep=PROGRESS, progress=PROGRESS, schedules=PROGRESS))
    tasks = [asyncio.create_task(c) for c in scheduler.periodic()]
    try:
        yield Replica(rt, scheduler, tasks)
    finally:
        rt.stop.set()
        await asyncio.gather(*tasks, return_exceptions=True)
        await pool.close()


async def _events(
    queue: asyncio.Queue[JobEvent], count: int, *, after: float = 0.0
) -> list[JobEvent]:
    """The next ``count`` events published after ``after`` (epoch seconds)."""
    out: list[JobEvent] = []
    while len(out) < count:
        event = await asyncio.wait_for(queue.get(), 10)
        if event.at > after:
            out.append(event)
    return out


def _gaps(events: list[JobEvent]) -> list[float]:
    return [b.at - a.at for a, b in itertools.pairwise(events)]


@pytest.mark.timeout(90)
async def test_two_replicas_publish_one_progress_event_per_interval(
    settings, nc, database_url: str, pool: asyncpg.Pool
) -> None:
    names = Names(settings.namespace)
    await provision(nc.jetstream(), names, max_deliver=settings.max_deliver)
    async with pool.acquire() as conn:
        await save_source(conn, source_from_dict(SOURCE))

    queue: asyncio.Queue[JobEvent] = asyncio.Queue()
    decoder = msgspec.json.Decoder(JobEvent)

    async def collect(msg) -> None:
        await queue.put(decoder.decode(msg.data))

    async with (
        replica(settings, nc, database_url) as a,
        replica(settings, nc, database_url) as b,
    ):
        reply = await a.scheduler.handle_trigger(Trigger(id="t1", source="shop"), b"")
        assert reply.job_id is not None and not reply.existing
        sub = await nc.subscribe(names.job_event(reply.job_id, "progress"), cb=collect)
        try:
            both = await _events(queue, 6)
            # One publisher ticks every PROGRESS seconds (plus the tick's own time); two would
            # alternate, so one of every two gaps would be well under the interval.
            assert all(gap >= 0.8 * PROGRESS for gap in _gaps(both)), _gaps(both)
            assert {e.status for e in both} == {"running"} and both[0].counters["pending"] == 2
            assert not any(t.done() for t in a.tasks + b.tasks)  # both replicas are alive

            # Whichever replica led, stopping one leaves the other to publish (taking the lock
            # over when the stopped one held it).
            await a.stop()
            alone = await _events(queue, 4, after=time.time())
            assert all(gap >= 0.8 * PROGRESS for gap in _gaps(alone)), _gaps(alone)
            assert not any(t.done() for t in b.tasks)
        finally:
            await sub.unsubscribe()
