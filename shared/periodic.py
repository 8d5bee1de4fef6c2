"""Periodic tasks: a named function run every ``interval`` seconds until the service stops.

A *cluster-wide* task (stale recovery, job progress, lost events) must run on one replica at a
time, whatever the replica count: N schedulers must not publish N progress events per job. The
replicas elect a leader with a Postgres session advisory lock, held on a connection of its own;
only the leader runs cluster-wide tasks. A leader that dies or loses its connection releases the
lock with its session, and another replica takes it on its next tick.

Errors of an outage (database or NATS restarting) are logged and the task tries again on its
next tick, so the service rides the outage out; any other error kills the task, and with it the
service (``shared.service.serve``), rather than limping on.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

import asyncpg
import nats.errors

log = logging.getLogger("trawl.periodic")

# Errors of an outage: the task logs them and runs again on its next tick.
TRANSIENT: tuple[type[BaseException], ...] = (
    asyncpg.PostgresError,
    asyncpg.InterfaceError,
    OSError,
    nats.errors.Error,
    asyncio.TimeoutError,
)

Tick = Callable[[], Awaitable[object]]


def lock_key(scope: str) -> int:
    """A stable signed 64-bit advisory lock key for ``scope`` (namespace and service)."""
    digest = hashlib.blake2b(scope.encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big", signed=True)


class Leadership:
    """Whether this replica leads the cluster-wide tasks of its service (advisory lock)."""

    def __init__(self, pool: asyncpg.Pool, scope: str) -> None:
        self.pool = pool
        self.scope = scope
        self.key = lock_key(scope)
        self._conn: asyncpg.pool.PoolConnectionProxy | None = None
        self._guard = asyncio.Lock()

    async def held(self) -> bool:
        """True when this replica holds the lock now (taking it if it is free)."""
        async with self._guard:
            if self._conn is not None:
                try:
                    await self._conn.fetchval("SELECT 1")
                    return True
                except TRANSIENT:
                    await self._drop()  # the session, and with it the lock, is gone
            conn = await self.pool.acquire()
            try:
                won = await conn.fetchval("SELECT pg_try_advisory_lock($1)", self.key)
            except BaseException:
                await self.pool.release(conn)
                raise
            if not won:
                await self.pool.release(conn)
                return False
            self._conn = conn
            log.info("leading %s", self.scope, extra={"action": "leader_elected"})
            return True

    async def release(self) -> None:
        async with self._guard:
            if self._conn is not None:
                with contextlib.suppress(*TRANSIENT):
                    await self._conn.execute("SELECT pg_advisory_unlock($1)", self.key)
                await self._drop()

    async def _drop(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            with contextlib.suppress(Exception):
                await self.pool.release(conn)


async def every(
    interval: float,
    tick: Tick,
    stop: asyncio.Event,
    *,
    name: str,
    leadership: Leadership | None = None,
) -> None:
    """Run ``tick`` now and then every ``interval`` seconds until ``stop``; with ``leadership``
    only while this replica leads."""
    while not stop.is_set():
        try:
            if leadership is None or await leadership.held():
                await tick()
        except TRANSIENT as exc:
            log.warning(
                "%s failed: %s", name, exc, extra={"action": "periodic_error", "task": name}
            )
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(stop.wait(), interval)
    if leadership is not None:
        await leadership.release()


def named(coro: Coroutine[Any, Any, None], name: str) -> Coroutine[Any, Any, None]:
    """Give a coroutine the name its task and logs will carry."""
    coro.__qualname__ = name  # type: ignore[attr-defined]  # coroutine objects have it, typeshed's Coroutine does not
    return coro
