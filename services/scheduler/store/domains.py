"""Domains as operators see and steer them: pacing state, why work waits, pause and pace."""

from __future__ import annotations

import asyncpg

from schemas.read import DomainOut, WaitingOut
from services.scheduler.store.queries import Conn, Q, affected


async def list_all(conn: Conn, *, limit: int = 50, offset: int = 0) -> list[DomainOut]:
    rows = await conn.fetch(Q.list_domains, limit, offset)
    return [DomainOut(**dict(r)) for r in rows]


async def get(conn: Conn, domain: str) -> DomainOut | None:
    row = await conn.fetchrow(Q.get_domain, domain)
    return None if row is None else DomainOut(**dict(row))


async def exists(conn: Conn, domain: str) -> bool:
    return bool(await conn.fetchval(Q.domain_exists, domain))


async def why_waiting(
    conn: Conn,
    *,
    domain: str | None = None,
    url: str | None = None,
    limit: int = 50,
    offset: int = 0,
) -> list[WaitingOut]:
    """Open entries (of one domain, or one URL, when given) and what holds each back."""
    rows = await conn.fetch(Q.why_waiting, domain, url, limit, offset)
    return [WaitingOut(**dict(r)) for r in rows]


async def set_paused(conn: Conn, domain: str, paused: bool) -> bool:
    """False when the domain is not known."""
    return affected(await conn.execute(Q.pause_domain, domain, paused)) > 0


async def pace(conn: Conn, domain: str) -> asyncpg.Record | None:
    """(min_delay, max_delay, max_in_flight) of the domain."""
    return await conn.fetchrow(Q.domain_pace, domain)


async def set_pace(
    conn: Conn, domain: str, *, min_delay: float, max_delay: float, max_in_flight: int
) -> None:
    """Set the domain's pace and reset its back-off factor."""
    await conn.execute(Q.set_domain_pace, domain, min_delay, max_delay, max_in_flight)


async def reset(conn: Conn, domain: str) -> int | None:
    """Forget the domain's back-off and waits; the number of waiting retries made due now, or
    ``None`` when the domain is not known."""
    row = await conn.fetchrow(Q.reset_domain, domain)
    assert row is not None  # the aggregate query always returns its row
    return int(row["hurried"]) if row["found"] else None
