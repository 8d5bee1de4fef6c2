"""trawl's database access through a real PgBouncer in transaction mode (a private one, started
on a free port in front of the test database): prepared statements, and leadership leases.
The crawl through it is tests/e2e/test_pgbouncer_crawl.py."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from urllib.parse import urlsplit

import asyncpg
import pytest

from shared.db import open_pool
from shared.leases import Lease
from tests.support.pgbouncer import PgBouncer

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
async def bouncer() -> AsyncIterator[PgBouncer]:
    # Two server connections for up to sixteen clients: every transaction may land on another.
    async with PgBouncer(pool_size=2) as server:
        yield server


def _through(bouncer: PgBouncer, database_url: str) -> str:
    return bouncer.url(urlsplit(database_url).path.lstrip("/"))


async def _mixed_queries(pool: asyncpg.Pool, workers: int = 16, rounds: int = 60) -> list[str]:
    """Two statement shapes from many clients at once; the errors (or wrong answers) seen."""
    errors: list[str] = []

    async def worker(i: int) -> None:
        async with pool.acquire() as conn:
            for j in range(rounds):
                try:
                    if i % 2:
                        got = await conn.fetchval("SELECT $1::int + 1", j)
                        want: object = j + 1
                    else:
                        got = await conn.fetchval("SELECT $1::text || $2::text", "a", str(j))
                        want = f"a{j}"
                    if got != want:
                        errors.append(f"{got!r} != {want!r}")
                except asyncpg.PostgresError as exc:
                    errors.append(repr(exc))

    await asyncio.gather(*(worker(i) for i in range(workers)))
    return errors


async def test_statements_through_transaction_pooling(bouncer: PgBouncer, database_url) -> None:
    url = _through(bouncer, database_url)
    pooled = await open_pool(url, min_size=1, max_size=16, attempts=3, transaction_pooling=True)
    try:
        assert await _mixed_queries(pooled) == []
    finally:
        await pooled.close()

    # The same load with asyncpg's statement cache (a direct-connection pool) fails: the
    # setting is what makes the pooler work, not luck.
    direct = await open_pool(url, min_size=1, max_size=16, attempts=3)
    try:
        errors = await _mixed_queries(direct)
    finally:
        await direct.close()
    assert any("does not exist" in e for e in errors), errors[:3]


async def test_lease_through_transaction_pooling(bouncer: PgBouncer, database_url) -> None:
    """One holder at a time; a clean release hands over at once, a silent holder's lease
    expires and another takes it; the old holder then knows it lost."""
    url = _through(bouncer, database_url)
    pools = [
        await open_pool(url, min_size=1, max_size=2, attempts=3, transaction_pooling=True)
        for _ in range(2)
    ]
    try:
        a = Lease(pools[0], "scope", "a", ttl=1.5)
        b = Lease(pools[1], "scope", "b", ttl=1.5)
        assert await a.held()
        assert not await b.held()
        await a.release()
        assert await b.held()
        assert not await a.held()

        # b goes silent (no renewal): a takes over once b's lease has expired in the database.
        deadline = time.monotonic() + 10
        while not await a.held():
            assert time.monotonic() < deadline, "the expired lease was never taken over"
            await asyncio.sleep(0.1)
        # b's memory of its lease is at most ttl/3 old, then it asks and learns it lost.
        deadline = time.monotonic() + 10
        while await b.held():
            assert time.monotonic() < deadline, "b still believes it leads"
            await asyncio.sleep(0.1)
        assert await a.held()
    finally:
        for pool in pools:
            await pool.close()
