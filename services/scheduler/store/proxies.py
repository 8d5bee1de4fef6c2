"""The proxy registry and its health counts. Rows hold the URL with its credentials: the
scheduler's proxies module masks it before anyone sees it."""

from __future__ import annotations

import asyncpg

from services.scheduler.store.queries import Conn, Q


async def add(conn: Conn, url: str) -> asyncpg.Record:
    """Register a proxy (or re-activate the same URL); returns its row."""
    row = await conn.fetchrow(Q.add_proxy, url)
    assert row is not None
    return row


async def list_all(conn: Conn) -> list[asyncpg.Record]:
    return await conn.fetch(Q.list_proxies)


async def get(conn: Conn, proxy_id: int) -> asyncpg.Record | None:
    return await conn.fetchrow(Q.get_proxy, proxy_id)


async def remove(conn: Conn, proxy_id: int) -> bool:
    return bool(await conn.fetchval(Q.remove_proxy, proxy_id))


async def set_active(conn: Conn, proxy_id: int, active: bool) -> asyncpg.Record | None:
    """(De)activate a proxy; activating forgets its failure streak. None: no such proxy."""
    return await conn.fetchrow(Q.set_proxy_active, proxy_id, active)


async def succeeded(conn: Conn, proxy_id: int) -> None:
    await conn.execute(Q.proxy_succeeded, proxy_id)


async def failed(conn: Conn, proxy_id: int, error: str, max_consecutive: int) -> bool:
    """Count a failure; True when it deactivated the proxy (``max_consecutive`` in a row)."""
    return bool(await conn.fetchval(Q.proxy_failed, proxy_id, error, max_consecutive))


async def active(conn: Conn) -> list[tuple[int, str]]:
    """(id, url with credentials) of the active proxies, for the fetchers only."""
    return [(r["id"], r["url"]) for r in await conn.fetch(Q.active_proxies)]
