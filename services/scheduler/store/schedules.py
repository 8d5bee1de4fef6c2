"""Schedules: the persisted specs, and claiming a due run (``FOR UPDATE SKIP LOCKED``)."""

from __future__ import annotations

from datetime import datetime

import asyncpg

from schemas.read import ScheduleOut
from services.scheduler.store.queries import Conn, Q, affected


async def add(conn: Conn, source: str, spec: str, kind: str, first_run: datetime) -> int:
    """Create a schedule (or re-enable the same one); returns its id."""
    schedule_id = await conn.fetchval(Q.add_schedule, source, spec, kind, first_run)
    assert schedule_id is not None
    return int(schedule_id)


async def list_all(conn: Conn) -> list[ScheduleOut]:
    return [ScheduleOut(**dict(r)) for r in await conn.fetch(Q.list_schedules)]


async def get(conn: Conn, schedule_id: int) -> ScheduleOut | None:
    row = await conn.fetchrow(Q.get_schedule, schedule_id)
    return None if row is None else ScheduleOut(**dict(row))


async def set_enabled(conn: Conn, schedule_id: int, enabled: bool) -> bool:
    """False when there is no such schedule."""
    return affected(await conn.execute(Q.set_schedule_enabled, schedule_id, enabled)) > 0


async def remove(conn: Conn, schedule_id: int) -> bool:
    return affected(await conn.execute(Q.remove_schedule, schedule_id)) > 0


async def due_now(conn: Conn, schedule_id: int) -> bool:
    """Make the schedule due now; False when there is no such schedule."""
    return affected(await conn.execute(Q.schedule_due_now, schedule_id)) > 0


async def claim_due(conn: Conn, now: datetime) -> asyncpg.Record | None:
    """One due schedule, locked until the transaction ends: (id, source, spec, kind,
    next_run_at)."""
    return await conn.fetchrow(Q.claim_due_schedule, now)


async def disable(conn: Conn, schedule_id: int, reason: str) -> None:
    await conn.execute(Q.disable_schedule, schedule_id, reason)


async def advance(
    conn: Conn, schedule_id: int, *, next_run: datetime, ran_at: datetime, skipped: str | None
) -> None:
    """Move a claimed schedule to its next run; ``skipped`` says why this run does not start."""
    await conn.execute(Q.advance_schedule, schedule_id, next_run, ran_at, skipped)


async def record_run(conn: Conn, schedule_id: int, job_id: int | None, error: str | None) -> None:
    await conn.execute(Q.record_schedule_run, schedule_id, job_id, error)
