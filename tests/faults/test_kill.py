"""SIGKILL every service at random moments of a crawl, several rounds: the Supervisor restarts
them, and the crawl ends exactly as an undisturbed one would."""

from __future__ import annotations

import os
import random
import signal
from pathlib import Path

import pytest

from control.client import TrawlClient
from control.supervisor import SERVICES
from demo.faults import Faults
from demo.shop import DemoShop
from shared.settings import Settings
from tests.faults.crawl import FAULT_ENV, check_crawl, crawl, save_shop_source
from tests.support.stack import Stack, eventually

pytestmark = [pytest.mark.faults, pytest.mark.timeout(360)]

# ≈ 2,070 pages. Images are off: they would double the requests and are tested on their own.
PRODUCTS = int(os.environ.get("TRAWL_KILL_PRODUCTS", "1800"))
ROUNDS = 2


async def test_services_killed_at_random_moments(env, pool, tmp_path: Path) -> None:
    env = {**env, **FAULT_ENV}
    seed = random.randrange(1 << 30)
    rng = random.Random(seed)
    # Latency stretches the crawl to ~90 s, so the kills land in the middle of the work.
    shop = DemoShop(
        hosts=("127.0.0.2", "127.0.0.3"), port=0, products=PRODUCTS, faults=Faults(latency=0.1)
    )
    killed: list[tuple[str, int, int]] = []
    async with shop:
        await save_shop_source(pool, shop, max_in_flight=2, images=False)
        pages = PRODUCTS * 1.1  # a lower bound of the pages: the kills land before the end
        plan = sorted(
            (
                (rng.uniform(0.05, 0.85) * pages, service)
                for _ in range(ROUNDS)
                for service in SERVICES
            ),
        )

        async with (
            Stack(env, tmp_path / "logs", scale="fetcher=2,parser=2") as stack,
            TrawlClient(Settings.from_env(env)) as client,
        ):

            async def kill_during(job_id: int) -> None:
                for at, service in plan:

                    async def reached(at: float = at) -> bool:
                        return len(shop.request_log) >= at

                    await eventually(reached, timeout=180, what=f"{at:.0f} requests (seed {seed})")
                    live = [
                        c
                        for c in stack.sup.children
                        if c.name.startswith(f"{service}-") and c.proc and c.proc.returncode is None
                    ]
                    if not live:
                        continue  # still in its restart back-off from an earlier kill
                    child = rng.choice(live)
                    assert child.proc is not None
                    os.kill(child.proc.pid, signal.SIGKILL)
                    killed.append((child.name, child.proc.pid, len(shop.request_log)))

            summary = await crawl(client, "shop", kill_during, timeout=300)
            logs = f"seed {seed}, killed {killed}\n{stack.logs()}"
            print(f"seed {seed}; killed (replica, pid, requests so far): {killed}")
            await check_crawl(client, pool, shop, summary, logs)

            async def all_back() -> bool:
                return all(c.proc and c.proc.returncode is None for c in stack.sup.children)

            # Every killed replica came back as a new process (the Supervisor restarted it).
            await eventually(all_back, timeout=60, what="every replica to be restarted")
            current = {c.proc.pid for c in stack.sup.children if c.proc}
            assert not current & {pid for _, pid, _ in killed}
    assert {name.split("-")[0] for name, _, _ in killed} == set(SERVICES), (seed, killed)
