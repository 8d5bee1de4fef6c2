"""Periodic tasks: a named function run every ``interval`` seconds until the service stops.

A *cluster-wide* task (stale recovery, job progress, lost events) must run on one replica at a
time, whatever the replica count: N schedulers must not publish N progress events per job. The
replicas elect a leader with a lease row in Postgres (``shared.leases``); only the leader runs
cluster-wide tasks. A leader that stops releases its lease; one that dies stops renewing it, and
another replica takes it over once it expires.

Errors of an outage (database or NATS restarting) are logged and the task tries again on its
next tick, so the service rides the outage out; any other error kills the task, and with it the
service (``shared.service.serve``), rather than limping on.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

import asyncpg
import nats.errors

from shared.leases import Lease

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


async def every(
    interval: float,
    tick: Tick,
    stop: asyncio.Event,
    *,
    name: str,
    leadership: Lease | None = None,
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
        with contextlib.suppress(*TRANSIENT):
            await leadership.release()


def named(coro: Coroutine[Any, Any, None], name: str) -> Coroutine[Any, Any, None]:
    """Give a coroutine the name its task and logs will carry."""
    coro.__qualname__ = name  # type: ignore[attr-defined]  # coroutine objects have it, typeshed's Coroutine does not
    return coro
