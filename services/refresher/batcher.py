"""Group single deliveries into batches: the consumer hands messages one by one, the database
wants them many at a time.

``submit`` parks the caller until its item's batch is committed (or failed), so the consumer
acks only after the commit and a failed batch naks every message in it. A batch goes when it
is full or ``max_wait`` after its first item; the next one collects while one is applied. A
failed batch is retried item by item, so only the message that broke it fails.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Sequence
from typing import Generic, TypeVar

T = TypeVar("T")
R = TypeVar("R")


class Batcher(Generic[T, R]):
    def __init__(
        self,
        apply: Callable[[Sequence[T]], Awaitable[R]],
        *,
        max_size: int = 500,
        max_wait: float = 0.005,
        name: str = "batcher",
    ) -> None:
        self.apply = apply
        self.max_size = max_size
        self.max_wait = max_wait
        self.name = name
        self._items: list[tuple[T, asyncio.Future[R]]] = []
        self._full = asyncio.Event()
        self._flusher: asyncio.Task[None] | None = None

    async def submit(self, item: T) -> R:
        """Returns what ``apply`` returned for the batch holding ``item``; raises what it raised."""
        fut: asyncio.Future[R] = asyncio.get_running_loop().create_future()
        self._items.append((item, fut))
        if len(self._items) >= self.max_size:
            self._full.set()
        if self._flusher is None or self._flusher.done():
            self._flusher = asyncio.create_task(self._flush_loop(), name=f"{self.name}-flush")
        return await fut

    async def _flush_loop(self) -> None:
        while self._items:
            if len(self._items) < self.max_size:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._full.wait(), self.max_wait)
            self._full.clear()
            batch, self._items = self._items[: self.max_size], self._items[self.max_size :]
            if len(self._items) >= self.max_size:
                self._full.set()
            await self._run(batch)

    async def _run(self, batch: list[tuple[T, asyncio.Future[R]]]) -> None:
        try:
            # Shielded: a cancelled service still commits (and acks) what it started.
            outcome = await asyncio.shield(self.apply([item for item, _ in batch]))
        except Exception as exc:
            if len(batch) > 1:
                # One bad message must not fail its neighbours: apply them one by one, so
                # only the culprit is retried (and dead-lettered in the end).
                for one in batch:
                    await self._run([one])
                return
            _, fut = batch[0]
            if not fut.done():
                fut.set_exception(exc)
            return
        for _, fut in batch:
            if not fut.done():
                fut.set_result(outcome)
