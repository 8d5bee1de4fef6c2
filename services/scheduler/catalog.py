"""Source definitions stored in Postgres (the scheduler owns them)."""

from __future__ import annotations

import asyncpg

from schemas.source import Source
from shared.sources import source_to_dict


async def save_source(conn: asyncpg.Connection, source: Source) -> bool:
    """Insert or replace a source; returns True when it is new. Running jobs keep their copy.

    A ``refresh.schedule`` becomes (or stays) a refresh schedule of the source.
    """
    from services.scheduler.schedules import add_schedule

    async with conn.transaction():
        created = await conn.fetchval(
            """INSERT INTO sources (name, definition) VALUES ($1, $2)
               ON CONFLICT (name) DO UPDATE SET definition = EXCLUDED.definition,
                   updated_at = now()
               RETURNING (xmax = 0)""",
            source.name,
            source_to_dict(source),
        )
        if source.refresh.schedule:
            await add_schedule(conn, source.name, source.refresh.schedule, "refresh")
    return created


async def list_sources(conn: asyncpg.Connection) -> list[asyncpg.Record]:
    return await conn.fetch("SELECT name, definition, updated_at FROM sources ORDER BY name")


async def delete_source(conn: asyncpg.Connection, name: str) -> bool:
    """Delete a source that has no jobs (history keeps a source alive). True if deleted."""
    async with conn.transaction():
        if await conn.fetchval("SELECT 1 FROM jobs WHERE source = $1 LIMIT 1", name):
            from services.scheduler.operations import Conflict

            raise Conflict(f"source {name!r} has jobs; it cannot be deleted")
        await conn.execute("DELETE FROM schedules WHERE source = $1", name)
        status = await conn.execute("DELETE FROM sources WHERE name = $1", name)
    return not status.endswith(" 0")
