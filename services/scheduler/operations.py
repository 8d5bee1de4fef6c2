"""Operator actions on jobs and domains. The CLI and the admin API both call these; they only
touch Postgres, and the dispatch loop picks the changes up on its next cycle (≤ 1 s)."""

from __future__ import annotations

import logging
from dataclasses import dataclass

from services.scheduler import store
from services.scheduler.store import Conn
from shared.errors import TrawlError

log = logging.getLogger("trawl.scheduler.operations")


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


async def _job_status(conn: Conn, job_id: int) -> str:
    status = await store.jobs.status(conn, job_id)
    if status is None:
        raise NotFound(f"job {job_id} not found")
    return status


async def cancel_job(conn: Conn, job_id: int) -> ActionResult:
    """Stop a running job: open entries become ``cancelled``; in-flight fetches finish."""
    async with conn.transaction():
        status = await _job_status(conn, job_id)
        if status != "running":
            raise Conflict(f"job {job_id} is {status}, not running")
        n = await store.jobs.cancel(conn, job_id)
    return ActionResult(job_id=job_id, affected=n, status="cancelled")


async def retry_failed(conn: Conn, job_id: int) -> ActionResult:
    """Give the job's failed entries a fresh set of retries; a finished job runs again."""
    async with conn.transaction():
        status = await _job_status(conn, job_id)
        if status != "running":
            source = await store.jobs.source_of(conn, job_id)
            assert source is not None
            other = await store.jobs.running_of_source(conn, source)
            if other is not None:
                raise Conflict(f"source {source} already has running job {other}")
        affected = await store.jobs.reset_failed_entries(conn, job_id)
        if affected and status != "running":
            await store.jobs.reopen(conn, job_id)
            status = "running"
    return ActionResult(job_id=job_id, affected=affected, status=status)


async def boost_job(conn: Conn, job_id: int, amount: int = 20) -> ActionResult:
    """Raise the priority of the job's waiting work (capped at 100)."""
    await _job_status(conn, job_id)
    n = await store.jobs.boost(conn, job_id, amount)
    return ActionResult(job_id=job_id, affected=n)


async def pause_job(conn: Conn, job_id: int, paused: bool = True) -> ActionResult:
    await _job_status(conn, job_id)
    await store.jobs.set_paused(conn, job_id, paused)
    return ActionResult(job_id=job_id, status="paused" if paused else "running")


async def pause_domain(conn: Conn, domain: str, paused: bool = True) -> ActionResult:
    if not await store.domains.set_paused(conn, domain, paused):
        raise NotFound(f"domain {domain} not found")
    return ActionResult(domain=domain, status="paused" if paused else "active")


async def reset_domain(conn: Conn, domain: str) -> ActionResult:
    """Clear a domain's back-off, its wait (a server's Retry-After included) and bring its
    waiting retries forward: the operator's answer to a domain parked by a hostile answer."""
    hurried = await store.domains.reset(conn, domain)
    if hurried is None:
        raise NotFound(f"domain {domain} not found")
    log.info(
        "domain reset",
        extra={"action": "domain_reset", "domain": domain, "retries_due": hurried},
    )
    return ActionResult(domain=domain, affected=hurried, status="reset")


async def set_domain_pace(
    conn: Conn,
    domain: str,
    *,
    min_delay: float | None = None,
    max_delay: float | None = None,
    max_in_flight: int | None = None,
) -> ActionResult:
    """Set a domain's pace; it holds until a new job of a source sets the domain's policy."""
    row = await store.domains.pace(conn, domain)
    if row is None:
        raise NotFound(f"domain {domain} not found")
    lo = row["min_delay"] if min_delay is None else min_delay
    hi = row["max_delay"] if max_delay is None else max_delay
    n = row["max_in_flight"] if max_in_flight is None else max_in_flight
    if lo < 0 or hi < lo or n < 1:
        raise Conflict("need 0 <= min_delay <= max_delay and max_in_flight >= 1")
    await store.domains.set_pace(conn, domain, min_delay=lo, max_delay=hi, max_in_flight=n)
    return ActionResult(domain=domain, status="active")
