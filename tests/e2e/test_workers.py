"""Workers: with two fetcher processes running, the API lists both with their stats."""

from __future__ import annotations

from pathlib import Path

import aiohttp
import pytest

from tests.support.stack import Stack, eventually

pytestmark = [pytest.mark.e2e]

TOKEN = "workers-test-token"


async def test_api_lists_both_fetchers_with_stats(env, tmp_path: Path) -> None:
    env = {**env, "TRAWL_API_TOKEN": TOKEN}
    url = f"http://{env['TRAWL_API_LISTEN']}/api/workers"
    headers = {"Authorization": f"Bearer {TOKEN}"}
    async with (
        Stack(env, tmp_path / "logs", scale="fetcher=2") as stack,
        aiohttp.ClientSession(headers=headers) as http,
    ):
        workers: list[dict] = []

        async def listed() -> bool:
            nonlocal workers
            try:
                async with http.get(url) as resp:
                    if resp.status != 200:
                        return False
                    workers = await resp.json()
            except aiohttp.ClientConnectionError:
                return False  # the API is not listening yet
            return len([w for w in workers if w["service"] == "fetcher"]) == 2

        await eventually(listed, timeout=30, what="two fetchers in /api/workers")
        fetchers = [w for w in workers if w["service"] == "fetcher"]
        assert len({w["id"] for w in fetchers}) == 2, stack.logs()
        assert len({w["instance"] for w in fetchers}) == 2
        for w in fetchers:
            assert w["metadata"]["namespace"] == env["TRAWL_NAMESPACE"]
            assert "fetched" in w["stats"], w  # the fetcher's own counters
        # The admin API is its own process, and a live instance like the services.
        services = {w["service"] for w in workers}
        assert services == {"scheduler", "fetcher", "parser", "refresher", "notifier", "api"}
        scheduler = next(w for w in workers if w["service"] == "scheduler")
        assert "dispatched" in scheduler["stats"]

        async with http.get(url, params={"service": "parser"}) as resp:
            assert [w["service"] for w in await resp.json()] == ["parser"]
