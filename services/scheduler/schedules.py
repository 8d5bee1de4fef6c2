"""Schedules: persisted specs that start jobs, claimed with ``FOR UPDATE SKIP LOCKED`` so any
number of scheduler replicas create each run exactly once.

A due schedule is claimed and advanced to its next run in one short transaction; the run itself
is a trigger whose id is ``schedule-<id>-<run time>``, so even a replayed claim cannot start it
twice. A run is skipped (and ``last_error`` says why) while the source's previous job runs.
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from typing import Any

import asyncpg

from schemas.messages import Trigger
from services.scheduler.operations import NotFound
from shared.schedule_spec import parse_schedule

log = logging.getLogger("trawl.scheduler.schedules")

KINDS = ("discovery", "refresh")

_FIELDS = (
    "id, source, spec, kind, enabled, next_run_at, last_run_at, last_job_id, last_error, created_at"
)


def _row(r: asyncpg.Record) -> dict[str, Any]:
    out = dict(r)
    for key in ("next_run_at", "last_run_at", "created_at"):
        if out.get(key) is not None:
            out[key] = out[key].isoformat()
    return out


async def add_schedule(
    conn: asyncpg.Connection, source: str, spec: str, kind: str = "refresh"
) -> int:
    """Create (or re-enable) a schedule. ``ValueError`` for a bad spec or kind."""
    parsed = parse_schedule(spec)
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {', '.join(KINDS)}")
    if not await conn.fetchval("SELECT 1 FROM sources WHERE name = $1", source):
        raise NotFound(f"source {source!r} not found")
    first = parsed.next_after(datetime.now(UTC))
    return await conn.fetchval(
        """INSERT INTO schedules (source, spec, kind, next_run_at) VALUES ($1, $2, $3, $4)
           ON CONFLICT (source, spec, kind) DO UPDATE SET enabled = true
           RETURNING id""",
        source,
        parsed.text,
        kind,
        first,
    )


async def list_schedules(conn: asyncpg.Connection) -> list[dict[str, Any]]:
    rows = await conn.fetch(f"SELECT {_FIELDS} FROM schedules ORDER BY id")
    return [_row(r) for r in rows]


async def get_schedule(conn: asyncpg.Connection, schedule_id: int) -> dict[str, Any]:
    row = await conn.fetchrow(f"SELECT {_FIELDS} FROM schedules WHERE id = $1", schedule_id)
    if row is None:
        raise NotFound(f"schedule {schedule_id} not found")
    return _row(row)


async def set_schedule_enabled(conn: asyncpg.Connection, schedule_id: int, enabled: bool) -> None:
    status = await conn.execute(
        "UPDATE schedules SET enabled = $2 WHERE id = $1", schedule_id, enabled
    )
    if status.endswith(" 0"):
        raise NotFound(f"schedule {schedule_id} not found")


async def remove_schedule(conn: asyncpg.Connection, schedule_id: int) -> None:
    status = await conn.execute("DELETE FROM schedules WHERE id = $1", schedule_id)
    if status.endswith(" 0"):
        raise NotFound(f"schedule {schedule_id} not found")


async def trigger_schedule_now(conn: asyncpg.Connection, schedule_id: int) -> int | None:
    """Make the schedule due now; a scheduler starts the run within about a second.

    Returns None: the job id is known once a scheduler has claimed the run (see last_job_id).
    """
    status = await conn.execute(
        "UPDATE schedules SET next_run_at = now() WHERE id = $1", schedule_id
    )
    if status.endswith(" 0"):
        raise NotFound(f"schedule {schedule_id} not found")
    return None


async def claim_due(conn: asyncpg.Connection, now: datetime) -> tuple[dict, Trigger] | None:
    """Claim one due schedule and advance it; returns the run's trigger, or None.

    The caller starts the job from the trigger (outside this transaction).
    """
    async with conn.transaction():
        row = await conn.fetchrow(
            """SELECT id, source, spec, kind, next_run_at FROM schedules
               WHERE enabled AND next_run_at <= $1
               ORDER BY next_run_at LIMIT 1 FOR UPDATE SKIP LOCKED""",
            now,
        )
        if row is None:
            return None
        try:
            spec = parse_schedule(row["spec"])
        except ValueError as exc:
            await conn.execute(
                "UPDATE schedules SET enabled = false, last_error = $2 WHERE id = $1",
                row["id"],
                f"disabled: {exc}",
            )
            return None
        # Runs missed while no scheduler was up collapse into this one run.
        following = spec.next_after(max(now, row["next_run_at"]))
        running = await conn.fetchval(
            "SELECT id FROM jobs WHERE source = $1 AND status = 'running'", row["source"]
        )
        if running is not None:
            await conn.execute(
                """UPDATE schedules SET next_run_at = $2, last_run_at = $3,
                       last_error = $4 WHERE id = $1""",
                row["id"],
                following,
                now,
                f"skipped: job {running} of the source still runs",
            )
            log.info(
                "schedule run skipped",
                extra={"action": "schedule_skipped", "schedule_id": row["id"], "job_id": running},
            )
            return None
        await conn.execute(
            "UPDATE schedules SET next_run_at = $2, last_run_at = $3, last_error = NULL "
            "WHERE id = $1",
            row["id"],
            following,
            now,
        )
    run_key = int(row["next_run_at"].timestamp())
    trigger = Trigger(
        id=f"schedule-{row['id']}-{run_key}",
        source=row["source"],
        kind=row["kind"],
        requested_by=f"schedule:{row['id']}",
    )
    return dict(row), trigger


async def record_run(
    conn: asyncpg.Connection, schedule_id: int, job_id: int | None, error: str | None
) -> None:
    await conn.execute(
        "UPDATE schedules SET last_job_id = coalesce($2, last_job_id), last_error = $3 "
        "WHERE id = $1",
        schedule_id,
        job_id,
        error,
    )
