"""Operator actions on jobs and domains. The CLI and the admin API both call these; they only
touch Postgres, and the dispatch loop picks the changes up on its next cycle (≤ 1 s)."""

from __future__ import annotations

from dataclasses import dataclass

import asyncpg

from shared.errors import TrawlError


class NotFound(TrawlError):
    """No such object."""


class Conflict(TrawlError):
    """The object is not in a state that allows this action."""


@dataclass(frozen=True)
class ActionResult:
    job_id: int | None = None
    domain: str | None = None
    affected: int = 0
    status: str | None = None


async def _job_status(conn: asyncpg.Connection, job_id: int) -> str:
    status = await conn.fetchval("SELECT status FROM jobs WHERE id = $1", job_id)
    if status is None:
        raise NotFound(f"job {job_id} not found")
    return status


async def cancel_job(conn: asyncpg.Connection, job_id: int) -> ActionResult:
    """Stop a running job: open entries become ``cancelled``; in-flight fetches finish."""
    async with conn.transaction():
        status = await _job_status(conn, job_id)
        if status != "running":
            raise Conflict(f"job {job_id} is {status}, not running")
        n = await conn.execute(
            """UPDATE entries SET state = 'cancelled', updated_at = now()
               WHERE job_id = $1 AND state IN ('pending', 'waiting')""",
            job_id,
        )
        await conn.execute(
            "UPDATE jobs SET status = 'cancelled', finished_at = now() WHERE id = $1", job_id
        )
    return ActionResult(job_id=job_id, affected=_count(n), status="cancelled")


async def retry_failed(conn: asyncpg.Connection, job_id: int) -> ActionResult:
    """Give the job's failed entries a fresh set of retries; a finished job runs again."""
    async with conn.transaction():
        status = await _job_status(conn, job_id)
        job = await conn.fetchrow("SELECT source FROM jobs WHERE id = $1", job_id)
        if status != "running":
            other = await conn.fetchval(
                "SELECT id FROM jobs WHERE source = $1 AND status = 'running'", job["source"]
            )
            if other is not None:
                raise Conflict(f"source {job['source']} already has running job {other}")
        rows = await conn.fetch(
            """UPDATE entries SET state = 'pending', attempts = 0, not_before = NULL,
                   updated_at = now()
               WHERE job_id = $1 AND state = 'failed' RETURNING domain""",
            job_id,
        )
        affected = len(rows)
        await conn.execute(
            "UPDATE domains SET has_pending = true WHERE domain = ANY($1::text[])",
            sorted({r["domain"] for r in rows}),
        )
        if affected and status != "running":
            await conn.execute(
                """UPDATE jobs SET status = 'running', finished_at = NULL,
                       event_published = false WHERE id = $1""",
                job_id,
            )
            status = "running"
    return ActionResult(job_id=job_id, affected=affected, status=status)


async def boost_job(conn: asyncpg.Connection, job_id: int, amount: int = 20) -> ActionResult:
    """Raise the priority of the job's waiting work (capped at 100)."""
    await _job_status(conn, job_id)
    n = await conn.execute(
        """UPDATE entries SET priority = least(100, priority + $2),
               rank = rank + (least(100, priority + $2) - priority), updated_at = now()
           WHERE job_id = $1 AND state IN ('pending', 'waiting')""",
        job_id,
        amount,
    )
    return ActionResult(job_id=job_id, affected=_count(n))


async def pause_job(conn: asyncpg.Connection, job_id: int, paused: bool = True) -> ActionResult:
    await _job_status(conn, job_id)
    await conn.execute("UPDATE jobs SET paused = $2 WHERE id = $1", job_id, paused)
    return ActionResult(job_id=job_id, status="paused" if paused else "running")


async def pause_domain(conn: asyncpg.Connection, domain: str, paused: bool = True) -> ActionResult:
    n = await conn.execute(
        "UPDATE domains SET paused = $2, updated_at = now() WHERE domain = $1", domain, paused
    )
    if not _count(n):
        raise NotFound(f"domain {domain} not found")
    return ActionResult(domain=domain, status="paused" if paused else "active")


async def set_domain_pace(
    conn: asyncpg.Connection,
    domain: str,
    *,
    min_delay: float | None = None,
    max_delay: float | None = None,
    max_in_flight: int | None = None,
) -> ActionResult:
    """Set a domain's pace; it holds until a new job of a source sets the domain's policy."""
    row = await conn.fetchrow(
        "SELECT min_delay, max_delay, max_in_flight FROM domains WHERE domain = $1", domain
    )
    if row is None:
        raise NotFound(f"domain {domain} not found")
    lo = row["min_delay"] if min_delay is None else min_delay
    hi = row["max_delay"] if max_delay is None else max_delay
    n = row["max_in_flight"] if max_in_flight is None else max_in_flight
    if lo < 0 or hi < lo or n < 1:
        raise Conflict("need 0 <= min_delay <= max_delay and max_in_flight >= 1")
    await conn.execute(
        """UPDATE domains SET min_delay = $2, max_delay = $3, max_in_flight = $4, backoff = 1,
               updated_at = now() WHERE domain = $1""",
        domain,
        lo,
        hi,
        n,
    )
    return ActionResult(domain=domain, status="active")


def _count(status: str) -> int:
    return int(status.rsplit(" ", 1)[-1])
