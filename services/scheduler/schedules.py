"""Schedules: persisted specs that start jobs, claimed with ``FOR UPDATE SKIP LOCKED`` so any
number of scheduler replicas create each run exactly once.

A due schedule is claimed and advanced to its next run in one short transaction; the run itself
is a trigger whose id is ``schedule-<id>-<run time>``, so even a replayed claim cannot start it
twice. A run is skipped (and ``last_error`` says why) while the source's previous job runs.
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime

import asyncpg

from schemas.messages import Trigger
from schemas.read import ScheduleOut
from services.scheduler import store
from services.scheduler.operations import NotFound
from services.scheduler.store import Conn
from shared.schedule_spec import parse_schedule

log = logging.getLogger("trawl.scheduler.schedules")

KINDS = ("discovery", "refresh")


async def add_schedule(conn: Conn, source: str, spec: str, kind: str = "refresh") -> int:
    """Create (or re-enable) a schedule. ``ValueError`` for a bad spec or kind."""
    parsed = parse_schedule(spec)
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {', '.join(KINDS)}")
    if not await store.sources.exists(conn, source):
        raise NotFound(f"source {source!r} not found")
    first = parsed.next_after(datetime.now(UTC))
    return await store.schedules.add(conn, source, parsed.text, kind, first)


async def list_schedules(conn: Conn) -> list[ScheduleOut]:
    return await store.schedules.list_all(conn)


async def get_schedule(conn: Conn, schedule_id: int) -> ScheduleOut:
    found = await store.schedules.get(conn, schedule_id)
    if found is None:
        raise NotFound(f"schedule {schedule_id} not found")
    return found


async def set_schedule_enabled(conn: Conn, schedule_id: int, enabled: bool) -> None:
    if not await store.schedules.set_enabled(conn, schedule_id, enabled):
        raise NotFound(f"schedule {schedule_id} not found")


async def remove_schedule(conn: Conn, schedule_id: int) -> None:
    if not await store.schedules.remove(conn, schedule_id):
        raise NotFound(f"schedule {schedule_id} not found")


async def trigger_schedule_now(conn: Conn, schedule_id: int) -> int | None:
    """Make the schedule due now; a scheduler starts the run within about a second.

    Returns None: the job id is known once a scheduler has claimed the run (see last_job_id).
    """
    if not await store.schedules.due_now(conn, schedule_id):
        raise NotFound(f"schedule {schedule_id} not found")
    return None


async def claim_due(conn: Conn, now: datetime) -> tuple[asyncpg.Record, Trigger] | None:
    """Claim one due schedule and advance it; returns the run's trigger, or None.

    The caller starts the job from the trigger (outside this transaction).
    """
    async with conn.transaction():
        row = await store.schedules.claim_due(conn, now)
        if row is None:
            return None
        try:
            spec = parse_schedule(row["spec"])
        except ValueError as exc:
            await store.schedules.disable(conn, row["id"], f"disabled: {exc}")
            return None
        # Runs missed while no scheduler was up collapse into this one run.
        following = spec.next_after(max(now, row["next_run_at"]))
        running = await store.jobs.running_of_source(conn, row["source"])
        skipped = None if running is None else f"skipped: job {running} of the source still runs"
        await store.schedules.advance(
            conn, row["id"], next_run=following, ran_at=now, skipped=skipped
        )
        if running is not None:
            log.info(
                "schedule run skipped",
                extra={"action": "schedule_skipped", "schedule_id": row["id"], "job_id": running},
            )
            return None
    run_key = int(row["next_run_at"].timestamp())
    trigger = Trigger(
        id=f"schedule-{row['id']}-{run_key}",
        source=row["source"],
        kind=row["kind"],
        requested_by=f"schedule:{row['id']}",
    )
    return row, trigger


async def record_run(conn: Conn, schedule_id: int, job_id: int | None, error: str | None) -> None:
    await store.schedules.record_run(conn, schedule_id, job_id, error)
