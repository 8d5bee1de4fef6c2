"""Restart NATS, then PostgreSQL, in the middle of a crawl (private servers): the services ride
out the outage on their own — no process restarts — and the crawl completes intact."""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Awaitable, Callable
from pathlib import Path

import asyncpg
import pytest

from control.client import TrawlClient
from demo.faults import Faults
from demo.shop import DemoShop
from shared.settings import Settings
from tests.faults.crawl import FAULT_ENV, check_crawl, save_shop_source
from tests.support.private_servers import PrivateNats, PrivatePostgres
from tests.support.stack import Stack, eventually

pytestmark = [pytest.mark.faults, pytest.mark.timeout(300)]

PRODUCTS = 300
OUTAGE = 4.0  # seconds the server stays down: several reconnect attempts of every client


async def _crawl_through(
    env: dict[str, str],
    pool: asyncpg.Pool,
    tmp_path: Path,
    outage: Callable[[], Awaitable[None]],
) -> None:
    env = {**env, **FAULT_ENV}
    shop = DemoShop(
        hosts=("127.0.0.2", "127.0.0.3"), port=0, products=PRODUCTS, faults=Faults(latency=0.1)
    )
    async with shop:
        await save_shop_source(pool, shop, max_in_flight=2)
        async with Stack(env, tmp_path / "logs", scale="fetcher=2") as stack:
            pids = {c.name: c.proc.pid for c in stack.sup.children if c.proc}

            async def fault() -> None:
                async def a_third() -> bool:
                    return len(shop.request_log) >= PRODUCTS // 3

                await eventually(a_third, timeout=60, what="a third of the crawl")
                await outage()

            # The client reconnects too (bounded attempts: 3 × 0.5 s), so it connects after.
            async with TrawlClient(Settings.from_env(env)) as client:
                reply = await client.trigger("shop", timeout=30)
                assert reply.error is None, reply.error
                assert reply.job_id is not None
            await fault()
            async with TrawlClient(Settings.from_env(env)) as client:
                summary = await client.wait(reply.job_id, timeout=180, refreshed_timeout=120)
                await check_crawl(client, pool, shop, summary, stack.logs())
            # Nobody needed the Supervisor: every service reconnected by itself.
            after = {c.name: c.proc.pid for c in stack.sup.children if c.proc}
            assert after == pids, stack.logs()
            assert not any(c.restarts for c in stack.sup.children)


async def test_nats_restart_mid_crawl(
    private_env, private_nats: PrivateNats, private_pool, tmp_path: Path
) -> None:
    async def restart_nats() -> None:
        await private_nats.stop(signal.SIGKILL)
        await asyncio.sleep(OUTAGE)  # the outage itself, not a synchronisation
        await private_nats.start()

    await _crawl_through(private_env, private_pool, tmp_path, restart_nats)


async def test_postgres_restart_mid_crawl(
    private_env, private_pg: PrivatePostgres, private_pool, tmp_path: Path
) -> None:
    async def restart_postgres() -> None:
        await private_pg.stop("immediate")  # a crash: clients are cut off, recovery at start
        await asyncio.sleep(OUTAGE)
        await private_pg.start()

    await _crawl_through(private_env, private_pool, tmp_path, restart_postgres)
