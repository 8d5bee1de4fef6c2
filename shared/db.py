"""The asyncpg pool: JSON codecs set once, so jsonb columns read and write Python objects."""

from __future__ import annotations

import asyncio
import json

import asyncpg


async def connect(dsn: str) -> asyncpg.Connection:
    """One connection set up like the pool's (JSON codecs), for scripts and benchmarks."""
    conn = await asyncpg.connect(dsn)
    await _init(conn)
    return conn


async def _init(conn: asyncpg.Connection) -> None:
    await conn.set_type_codec("jsonb", encoder=json.dumps, decoder=json.loads, schema="pg_catalog")


async def open_pool(
    dsn: str, *, min_size: int = 2, max_size: int = 10, attempts: int = 30
) -> asyncpg.Pool:
    """Open a pool, waiting for Postgres to come up (compose starts services in parallel)."""
    for attempt in range(1, attempts + 1):
        try:
            return await asyncpg.create_pool(
                dsn, min_size=min_size, max_size=max_size, init=_init, command_timeout=60
            )
        except (OSError, asyncpg.CannotConnectNowError):
            if attempt == attempts:
                raise
            await asyncio.sleep(1.0)
    raise AssertionError("unreachable")
