"""Payload metadata: what was stored, for which URL and job (bodies are in the payload
store)."""

from __future__ import annotations

from schemas.read import PayloadOut
from services.scheduler.store.queries import Conn, Q


async def list_all(
    conn: Conn,
    *,
    url: str | None = None,
    job_id: int | None = None,
    limit: int = 50,
    offset: int = 0,
) -> list[PayloadOut]:
    """Newest first, of one URL and/or one job when given."""
    rows = await conn.fetch(Q.list_payloads, url, job_id, limit, offset)
    return [PayloadOut(**dict(r)) for r in rows]


async def meta(conn: Conn, ref: str) -> PayloadOut | None:
    """The latest record of a payload reference."""
    row = await conn.fetchrow(Q.payload_meta, ref)
    return None if row is None else PayloadOut(**dict(row))


async def fetches(conn: Conn, ref: str) -> int:
    """How many fetches stored this body (content-addressed: several URLs even)."""
    return int(await conn.fetchval(Q.payload_fetches, ref) or 0)


async def latest(conn: Conn, url: str) -> PayloadOut | None:
    row = await conn.fetchrow(Q.latest_payload, url)
    return None if row is None else PayloadOut(**dict(row))


async def recent_refs(conn: Conn, url: str, limit: int = 2) -> list[str]:
    """The URL's most recent distinct bodies, newest first."""
    return [r["ref"] for r in await conn.fetch(Q.recent_refs, url, limit)]
