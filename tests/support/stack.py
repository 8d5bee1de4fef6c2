"""Helpers for tests that run trawl's services as real processes."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

from control.client import TrawlClient
from control.supervisor import Supervisor, parse_scale
from shared.settings import Settings


async def eventually(
    check: Callable[[], Awaitable[bool]],
    *,
    timeout: float = 30.0,
    interval: float = 0.1,
    what: str = "condition",
) -> None:
    """Poll ``check`` until it is true or the deadline passes (never a blind sleep)."""
    deadline = time.monotonic() + timeout
    while True:
        if await check():
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        await asyncio.sleep(interval)


class Stack:
    """The four services as supervised processes, exactly as ``trawl up`` runs them (without
    a renderer unless ``scale`` asks for one: a browser per test stack costs more than it tests).
    """

    def __init__(self, env: dict[str, str], log_dir: Path, scale: str | None = None) -> None:
        if "renderer" not in (scale or ""):
            scale = ",".join(filter(None, [scale, "renderer=0"]))
        self.scale = parse_scale(scale)
        self.env = env
        self.sup = Supervisor(scale=self.scale, demo=False, log_dir=log_dir, env=env)
        self.log_dir = log_dir
        self._task: asyncio.Task[None] | None = None

    async def __aenter__(self) -> Stack:
        await self.sup.start()
        self._task = asyncio.create_task(self.sup.run())
        settings = Settings.from_env(self.env)
        async with TrawlClient(settings) as client:
            try:
                await client.wait_for_workers(self.scale, timeout=60)
            except TimeoutError as exc:
                await self.__aexit__(None, None, None)
                raise AssertionError(f"{exc}\n{self.logs()}") from exc
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.sup.stop()
        if self._task:
            await self._task

    def logs(self) -> str:
        return "\n".join(
            f"--- {p.name}\n{p.read_text()[-4000:]}" for p in sorted(self.log_dir.glob("*.log"))
        )
