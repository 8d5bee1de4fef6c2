"""Dispatch: promote due retries, claim domains and their best entries, space the domains'
next releases, and the validators a fetch sends."""

from __future__ import annotations

import asyncpg

from services.scheduler.store.queries import Conn, Q

Validators = tuple[str | None, str | None, str | None]  # etag, last_modified, payload_ref


async def promote_waiting(conn: Conn) -> None:
    """Retries whose time has come become pending again (their domains are marked)."""
    await conn.execute(Q.promote_waiting)


async def claim_domains(conn: Conn, limit: int) -> list[asyncpg.Record]:
    """Domains that may go now, locked for this transaction: (domain, slots, min_delay,
    max_delay, backoff, crawl_delay, late)."""
    return await conn.fetch(Q.claim_domains, limit)


async def pick_entries(conn: Conn, domains: list[str], slots: list[int]) -> list[asyncpg.Record]:
    """Each domain's best pending entries, locked, without claiming them (benchmarks)."""
    return await conn.fetch(Q.pick_entries, domains, slots)


async def claim_entries(conn: Conn, domains: list[str], slots: list[int]) -> list[asyncpg.Record]:
    """Each domain's best pending entries (up to its slots) of running, unpaused jobs, marked
    dispatched: (id, job_id, source, url, domain, kind, depth, keyword, attempts, traceparent,
    request, request_key, waited, referrer)."""
    return await conn.fetch(Q.claim_entries, domains, slots)


async def recheck_domains(conn: Conn, domains: list[str]) -> None:
    """Clear the pending flag of the domains that have no pending entry left."""
    await conn.execute(Q.recheck_domains, domains)


async def mark_domains_dispatched(conn: Conn, counts: dict[str, int]) -> None:
    """Count the released entries in flight and set each domain's next release."""
    await conn.execute(Q.mark_domains_dispatched, list(counts), list(counts.values()))


async def url_validators(
    conn: Conn, keys: list[tuple[str, str]]
) -> dict[tuple[str, str], Validators]:
    """(source, url) → (etag, last_modified, payload_ref) remembered from earlier jobs."""
    found = await conn.fetch(Q.url_validators, [k[0] for k in keys], [k[1] for k in keys])
    return {
        (f["source"], f["url"]): (f["etag"], f["last_modified"], f["payload_ref"]) for f in found
    }


async def seconds_until_due(conn: Conn) -> tuple[float | None, float | None]:
    """Until the earliest domain with pending work may go, and until the earliest retry is due
    (negative: overdue; None: there is none)."""
    row = await conn.fetchrow(Q.seconds_until_due)
    assert row is not None
    return row["domains"], row["retries"]
