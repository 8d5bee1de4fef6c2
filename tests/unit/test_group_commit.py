"""The scheduler's group commit (services/scheduler/batches.py): results handled concurrently
are applied together, and a failing group is applied again one item at a time."""

from __future__ import annotations

import asyncio

import pytest

from services.scheduler.batches import GroupCommit
from tests.support.stack import eventually


class Culprit(Exception):
    pass


class Recorder:
    """An ``apply`` that records each call's items and fails any call holding ``bad``."""

    def __init__(self, bad: int | None = None) -> None:
        self.calls: list[list[int]] = []
        self.bad = bad
        self.gate = asyncio.Event()

    async def apply(self, items: list[int]) -> list[int]:
        self.calls.append(list(items))
        await self.gate.wait()  # held until the test has submitted everything
        if self.bad in items:
            raise Culprit(f"item {self.bad}")
        return [i * 10 for i in items]


async def test_items_submitted_while_a_group_is_applied_form_the_next_group() -> None:
    rec = Recorder()
    group = GroupCommit(rec.apply)
    first = asyncio.ensure_future(group.submit(1))

    async def taken() -> bool:  # the worker has taken item 1 alone
        return bool(rec.calls)

    async def queued() -> bool:
        return group.waiting == 3

    await eventually(taken, timeout=5, interval=0.001, what="the first group")
    rest = [asyncio.ensure_future(group.submit(i)) for i in (2, 3, 4)]
    await eventually(queued, timeout=5, interval=0.001, what="three items queued")
    rec.gate.set()
    assert await first == 10
    assert await asyncio.gather(*rest) == [20, 30, 40]
    assert rec.calls == [[1], [2, 3, 4]]


async def test_a_failing_group_is_applied_one_by_one_and_only_the_culprit_fails() -> None:
    rec = Recorder(bad=3)
    group = GroupCommit(rec.apply)
    rec.gate.set()
    futures = [asyncio.ensure_future(group.submit(i)) for i in (2, 3, 4)]
    outcomes = await asyncio.gather(*futures, return_exceptions=True)
    assert outcomes[0] == 20 and outcomes[2] == 40
    assert isinstance(outcomes[1], Culprit)
    assert rec.calls == [[2, 3, 4], [2], [3], [4]]


async def test_a_group_of_one_fails_without_being_applied_again() -> None:
    rec = Recorder(bad=7)
    group = GroupCommit(rec.apply)
    rec.gate.set()
    with pytest.raises(Culprit):
        await group.submit(7)
    assert rec.calls == [[7]]
