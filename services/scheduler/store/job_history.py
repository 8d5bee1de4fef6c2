"""The dashboard's job history: finished and running jobs by key set with what they did and
their pages per minute, and one job's progress over time and its commonest errors."""

from __future__ import annotations

from collections import defaultdict

from asyncpg import Record

from schemas.read import JobErrorOut, JobProgress, JobSummary, SeriesBucket
from services.scheduler.store import jobs
from services.scheduler.store.queries import Conn, Q

# A job's series has at most about this many buckets, whatever its length.
SERIES_BUCKETS = 120


def _summary(row: Record, c: dict[str, int], per_minute: dict[int, int]) -> JobSummary:
    pages = c.get("total", 0) - c.get("open", 0)
    failed = c.get("failed", 0)
    end = row["finished_at"]
    duration = (end - row["created_at"]).total_seconds() if end else 0.0
    minutes = max(per_minute, default=-1) + 1
    return JobSummary(
        id=row["id"],
        source=row["source"],
        kind=row["kind"],
        status=row["status"],
        created_at=row["created_at"],
        finished_at=end,
        duration_s=round(max(duration, 0.0), 3),
        pages=pages,
        products=c.get("products", 0),
        failed=failed,
        failure_rate=round(failed / pages, 4) if pages else 0.0,
        pages_per_minute=[per_minute.get(m, 0) for m in range(minutes)],
    )


async def page(
    conn: Conn, *, status: str | None, source: str | None, before: int | None, limit: int
) -> tuple[list[JobSummary], int | None]:
    """Jobs newest first with an id below ``before``; and the cursor of the next page."""
    rows = await conn.fetch(Q.job_history, status, source, before, limit + 1)
    more = len(rows) > limit
    rows = rows[:limit]
    per_minute: dict[int, dict[int, int]] = defaultdict(dict)
    for r in await conn.fetch(Q.pages_per_minute, [row["id"] for row in rows]):
        if r["minute"] >= 0:
            per_minute[r["job_id"]][r["minute"]] = r["n"]
    items = []
    for row in rows:
        # A finished job carries its final counters; only a running one is counted now.
        live = row["status"] == "running" or not row["counters"]
        counters = await jobs.counters(conn, row["id"]) if live else dict(row["counters"])
        items.append(_summary(row, counters, per_minute[row["id"]]))
    return items, (items[-1].id if more else None)


async def progress(conn: Conn, job_id: int, *, top: int = 10) -> JobProgress | None:
    """The job with its attempts by outcome over time and its ``top`` commonest errors."""
    job = await jobs.get(conn, job_id)
    if job is None:
        return None
    span = await conn.fetchrow(Q.job_span, job_id)
    bucket = 5
    if span is not None and span["first_at"] is not None:
        seconds = (span["last_at"] - span["first_at"]).total_seconds()
        bucket = max(5, int(seconds // SERIES_BUCKETS) + 1)
    series: dict[object, dict[str, int]] = {}
    for r in await conn.fetch(Q.job_series, job_id, bucket):
        series.setdefault(r["at"], {})[r["outcome"]] = r["n"]
    errors = [JobErrorOut(**dict(r)) for r in await conn.fetch(Q.job_top_errors, job_id, top)]
    return JobProgress(
        job=job,
        bucket_s=bucket,
        series=[SeriesBucket(at=at, outcomes=o) for at, o in series.items()],  # type: ignore[arg-type]
        top_errors=errors,
    )
