"""Job lifecycle: the source a job runs with, completion, and the events that announce it."""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass

from nats.js import JetStreamContext

from schemas.messages import JobEvent
from schemas.source import Source
from services.scheduler import store
from services.scheduler.store import Conn
from shared.bus import send
from shared.channels import JOB_EVENTS
from shared.lru import LRU
from shared.names import Names
from shared.sources import effective_allowed_domains, source_from_dict

log = logging.getLogger("trawl.scheduler.jobs")

FINAL_EVENTS = ("completed", "cancelled")


class JobSources:
    """Job id → the source definition the job was started with (immutable, so cacheable)."""

    def __init__(self, size: int = 1024) -> None:
        self._cache: LRU[int, tuple[Source, list[str]]] = LRU(size)

    async def get(self, conn: Conn, job_id: int) -> tuple[Source, list[str]]:
        hit = self._cache.get(job_id)
        if hit is not None:
            return hit
        definition = await store.jobs.definition(conn, job_id)
        if definition is None:
            raise LookupError(f"job {job_id} does not exist")
        source = source_from_dict(definition)
        value = (source, effective_allowed_domains(source))
        self._cache.put(job_id, value)
        return value


@dataclass(frozen=True)
class Recheck:
    """How a verify job's fetches differ from a crawl's: what they must not present (the
    identities and proxies of the fetches that saw its candidates' changes), and no validators
    (a fresh visitor has no cached copy to revalidate)."""

    identities: list[str]
    proxies: list[str]


class VerifyAvoid:
    """Job id → its ``Recheck`` when it is a verify job, else None. Read once per job: a verify
    job's pages are all admitted when it starts."""

    def __init__(self, size: int = 1024) -> None:
        self._cache: LRU[int, tuple[Recheck | None]] = LRU(size)

    async def get(self, conn: Conn, job_id: int) -> Recheck | None:
        hit = self._cache.get(job_id)
        if hit is None:
            avoid = await store.jobs.verify_avoid(conn, job_id)
            hit = (None if avoid is None else Recheck(*avoid),)
            self._cache.put(job_id, hit)
        return hit[0]


async def try_complete(conn: Conn, job_id: int) -> bool:
    """Mark the job completed when nothing of it is open. True if this call completed it."""
    return await store.jobs.complete_if_done(conn, job_id)


async def complete_and_announce(
    js: JetStreamContext, names: Names, conn: Conn, job_id: int
) -> bool:
    """Complete the job if nothing of it is open, and publish ``completed``; True if it did."""
    if not await try_complete(conn, job_id):
        return False
    await publish_event(js, names, conn, job_id, "completed")
    return True


async def publish_event(
    js: JetStreamContext, names: Names, conn: Conn, job_id: int, event: str
) -> JobEvent:
    job = await store.jobs.head(conn, job_id)
    if job is None:
        raise LookupError(f"job {job_id} does not exist")
    counts = await store.jobs.counters(conn, job_id)
    message = JobEvent(
        job_id=job_id,
        source=job["source"],
        event=event,
        status=job["status"],
        kind=job["kind"],
        counters=counts,
        at=time.time(),
    )
    # Final events are deduplicated by id: the sweep may publish them again after a crash.
    msg_id = f"job-{job_id}-{event}" if event in ("started", *FINAL_EVENTS) else None
    await send(js, names, JOB_EVENTS, message, msg_id=msg_id)
    if event in FINAL_EVENTS:
        await store.jobs.mark_event_published(conn, job_id, counts)
    log.info(
        "job %s",
        event,
        extra={
            "action": f"job_{event}",
            "job_id": job_id,
            "source": job["source"],
            "counters": counts,
        },
    )
    return message
