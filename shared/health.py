"""A worker's health endpoint for an orchestrator's probes (``TRAWL_HEALTH_LISTEN``):

- ``GET /livez``: the event loop runs. A heartbeat task ticks every second; if the loop has been
  stalled for ``STALL`` seconds (or cannot answer at all) the probe fails and the orchestrator
  restarts the process. Draining is alive: a pod is not killed in the middle of its drain.
- ``GET /readyz``: connected and consuming. The NATS connection is up, the service's tasks
  (its consumers' pull loops, its periodic tasks) have started and none has ended, and it is not
  draining.

Both answer JSON with the reasons, 200 or 503. Kept apart from ``/metrics`` so that a probe
never waits on a scrape's JetStream requests.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable, Sequence

from aiohttp import web
from nats.aio.client import Client

Handler = Callable[[web.Request], Awaitable[web.Response]]

# Seconds without a heartbeat after which the loop counts as stalled.
STALL = 10.0


class Health:
    def __init__(self, stop: asyncio.Event) -> None:
        self.nc: Client | None = None
        self.stop = stop
        self.tasks: Sequence[asyncio.Task[None]] = ()
        self.beat = time.monotonic()
        self._runner: web.AppRunner | None = None
        self._heart: asyncio.Task[None] | None = None

    def started(self, nc: Client, tasks: Sequence[asyncio.Task[None]]) -> None:
        """The service's tasks run: readiness now follows them and the connection."""
        self.nc = nc
        self.tasks = tasks

    def live(self) -> tuple[bool, dict[str, object]]:
        lag = time.monotonic() - self.beat
        return lag < STALL, {"loop_lag_s": round(lag, 3)}

    def ready(self) -> tuple[bool, dict[str, object]]:
        ended = [t.get_name() for t in self.tasks if t.done()]
        connected = self.nc is not None and self.nc.is_connected
        checks: dict[str, object] = {
            "nats_connected": connected,
            "started": bool(self.tasks),
            "tasks_ended": ended,
            "draining": self.stop.is_set(),
        }
        return connected and bool(self.tasks) and not ended and not self.stop.is_set(), checks

    async def start(self, listen: str) -> str:
        """Serve on ``host:port`` (port 0 picks one); returns the base URL. A taken address
        stops the service: without its probes an orchestrator would restart it anyway."""
        app = web.Application()
        app.router.add_get("/livez", self._answer(self.live))
        app.router.add_get("/readyz", self._answer(self.ready))
        self._runner = web.AppRunner(app, access_log=None, handle_signals=False)
        await self._runner.setup()
        host, _, port = listen.rpartition(":")
        await web.TCPSite(self._runner, host.strip("[]") or "127.0.0.1", int(port)).start()
        self._heart = asyncio.create_task(self._beat(), name="health:heartbeat")
        bound_host, bound_port = self._runner.addresses[0][:2]
        shown = f"[{bound_host}]" if ":" in bound_host else bound_host
        return f"http://{shown}:{bound_port}"

    async def close(self) -> None:
        if self._heart is not None:
            self._heart.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._heart
        if self._runner is not None:
            await self._runner.cleanup()

    async def _beat(self) -> None:
        while True:
            self.beat = time.monotonic()
            await asyncio.sleep(1.0)

    @staticmethod
    def _answer(check: Callable[[], tuple[bool, dict[str, object]]]) -> Handler:
        async def handler(_request: web.Request) -> web.Response:
            ok, detail = check()
            return web.json_response(
                {"status": "ok" if ok else "failing", **detail}, status=200 if ok else 503
            )

        return handler
