"""The dashboard's job history: finished and running jobs by key set with what they did and
their pages per minute, and one job's progress over time and its commonest errors."""

from __future__ import annotations

from collections import defaultdict

from schemas.read import JobErrorOut, JobOut, JobProgress, JobSummary, SeriesBucket
from services.scheduler.store import jobs
from services.scheduler.store.queries import Conn, Q

# A job's series has at most about this many buckets, whatever its length.
SERIES_BUCKETS = 120


def _summary(job: JobOut, per_minute: dict[int, int]) -> JobSummary:
    c = job.counters
    pages = c.get("total", 0) - c.get("open", 0)
    failed = c.get("failed", 0)
    end = job.finished_at
    duration = (end - job.created_at).total_seconds() if end else 0.0
    minutes = max(per_minute, default=-1) + 1
    return JobSummary(
        id=job.id,
        source=job.source,
        kind=job.kind,
        status=job.status,
        created_at=job.created_at,
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
    outs = [await jobs.job_out(conn, r) for r in rows]
    per_minute: dict[int, dict[int, int]] = defaultdict(dict)
    for r in await conn.fetch(Q.pages_per_minute, [j.id for j in outs]):
        if r["minute"] >= 0:
            per_minute[r["job_id"]][r["minute"]] = r["n"]
    items = [_summary(j, per_minute[j.id]) for j in outs]
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
