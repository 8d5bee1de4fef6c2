"""A crawl with every database connection through PgBouncer in transaction mode (a private
PgBouncer with fewer server connections than the services have clients): two schedulers share
leadership by lease, two refreshers stage through temporary tables on whatever server session
they get, and the catalog comes out equal to the shop's truth with nothing written twice."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import urlsplit

import pytest

from control.client import TrawlClient
from demo.shop import DemoShop
from shared.settings import Settings
from tests.faults.crawl import check_crawl, crawl, save_shop_source
from tests.support.pgbouncer import PgBouncer
from tests.support.stack import Stack

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(240)]


async def test_crawl_through_pgbouncer(env, pool, tmp_path: Path) -> None:
    async with (
        PgBouncer(pool_size=3) as bouncer,
        DemoShop(hosts=("127.0.0.2", "127.0.0.3"), port=0, products=80) as shop,
    ):
        await save_shop_source(pool, shop)
        database = urlsplit(env["DATABASE_URL"]).path.lstrip("/")
        env = {
            **env,
            "DATABASE_URL": bouncer.url(database),
            "TRAWL_DB_POOL_MODE": "transaction",
            "TRAWL_DB_POOL_SIZE": "4",
        }
        async with (
            Stack(env, tmp_path / "logs", scale="scheduler=2,refresher=2") as stack,
            TrawlClient(Settings.from_env(env)) as client,
        ):
            summary = await crawl(client, "shop", timeout=150)
            await check_crawl(client, pool, shop, summary, stack.logs())
