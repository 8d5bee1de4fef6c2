"""Apply numbered SQL migrations: create the database if missing, then each pending file in
order, in its own transaction, under an advisory lock so concurrent runs are safe."""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from importlib import resources
from urllib.parse import urlsplit, urlunsplit

import asyncpg

log = logging.getLogger("trawl.migrate")

_FILE_RE = re.compile(r"^(\d{4})_([a-z0-9_]+)\.sql$")
_LOCK_KEY = 0x7472_6177  # "traw": one advisory lock for all migration runs


@dataclass(frozen=True)
class Migration:
    version: int
    name: str
    sql: str


def available() -> list[Migration]:
    found = []
    for item in resources.files("migrations").iterdir():
        m = _FILE_RE.match(item.name)
        if m:
            found.append(Migration(int(m[1]), m[2], item.read_text(encoding="utf-8")))
    found.sort(key=lambda mig: mig.version)
    versions = [mig.version for mig in found]
    if len(set(versions)) != len(versions):
        raise RuntimeError(f"duplicate migration numbers: {versions}")
    return found


async def ensure_database(dsn: str) -> bool:
    """Create the database named in ``dsn`` when it does not exist. Returns True if created."""
    parts = urlsplit(dsn)
    dbname = parts.path.lstrip("/") or "postgres"
    try:
        conn = await asyncpg.connect(dsn)
    except asyncpg.InvalidCatalogNameError:
        pass
    else:
        await conn.close()
        return False
    admin = urlunsplit(parts._replace(path="/postgres"))
    conn = await asyncpg.connect(admin)
    try:
        await conn.execute(f'CREATE DATABASE "{dbname}"')
    except (asyncpg.DuplicateDatabaseError, asyncpg.UniqueViolationError):
        return False  # a concurrent run created it
    finally:
        await conn.close()
    log.info("database created", extra={"action": "db_created", "database": dbname})
    return True


async def migrate(dsn: str) -> list[int]:
    """Apply pending migrations; returns the versions applied by this call."""
    await ensure_database(dsn)
    conn = await asyncpg.connect(dsn)
    applied_now: list[int] = []
    try:
        await conn.execute("SELECT pg_advisory_lock($1)", _LOCK_KEY)
        try:
            await conn.execute(
                """CREATE TABLE IF NOT EXISTS schema_migrations (
                       version int PRIMARY KEY,
                       name text NOT NULL,
                       applied_at timestamptz NOT NULL DEFAULT now())"""
            )
            done = {r["version"] for r in await conn.fetch("SELECT version FROM schema_migrations")}
            for mig in available():
                if mig.version in done:
                    continue
                async with conn.transaction():
                    await conn.execute(mig.sql)
                    await conn.execute(
                        "INSERT INTO schema_migrations (version, name) VALUES ($1, $2)",
                        mig.version,
                        mig.name,
                    )
                applied_now.append(mig.version)
                log.info(
                    "migration applied",
                    extra={"action": "migration_applied", "version": mig.version, "name": mig.name},
                )
        finally:
            await conn.execute("SELECT pg_advisory_unlock($1)", _LOCK_KEY)
    finally:
        await conn.close()
    return applied_now
