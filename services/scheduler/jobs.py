"""Job lifecycle: creation, counters, completion and the events that announce them."""

from __future__ import annotations

import logging
import time
from collections import OrderedDict

import asyncpg
from nats.js import JetStreamContext

from schemas.messages import JobEvent
from schemas.source import Source
from shared.bus import publish
from shared.names import Names
from shared.sources import effective_allowed_domains, source_from_dict

log = logging.getLogger("trawl.scheduler.jobs")

OPEN_STATES = ("pending", "waiting", "dispatched", "fetched")


class JobSources:
    """Job id → the source definition the job was started with (immutable, so cacheable)."""

    def __init__(self, size: int = 1024) -> None:
        self._cache: OrderedDict[int, tuple[Source, list[str]]] = OrderedDict()
        self._size = size

    async def get(self, conn: asyncpg.Connection, job_id: int) -> tuple[Source, list[str]]:
        hit = self._cache.get(job_id)
        if hit is not None:
            self._cache.move_to_end(job_id)
            return hit
        definition = await conn.fetchval("SELECT definition FROM jobs WHERE id = $1", job_id)
        if definition is None:
            raise LookupError(f"job {job_id} does not exist")
        source = source_from_dict(definition)
        value = (source, effective_allowed_domains(source))
        self._cache[job_id] = value
        if len(self._cache) > self._size:
            self._cache.popitem(last=False)
        return value


async def counters(conn: asyncpg.Connection, job_id: int) -> dict[str, int]:
    """Entries by state and by last outcome, plus products found."""
    # Products: an API page counts every product it listed (product_count); rows written
    # before that column only have has_product.
    rows = await conn.fetch(
        """SELECT state, last_outcome, count(*) AS n,
                  coalesce(sum(greatest(product_count, has_product::int)), 0) AS p,
                  count(*) FILTER (WHERE parse_error IS NOT NULL) AS e
           FROM entries WHERE job_id = $1 GROUP BY state, last_outcome""",
        job_id,
    )
    out: dict[str, int] = {"total": 0, "products": 0, "parse_errors": 0}
    for r in rows:
        out["total"] += r["n"]
        out["products"] += r["p"]
        out["parse_errors"] += r["e"]
        out[r["state"]] = out.get(r["state"], 0) + r["n"]
        if r["last_outcome"]:
            key = f"outcome_{r['last_outcome']}"
            out[key] = out.get(key, 0) + r["n"]
    out["open"] = sum(out.get(s, 0) for s in OPEN_STATES)
    keywords = await conn.fetch(
        """SELECT keyword, count(*) AS n,
                  coalesce(sum(greatest(product_count, has_product::int)), 0) AS p
           FROM entries WHERE job_id = $1 AND keyword IS NOT NULL GROUP BY keyword""",
        job_id,
    )
    for r in keywords:
        out[f"kw:{r['keyword']}:pages"] = r["n"]
        out[f"kw:{r['keyword']}:products"] = r["p"]
    return out


async def parse_errors(conn: asyncpg.Connection, job_id: int, limit: int = 20) -> list[dict]:
    """The job's pages whose parse reported an error (a pagination guard, an API error)."""
    rows = await conn.fetch(
        """SELECT url, request->>'page' AS page, request->>'cursor' AS cursor, parse_error
           FROM entries WHERE job_id = $1 AND parse_error IS NOT NULL ORDER BY id LIMIT $2""",
        job_id,
        limit,
    )
    return [dict(r) for r in rows]


async def try_complete(conn: asyncpg.Connection, job_id: int) -> bool:
    """Mark the job completed when nothing of it is open. True if this call completed it."""
    row = await conn.fetchrow(
        """UPDATE jobs SET status = 'completed', finished_at = now()
           WHERE id = $1 AND status = 'running'
             AND NOT EXISTS (SELECT 1 FROM entries WHERE job_id = $1
                             AND state IN ('pending', 'waiting', 'dispatched', 'fetched'))
           RETURNING id""",
        job_id,
    )
    return row is not None


async def publish_event(
    js: JetStreamContext, names: Names, conn: asyncpg.Connection, job_id: int, event: str
) -> JobEvent:
    job = await conn.fetchrow("SELECT source, kind, status FROM jobs WHERE id = $1", job_id)
    counts = await counters(conn, job_id)
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
    msg_id = f"job-{job_id}-{event}" if event in ("started", "completed", "cancelled") else None
    await publish(js, names.job_event(job_id, event), message, msg_id=msg_id)
    if event in ("completed", "cancelled"):
        await conn.execute(
            "UPDATE jobs SET event_published = true, counters = $2 WHERE id = $1", job_id, counts
        )
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
