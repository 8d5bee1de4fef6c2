"""Pacing of the actual requests in one fetcher: ``not_before`` with jitter, a per-host guard,
and one run per attempt.

The scheduler releases work per domain at the domain's pace; this is the second line that makes
one process never exceed a host's ``max_in_flight``, even across redeliveries: a redelivered
attempt that is still running here joins the running fetch instead of taking another slot.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Generic, TypeVar

T = TypeVar("T")

JITTER_SHARE = 0.1  # of the wait the scheduler asked for
JITTER_MAX = 1.0  # seconds


class HostGuard:
    def __init__(self) -> None:
        self._slots: dict[str, asyncio.Semaphore] = {}
        self._limits: dict[str, int] = {}

    @asynccontextmanager
    async def slot(self, host: str, limit: int) -> AsyncIterator[None]:
        sem = self._slots.get(host)
        if sem is None or self._limits.get(host) != limit:
            # A changed limit takes effect for new requests; in-flight ones finish on the old.
            sem = self._slots[host] = asyncio.Semaphore(max(1, limit))
            self._limits[host] = limit
        async with sem:
            yield


class InFlight(Generic[T]):
    """At most one run per key; later callers with the same key await its result.

    The first caller runs the work inline (no extra task on the hot path); joiners wait on a
    future it resolves.
    """

    def __init__(self) -> None:
        self._running: dict[str, asyncio.Future[T]] = {}

    def __contains__(self, key: str) -> bool:
        return key in self._running

    async def run(self, key: str, factory: Callable[[], Awaitable[T]]) -> tuple[T, bool]:
        """(the result, whether this call joined a run that was already going)."""
        running = self._running.get(key)
        if running is not None:
            return await asyncio.shield(running), True
        future: asyncio.Future[T] = asyncio.get_running_loop().create_future()
        self._running[key] = future
        try:
            result = await factory()
        except BaseException as exc:
            if isinstance(exc, asyncio.CancelledError):
                future.cancel()
            else:
                future.set_exception(exc)
                future.exception()  # joiners may not exist: mark it retrieved
            raise
        else:
            future.set_result(result)
            return result, False
        finally:
            self._running.pop(key, None)


def jittered(epoch: float | None) -> float | None:
    """``epoch`` pushed by a random share of the wait, so released work does not go in step."""
    if epoch is None:
        return None
    wait = epoch - time.time()
    if wait <= 0:
        return epoch
    return epoch + random.uniform(0, min(JITTER_MAX, wait * JITTER_SHARE))


async def wait_until(epoch: float | None, stop: asyncio.Event) -> None:
    """Sleep until ``epoch`` (wall clock), returning early when the service stops."""
    if epoch is None:
        return
    delay = epoch - time.time()
    if delay > 0:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), delay)
