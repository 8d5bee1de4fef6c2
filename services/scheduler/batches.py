"""Group commit: results handled concurrently are applied together, one transaction per group.

Each consumer handler submits its message and awaits its own outcome, so message fate (ack,
retry, dead letter) stays per message, in the consumer. One worker applies whatever has been
submitted meanwhile as one batch: while a batch is in Postgres the next one gathers, so the
batches grow with the load and a lone result goes at once (no timer). A batch that raises is
applied again one item at a time, each in its own call, so only the culprit fails.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from typing import Generic, TypeVar

T = TypeVar("T")
R = TypeVar("R")

ApplyFn = Callable[[list[T]], Awaitable[list[R]]]


class GroupCommit(Generic[T, R]):
    """``await submit(item)`` → ``apply``'s result for the item. At most ``max_batch`` items
    per call of ``apply``, which returns one result per item, in order."""

    def __init__(self, apply: ApplyFn[T, R], *, max_batch: int = 256) -> None:
        self.apply = apply
        self.max_batch = max_batch
        self._queue: list[tuple[T, asyncio.Future[R]]] = []
        self._worker: asyncio.Task[None] | None = None
        self.batches = 0  # calls of ``apply`` for a group (fallbacks not counted)

    @property
    def waiting(self) -> int:
        """Items submitted and not yet taken into a group."""
        return len(self._queue)

    async def submit(self, item: T) -> R:
        future: asyncio.Future[R] = asyncio.get_running_loop().create_future()
        self._queue.append((item, future))
        if self._worker is None or self._worker.done():
            self._worker = asyncio.create_task(self._work(), name="group-commit")
        return await future

    async def _work(self) -> None:
        while self._queue:
            group = self._queue[: self.max_batch]
            del self._queue[: self.max_batch]
            group = [(item, f) for item, f in group if not f.done()]  # cancelled submitters
            if not group:
                continue
            self.batches += 1
            try:
                await self._apply_group(group)
            finally:  # cancelled (the loop is closing): nobody is left waiting
                for _, future in group:
                    future.cancel()

    async def _apply_group(self, group: list[tuple[T, asyncio.Future[R]]]) -> None:
        try:
            results = await self.apply([item for item, _ in group])
        except Exception as exc:
            if len(group) == 1:
                with contextlib.suppress(asyncio.InvalidStateError):
                    group[0][1].set_exception(exc)
                return
            for item, future in group:
                await self._settle_one(item, future)
            return
        for (_, future), result in zip(group, results, strict=True):
            with contextlib.suppress(asyncio.InvalidStateError):
                future.set_result(result)

    async def _settle_one(self, item: T, future: asyncio.Future[R]) -> None:
        if future.done():
            return
        try:
            (result,) = await self.apply([item])
        except Exception as exc:
            with contextlib.suppress(asyncio.InvalidStateError):
                future.set_exception(exc)
            return
        with contextlib.suppress(asyncio.InvalidStateError):
            future.set_result(result)
