"""Source definitions (the ``sources`` table)."""

from __future__ import annotations

from typing import Any

import asyncpg

from schemas.read import SourceOut
from services.scheduler.store.queries import Conn, Q, affected
from shared.sources import source_from_dict


def _out(row: asyncpg.Record, running: int | None = None) -> SourceOut:
    return SourceOut(
        name=row["name"],
        definition=source_from_dict(row["definition"]),
        updated_at=row["updated_at"],
        running_job=running,
    )


async def upsert(conn: Conn, name: str, definition: dict[str, Any]) -> bool:
    """Insert or replace a source's definition; True when it is new."""
    return bool(await conn.fetchval(Q.upsert_source, name, definition))


async def list_all(conn: Conn) -> list[SourceOut]:
    return [_out(r) for r in await conn.fetch(Q.list_sources)]


async def get(conn: Conn, name: str, *, with_running_job: bool = False) -> SourceOut | None:
    row = await conn.fetchrow(Q.get_source, name)
    if row is None:
        return None
    running = await conn.fetchval(Q.running_job_of_source, name) if with_running_job else None
    return _out(row, running)


async def definition(conn: Conn, name: str) -> dict[str, Any] | None:
    """The stored definition as written (a dict), or None for an unknown source."""
    row = await conn.fetchrow(Q.get_source, name)
    return None if row is None else row["definition"]


async def exists(conn: Conn, name: str) -> bool:
    return bool(await conn.fetchval(Q.source_exists, name))


async def has_jobs(conn: Conn, name: str) -> bool:
    return bool(await conn.fetchval(Q.source_has_jobs, name))


async def delete(conn: Conn, name: str) -> bool:
    """Delete the source and its schedules (call it in a transaction); True if it existed."""
    await conn.execute(Q.delete_source_schedules, name)
    return affected(await conn.execute(Q.delete_source, name)) > 0
