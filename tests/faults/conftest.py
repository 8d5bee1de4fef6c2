"""Fault tests run against private servers when they stop them: a private ``nats-server -js``
and a private PostgreSQL cluster, each on a free loopback port."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import asyncpg
import pytest

from tests.conftest import ROOT, free_port
from tests.support.private_servers import PrivateNats, PrivatePostgres


@pytest.fixture
async def private_nats(tmp_path: Path) -> AsyncIterator[PrivateNats]:
    server = PrivateNats(tmp_path / "nats")
    await server.start()
    yield server
    await server.kill()


@pytest.fixture
async def private_pg() -> AsyncIterator[PrivatePostgres]:
    server = PrivatePostgres()
    await server.start()
    yield server
    await server.destroy()


@pytest.fixture
async def private_env(private_nats: PrivateNats, private_pg: PrivatePostgres) -> dict[str, str]:
    """A service environment pointing at the private servers (migrated database)."""
    import os

    from migrations.runner import migrate

    database_url = private_pg.url(f"trawl_{uuid.uuid4().hex[:8]}")
    await migrate(database_url)
    env = dict(os.environ)
    env.update(
        {
            "NATS_URL": private_nats.url,
            "DATABASE_URL": database_url,
            "TRAWL_NAMESPACE": f"f{uuid.uuid4().hex[:12]}",
            "TRAWL_API_LISTEN": f"127.0.0.1:{free_port()}",
            "TRAWL_LOG_LEVEL": "INFO",
            "PYTHONPATH": str(ROOT),
        }
    )
    return env


@pytest.fixture
async def private_pool(private_env: dict[str, str]) -> AsyncIterator[asyncpg.Pool]:
    from shared.db import open_pool

    pool = await open_pool(private_env["DATABASE_URL"], min_size=1, max_size=4, attempts=3)
    yield pool
    await pool.close()
