"""Pacing inside one fetcher: one run per attempt (redeliveries join), host slots, jitter."""

from __future__ import annotations

import asyncio
import time

import pytest

from services.fetcher.pacing import HostGuard, InFlight, jittered


async def test_a_redelivery_joins_the_running_attempt() -> None:
    inflight: InFlight[str] = InFlight()
    gate = asyncio.Event()
    calls = 0

    async def work() -> str:
        nonlocal calls
        calls += 1
        await gate.wait()
        return "done"

    first = asyncio.create_task(inflight.run("7.1", work))
    await asyncio.sleep(0)
    second = asyncio.create_task(inflight.run("7.1", work))
    await asyncio.sleep(0)
    assert "7.1" in inflight
    gate.set()
    assert await first == ("done", False)
    assert await second == ("done", True)
    assert calls == 1 and "7.1" not in inflight


async def test_a_failed_run_fails_its_joiners_and_is_forgotten() -> None:
    inflight: InFlight[str] = InFlight()

    async def boom() -> str:
        await asyncio.sleep(0)
        raise RuntimeError("x")

    with pytest.raises(RuntimeError):
        await inflight.run("1.1", boom)
    assert "1.1" not in inflight


async def test_host_guard_caps_concurrency() -> None:
    guard = HostGuard()
    running = peak = 0

    async def one() -> None:
        nonlocal running, peak
        async with guard.slot("shop:80", 2):
            running += 1
            peak = max(peak, running)
            await asyncio.sleep(0.01)
            running -= 1

    await asyncio.gather(*(one() for _ in range(6)))
    assert peak == 2


def test_jitter_only_pushes_later_and_stays_small() -> None:
    assert jittered(None) is None
    past = time.time() - 5
    assert jittered(past) == past
    soon = time.time() + 2
    for _ in range(50):
        value = jittered(soon)
        assert value is not None and soon <= value <= soon + 0.2 + 1e-6
