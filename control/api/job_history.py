"""The dashboard's job views: the history of finished and running jobs (paged by cursor, with
duration, pages, products, failure rate and pages per minute), and one job's progress over
time with its outcomes and top errors. The scheduler's store (``store.job_history``) reads."""

from __future__ import annotations

from aiohttp import web

from control.api import cursor
from control.api.problems import Problem
from control.api.routes import ID, Param, Route, path_id, pool_of, query_int, query_str, respond
from schemas.read import CursorPage, JobProgress, JobSummary
from services.scheduler import store
from services.scheduler.operations import NotFound


async def history(request: web.Request) -> web.Response:
    after = cursor.decode(query_str(request, "cursor"), length=1)
    if after is not None and not (isinstance(after[0], int) and after[0] > 0):
        raise Problem(400, "Bad Request", "cursor: not a cursor this API gave")
    limit = query_int(request, "limit", 50, lo=1, hi=500)
    assert limit is not None
    async with pool_of(request).acquire() as conn:
        items, last = await store.job_history.page(
            conn,
            status=query_str(request, "status"),
            source=query_str(request, "source"),
            before=None if after is None else after[0],
            limit=limit,
        )
    next_cursor = None if last is None else cursor.encode([last])
    return respond(CursorPage(items=items, next_cursor=next_cursor))


async def progress(request: web.Request) -> web.Response:
    job_id = path_id(request, "job_id")
    async with pool_of(request).acquire() as conn:
        out = await store.job_history.progress(conn, job_id)
    if out is None:
        raise NotFound(f"job {job_id} not found")
    return respond(out)


ROUTES = [
    Route(
        "GET",
        "/api/jobs/history",
        history,
        "Jobs newest first, finished ones included, with pages per minute (cursor paged)",
        "jobs",
        params=(
            Param("status", {"type": "string", "enum": ["running", "completed", "cancelled"]}),
            Param("source", {"type": "string"}),
            *cursor.paged(50, 500),
        ),
        response=CursorPage[JobSummary],
        errors=(400, 422),
    ),
    Route(
        "GET",
        "/api/jobs/{job_id}/progress",
        progress,
        "A job's attempts by outcome over time, and its top errors",
        "jobs",
        params=(Param("job_id", ID, "job id", required=True, location="path"),),
        response=JobProgress,
        errors=(404,),
    ),
]
