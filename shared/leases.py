"""Leases: which replica leads a scope (a service's cluster-wide periodic tasks), as a row in
``leases`` with an expiry, and the only module that runs ``leases.sql``.

A row, not a session advisory lock: behind PgBouncer in transaction mode a session lock would be
taken on one server connection and released with the transaction. The cost is the takeover time
after a crash: another replica leads once the dead one's lease expires (``ttl``); a replica that
stops cleanly releases its lease, and the takeover is immediate.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from pathlib import Path

import asyncpg

from shared.sql import Queries

log = logging.getLogger("trawl.leases")

_Q = Queries(Path(__file__).with_name("leases.sql"))

# How long a lease lasts without renewal: the takeover time after a leader dies.
LEASE_TTL = 15.0


async def claim(pool: asyncpg.Pool, scope: str, holder: str, ttl: float) -> bool:
    """Take or renew the lease of ``scope`` for ``ttl`` seconds; False when another holds it."""
    async with pool.acquire() as conn:
        return await conn.fetchval(_Q["claim"], scope, holder, ttl) is not None


async def release(pool: asyncpg.Pool, scope: str, holder: str) -> None:
    async with pool.acquire() as conn:
        await conn.execute(_Q["release"], scope, holder)


class Lease:
    """This replica's claim on ``scope``. ``held()`` renews it a third of the way through its
    life, so two renewals can fail before it lapses; between renewals it answers from memory."""

    def __init__(
        self, pool: asyncpg.Pool, scope: str, instance: str, *, ttl: float = LEASE_TTL
    ) -> None:
        self.pool = pool
        self.scope = scope
        # Unique per Lease, not only per process: tests run several replicas in one process.
        self.holder = f"{instance}:{uuid.uuid4().hex[:8]}"
        self.ttl = ttl
        self._renewed_at: float | None = None  # monotonic time of the last successful claim
        self._guard = asyncio.Lock()

    async def held(self) -> bool:
        """True when this replica holds the lease now (taking it if it is free or expired)."""
        async with self._guard:
            now = time.monotonic()
            if self._renewed_at is not None and now - self._renewed_at < self.ttl / 3:
                return True
            was_held = self._renewed_at is not None
            self._renewed_at = None  # until the claim says otherwise (it may raise)
            if not await claim(self.pool, self.scope, self.holder, self.ttl):
                if was_held:
                    log.warning("lost %s", self.scope, extra={"action": "leader_lost"})
                return False
            self._renewed_at = now
            if not was_held:
                log.info("leading %s", self.scope, extra={"action": "leader_elected"})
            return True

    async def release(self) -> None:
        async with self._guard:
            self._renewed_at = None
            await release(self.pool, self.scope, self.holder)
