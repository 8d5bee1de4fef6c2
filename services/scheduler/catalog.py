"""Source definitions stored in Postgres (the scheduler owns them)."""

from __future__ import annotations

from schemas.read import SourceOut
from schemas.source import Source
from services.scheduler import store
from services.scheduler.operations import Conflict
from services.scheduler.schedules import add_schedule
from services.scheduler.store import Conn
from shared.sources import source_to_dict


async def save_source(conn: Conn, source: Source) -> bool:
    """Insert or replace a source; returns True when it is new. Running jobs keep their copy.

    A ``refresh.schedule`` becomes (or stays) a refresh schedule of the source.
    """
    async with conn.transaction():
        created = await store.sources.upsert(conn, source.name, source_to_dict(source))
        if source.refresh.schedule:
            await add_schedule(conn, source.name, source.refresh.schedule, "refresh")
    return created


async def list_sources(conn: Conn) -> list[SourceOut]:
    return await store.sources.list_all(conn)


async def get_source(conn: Conn, name: str, *, with_running_job: bool = True) -> SourceOut | None:
    """One source, with its running job (if any)."""
    return await store.sources.get(conn, name, with_running_job=with_running_job)


async def delete_source(conn: Conn, name: str) -> bool:
    """Delete a source that has no jobs (history keeps a source alive), and its schedules.
    True if deleted."""
    async with conn.transaction():
        if await store.sources.has_jobs(conn, name):
            raise Conflict(f"source {name!r} has jobs; it cannot be deleted")
        return await store.sources.delete(conn, name)
