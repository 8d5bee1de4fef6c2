"""Dashboard: headless Chromium (Debian's ``chromium``) loads ``/``, asks for the token, and
the running job's progress bar moves; a screenshot is saved under test-artifacts/."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from control.client import TrawlClient
from demo.shop import DemoShop
from services.scheduler.catalog import save_source
from shared.sources import source_from_dict
from tests.conftest import ROOT
from tests.support.browser import CHROMIUM, Browser
from tests.support.stack import Stack, eventually

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.timeout(150),
    pytest.mark.skipif(CHROMIUM is None, reason="needs Debian's chromium package"),
]
TOKEN = "dashboard-token"
ARTIFACTS = ROOT / "test-artifacts"


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
            tables: list[str] = []

            async def every_worker_listed() -> bool:
                # Each table is drawn as its answer comes; the workers' answer waits ~400 ms for
                # replies, so it may come after the progress bar moved.
                tables[:] = [
                    await browser.eval(
                        "[...document.querySelectorAll('table')].map(t => t.id + ':' + "
                        "t.tBodies[0].rows.length).join(',')"
                    )
                ]
                return "workers:6" in tables[0]  # the five services and the API

            try:
                await eventually(every_worker_listed, timeout=10, what="six workers listed")
            except AssertionError as exc:
                raise AssertionError((tables, stack.logs())) from exc
            await browser.screenshot(ARTIFACTS / "dashboard.png")
    assert (ARTIFACTS / "dashboard.png").stat().st_size > 10_000
