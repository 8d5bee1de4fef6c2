"""Dashboard: headless Chromium (Debian's ``chromium``) loads ``/``, asks for the token, and
the running job's progress bar moves; a screenshot is saved under test-artifacts/."""

from __future__ import annotations

import asyncio
import base64
import itertools
import json
import re
import shutil
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from control.client import TrawlClient
from demo.shop import DemoShop
from services.scheduler.catalog import save_source
from shared.sources import source_from_dict
from tests.conftest import ROOT
from tests.support.stack import Stack, eventually

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
pytestmark = [
    pytest.mark.e2e,
    pytest.mark.timeout(150),
    pytest.mark.skipif(CHROMIUM is None, reason="needs Debian's chromium package"),
]
TOKEN = "dashboard-token"
ARTIFACTS = ROOT / "test-artifacts"


class Browser:
    """Headless Chromium driven over the DevTools protocol (one page, no extra packages)."""

    def __init__(self, profile: Path) -> None:
        self.profile = profile
        self._ids = itertools.count(1)

    async def __aenter__(self) -> Browser:
        self.proc = await asyncio.create_subprocess_exec(
            str(CHROMIUM),
            "--headless=new",
            "--no-sandbox",  # tests may run as root in a container
            "--disable-gpu",
            "--no-first-run",
            "--window-size=1280,1400",
            f"--user-data-dir={self.profile}",
            "--remote-debugging-address=127.0.0.1",
            "--remote-debugging-port=0",
            "about:blank",
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.PIPE,
        )
        assert self.proc.stderr is not None
        port = None
        async with asyncio.timeout(30):
            while port is None:
                line = (await self.proc.stderr.readline()).decode()
                if not line:
                    raise RuntimeError("chromium exited before listening")
                if m := re.search(r"ws://127\.0\.0\.1:(\d+)/", line):
                    port = int(m[1])
        self._drain = asyncio.create_task(self._discard(self.proc.stderr))
        self.http = aiohttp.ClientSession()
        async with self.http.get(f"http://127.0.0.1:{port}/json/list") as resp:
            page = next(t for t in await resp.json() if t["type"] == "page")
        self.ws = await self.http.ws_connect(page["webSocketDebuggerUrl"], max_msg_size=0)
        return self

    @staticmethod
    async def _discard(stream: asyncio.StreamReader) -> None:
        while await stream.readline():
            pass

    async def __aexit__(self, *exc: object) -> None:
        await self.ws.close()
        await self.http.close()
        self.proc.terminate()
        await self.proc.wait()
        self._drain.cancel()

    async def send(self, method: str, **params: Any) -> dict[str, Any]:
        msg_id = next(self._ids)
        await self.ws.send_str(json.dumps({"id": msg_id, "method": method, "params": params}))
        async with asyncio.timeout(20):
            while True:
                data = json.loads((await self.ws.receive()).data)
                if data.get("id") == msg_id:
                    if "error" in data:
                        raise RuntimeError(f"{method}: {data['error']}")
                    return data["result"]

    async def eval(self, expression: str) -> Any:
        result = await self.send(
            "Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True
        )
        return result["result"].get("value")


async def test_dashboard_shows_the_running_job_moving(env, settings, pool, tmp_path: Path) -> None:
    env = {**env, "TRAWL_API_TOKEN": TOKEN}
    base = f"http://{env['TRAWL_API_LISTEN']}"
    async with DemoShop(hosts=("127.0.0.2", "127.0.0.3"), port=0, products=24) as shop:
        definition = shop.source_definition("demo-shop")
        # Slow enough to watch: one request per domain every ~0.3 s.
        definition["pacing"] = {"min_delay": 0.25, "max_delay": 0.35, "max_in_flight": 1}
        async with pool.acquire() as conn:
            await save_source(conn, source_from_dict(definition))
        async with (
            Stack(env, tmp_path / "logs") as stack,
            TrawlClient(settings) as client,
            Browser(tmp_path / "chromium") as browser,
        ):
            reply = await client.trigger("demo-shop")
            assert reply.job_id is not None, reply.error
            await browser.send("Page.enable")
            await browser.send("Page.navigate", url=f"{base}/?interval=300")

            async def asks_for_token() -> bool:
                return await browser.eval(
                    "!!document.querySelector('#login') && !document.querySelector('#login').hidden"
                )

            await eventually(asks_for_token, timeout=15, what="the token form")
            await browser.eval(
                f"document.querySelector('#token').value = {json.dumps(TOKEN)};"
                "document.querySelector('#login').requestSubmit(); true"
            )
            bar = f"document.querySelector('#job-{reply.job_id}')"
            first: dict[str, int] = {}

            async def bar_shown() -> bool:
                done = await browser.eval(f"{bar} ? Number({bar}.dataset.done) : -1")
                if done is None or done < 0:
                    return False
                first["done"] = done
                return True

            await eventually(bar_shown, timeout=20, what="the job's progress bar")

            async def bar_moved() -> bool:
                done = await browser.eval(f"{bar} ? Number({bar}.dataset.done) : -1")
                return done is not None and done > first["done"]

            await eventually(bar_moved, timeout=30, what="the progress bar to move")
            tables = await browser.eval(
                "[...document.querySelectorAll('table')].map(t => t.id + ':' + "
                "t.tBodies[0].rows.length).join(',')"
            )
            assert "workers:6" in tables, (tables, stack.logs())  # the five services and the API
            shot = await browser.send(
                "Page.captureScreenshot", format="png", captureBeyondViewport=True
            )
            ARTIFACTS.mkdir(exist_ok=True)
            (ARTIFACTS / "dashboard.png").write_bytes(base64.b64decode(shot["data"]))
    assert (ARTIFACTS / "dashboard.png").stat().st_size > 10_000
