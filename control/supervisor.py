"""``trawl up``: the four services and the admin API (N replicas each) and optionally the demo
shop as supervised child processes. A crashed child is restarted with backoff; SIGINT/SIGTERM
stops all cleanly."""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import logging
import os
import shutil
import signal
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

log = logging.getLogger("trawl.supervisor")

SERVICES = ("scheduler", "fetcher", "parser", "refresher", "notifier")
# Every process ``trawl up`` runs, by name: the pipeline's services, the renderers (browsers
# for sources that render, a role of the fetcher) and the admin API.
MODULES = {
    **{s: f"services.{s}" for s in SERVICES},
    "renderer": "services.fetcher.render",
    "api": "control.api",
}
DEMO_HOSTS = ("127.0.0.2", "127.0.0.3")
DEMO_PORT = 8801
STOP_GRACE = 30.0


def parse_scale(spec: str | None) -> dict[str, int]:
    """``fetcher=3,parser=2`` → replicas per service (1 for the others; renderers: 1 where
    Chromium is installed, else 0)."""
    scale = dict.fromkeys(MODULES, 1)
    scale["renderer"] = 1 if chromium_installed() else 0
    for part in filter(None, (spec or "").split(",")):
        name, _, count = part.partition("=")
        name = name.strip()
        if name not in scale:
            raise ValueError(f"--scale: unknown service {name!r} (one of {', '.join(MODULES)})")
        if not count.strip().isdigit() or int(count) < 0:
            raise ValueError(f"--scale: {part!r} needs a whole number of replicas")
        scale[name] = int(count)
    return scale


def chromium_installed() -> bool:
    """Whether a renderer can run here: a Chromium and Playwright (the ``render`` extra)."""
    browser = os.environ.get("TRAWL_CHROMIUM") or shutil.which("chromium")
    return bool(browser) and importlib.util.find_spec("playwright") is not None


@dataclass
class Child:
    name: str
    argv: list[str]
    env: dict[str, str]
    log_path: Path | None
    proc: asyncio.subprocess.Process | None = None
    restarts: int = 0
    started_at: float = 0.0
    _log: BinaryIO | None = field(default=None, repr=False)

    async def start(self) -> None:
        out = None
        self.close_log()  # a restart: the previous run's handle is done
        if self.log_path is not None:
            self.log_path.parent.mkdir(parents=True, exist_ok=True)
            out = open(self.log_path, "ab")  # noqa: SIM115, ASYNC230 - lives with the child
            self._log = out
        self.proc = await asyncio.create_subprocess_exec(
            *self.argv,
            env=self.env,
            stdout=out,
            stderr=out,
            stdin=asyncio.subprocess.DEVNULL,
            start_new_session=True,  # Ctrl-C reaches the supervisor only; it stops children
        )
        self.started_at = time.monotonic()

    def close_log(self) -> None:
        if self._log is not None:
            self._log.close()
            self._log = None


class Supervisor:
    def __init__(
        self,
        *,
        scale: dict[str, int],
        demo: bool,
        log_dir: Path | None,
        env: dict[str, str] | None = None,
        demo_args: list[str] | None = None,
    ) -> None:
        self.env = dict(os.environ if env is None else env)
        self.log_dir = log_dir
        self.children: list[Child] = []
        self.stopping = asyncio.Event()
        py = sys.executable
        if demo:
            args = demo_args or ["--hosts", ",".join(DEMO_HOSTS), "--port", str(DEMO_PORT)]
            self.children.append(self._child("demo-shop", [py, "-m", "demo", *args]))
        for service, module in MODULES.items():
            for i in range(scale.get(service, 1)):
                child = self._child(f"{service}-{i}", [py, "-m", module])
                child.env["TRAWL_INSTANCE"] = f"{service}-{i}-{os.getpid()}"
                child.env.setdefault("OTEL_SERVICE_NAME", f"trawl-{service}")
                self.children.append(child)

    def _child(self, name: str, argv: list[str]) -> Child:
        log_path = self.log_dir / f"{name}.log" if self.log_dir else None
        return Child(name, argv, dict(self.env), log_path)

    async def start(self) -> None:
        for child in self.children:
            await child.start()

    async def run(self) -> None:
        """Watch the children until ``stop()``; restart any that exits."""
        watchers = [
            asyncio.create_task(self._watch(c), name=f"watch-{c.name}") for c in self.children
        ]
        await self.stopping.wait()
        await self._terminate()
        for w in watchers:
            w.cancel()
        await asyncio.gather(*watchers, return_exceptions=True)

    async def _watch(self, child: Child) -> None:
        while not self.stopping.is_set():
            assert child.proc is not None
            code = await child.proc.wait()
            if self.stopping.is_set():
                return
            uptime = time.monotonic() - child.started_at
            child.restarts = 0 if uptime > 60 else child.restarts + 1
            delay = min(30.0, 0.5 * 2**child.restarts)
            log.warning(
                "%s exited with %s; restarting in %.1fs",
                child.name,
                code,
                delay,
                extra={"action": "child_restart", "child": child.name, "code": code},
            )
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self.stopping.wait(), delay)
            if not self.stopping.is_set():
                await child.start()

    def stop(self) -> None:
        self.stopping.set()

    async def _terminate(self) -> None:
        live = [c for c in self.children if c.proc and c.proc.returncode is None]
        for child in live:
            with contextlib.suppress(ProcessLookupError):
                child.proc.send_signal(signal.SIGTERM)  # type: ignore[union-attr]
        waits = [asyncio.create_task(c.proc.wait()) for c in live]  # type: ignore[union-attr]
        if waits:
            _, pending = await asyncio.wait(waits, timeout=STOP_GRACE)
            if pending:
                for child in live:
                    with contextlib.suppress(ProcessLookupError):
                        child.proc.kill()  # type: ignore[union-attr]
                await asyncio.gather(*pending, return_exceptions=True)
        for child in self.children:
            child.close_log()
