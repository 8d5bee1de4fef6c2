from __future__ import annotations

import asyncio
import uuid

import asyncpg

from migrations.runner import available, migrate
from tests.conftest import PG_ADMIN


async def _drop(name: str) -> None:
    conn = await asyncpg.connect(PG_ADMIN)
    try:
        await conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    finally:
        await conn.close()


async def test_migrate_creates_database_and_replays_all_migrations_once() -> None:
    name = f"trawl_mig_{uuid.uuid4().hex[:8]}"
    dsn = f"postgresql://root@127.0.0.1:5432/{name}"
    try:
        # Two concurrent runs on a database that does not exist yet: one applies, none fails.
        first, second = await asyncio.gather(migrate(dsn), migrate(dsn))
        versions = [m.version for m in available()]
        assert sorted(first + second) == versions
        assert await migrate(dsn) == []
        conn = await asyncpg.connect(dsn)
        try:
            recorded = [
                r["version"]
                for r in await conn.fetch("SELECT version FROM schema_migrations ORDER BY 1")
            ]
            tables = {
                r["tablename"]
                for r in await conn.fetch(
                    "SELECT tablename FROM pg_tables WHERE schemaname='public'"
                )
            }
            views = {
                r["viewname"]
                for r in await conn.fetch("SELECT viewname FROM pg_views WHERE schemaname='public'")
            }
        finally:
            await conn.close()
        assert recorded == versions
        assert {
            "sources",
            "jobs",
            "entries",
            "domains",
            "attempts",
            "schedules",
            "payloads",
            "products",
            "snapshots",
            "proxies",
        } <= tables
        # What other owners read of the frontier (0012): the scheduler's views.
        assert {
            "frontier_jobs",
            "frontier_job_pages",
            "frontier_payloads",
            "frontier_stored_copies",
        } <= views
        # What other owners read of the catalog (0014): the refresher's view.
        assert "catalog_product_urls" in views
    finally:
        await _drop(name)


async def test_one_running_job_per_source_is_enforced(pool) -> None:
    async with pool.acquire() as conn:
        await conn.execute("INSERT INTO sources (name, definition) VALUES ('s', '{}'::jsonb)")
        await conn.execute("INSERT INTO jobs (source, definition) VALUES ('s', '{}'::jsonb)")
        try:
            await conn.execute("INSERT INTO jobs (source, definition) VALUES ('s', '{}'::jsonb)")
        except asyncpg.UniqueViolationError:
            pass
        else:
            raise AssertionError("a second running job for one source was accepted")
