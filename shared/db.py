"""The asyncpg pool: JSON codecs set once, so jsonb columns read and write Python objects.

Behind PgBouncer in transaction mode (``TRAWL_DB_POOL_MODE=transaction``) a client's server
connection can change between any two transactions, so nothing may live in a session:

- no prepared-statement cache (``statement_cache_size=0``): a named statement prepared on one
  server connection does not exist on the next ("prepared statement "__asyncpg_stmt_1__" does
  not exist", tests/integration/test_pgbouncer.py). With the cache off, asyncpg describes a
  query without a Sync (the pooler keeps the server connection) and sends Parse again with
  Bind/Execute/Sync, so the unnamed statement it executes is always its own;
- leadership is a lease row, not a session advisory lock (``shared.leases``);
- the refresher's temporary staging tables are created in the transaction that first misses
  them, on whichever server session that is (``services/refresher/products.py``).

Migrations take a session advisory lock: run them over a direct connection (docs/deploy.md).

Since nothing lives in a session, a connection going back to the pool is not reset with
asyncpg's default query (``pg_advisory_unlock_all(); CLOSE ALL; UNLISTEN *; RESET ALL``, one
round trip per release: 3.5 statements of every 26 the scheduler ran per page). asyncpg still
rolls back a transaction left open, whatever ``reset`` is.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import asyncpg


async def connect(dsn: str) -> asyncpg.Connection:
    """One connection set up like the pool's (JSON codecs), for scripts and benchmarks."""
    conn = await asyncpg.connect(dsn)
    await _init(conn)
    return conn


async def _keep_session(conn: asyncpg.Connection) -> None:
    """The pool's reset: nothing to undo (see the module doc)."""


async def _init(conn: asyncpg.Connection) -> None:
    await conn.set_type_codec("jsonb", encoder=json.dumps, decoder=json.loads, schema="pg_catalog")


async def open_pool(
    dsn: str,
    *,
    min_size: int = 2,
    max_size: int = 10,
    attempts: int = 30,
    transaction_pooling: bool = False,
) -> asyncpg.Pool:
    """Open a pool, waiting for Postgres to come up (compose starts services in parallel).

    ``transaction_pooling``: ``dsn`` is a PgBouncer in transaction mode (see the module doc)."""
    pooled: dict[str, Any] = {"statement_cache_size": 0} if transaction_pooling else {}
    for attempt in range(1, attempts + 1):
        try:
            return await asyncpg.create_pool(
                dsn,
                min_size=min(min_size, max_size),
                max_size=max_size,
                init=_init,
                reset=_keep_session,
                command_timeout=60,
                **pooled,
            )
        except (OSError, asyncpg.CannotConnectNowError):
            if attempt == attempts:
                raise
            await asyncio.sleep(1.0)
    raise AssertionError("unreachable")
