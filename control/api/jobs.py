"""Jobs: stats, list with filters and paging, one job, operator actions, bulk actions, start."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Literal

import asyncpg
import msgspec
import nats.errors
from aiohttp import web

from control.api.problems import Problem
from control.api.routes import (
    ID,
    PAGING,
    Param,
    Route,
    paging,
    path_id,
    query_str,
    read_body,
    respond,
    rt_of,
)
from schemas.messages import Trigger, TriggerReply
from services.scheduler import operations
from services.scheduler.jobs import counters
from shared.bus import encode

JobStatus = Literal["running", "completed", "cancelled"]


class Job(msgspec.Struct, kw_only=True):
    id: int
    source: str
    kind: str
    status: str
    paused: bool
    priority: int | None
    requested_by: str | None
    created_at: datetime
    finished_at: datetime | None
    counters: dict[str, int]
    rate_per_min: float  # attempts recorded in the last minute


class JobPage(msgspec.Struct, kw_only=True):
    items: list[Job]
    total: int
    limit: int
    offset: int


class JobStats(msgspec.Struct, kw_only=True):
    jobs: dict[str, int]  # by status
    entries: dict[str, int]  # entries of running jobs by state
    outcomes_last_hour: dict[str, int]


class Failure(msgspec.Struct, kw_only=True):
    attempt_id: str
    job_id: int
    url: str
    outcome: str
    status: int | None
    error: str | None
    recorded_at: datetime


class Entry(msgspec.Struct, kw_only=True):
    id: int
    url: str
    domain: str
    kind: str
    depth: int
    state: str
    attempts: int
    priority: int
    not_before: datetime | None
    last_outcome: str | None
    last_status: int | None
    parse_error: str | None
    updated_at: datetime


class EntryPage(msgspec.Struct, kw_only=True):
    items: list[Entry]
    total: int
    limit: int
    offset: int


class ActionOut(msgspec.Struct, kw_only=True):
    job_id: int | None = None
    domain: str | None = None
    affected: int = 0
    status: str | None = None


class BoostIn(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    amount: int = msgspec.field(default=20)


class BulkIn(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    action: Literal["retry", "boost", "cancel"]
    ids: list[int]
    amount: int = 20


class BulkItem(msgspec.Struct, kw_only=True):
    job_id: int
    ok: bool
    affected: int = 0
    status: str | None = None
    error: str | None = None


class BulkOut(msgspec.Struct, kw_only=True):
    results: list[BulkItem]


class StartIn(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    source: str
    kind: Literal["discovery", "refresh"] = "discovery"
    seeds: list[str] = []
    keywords: list[str] = []
    priority: int | None = None


class Started(msgspec.Struct, kw_only=True):
    job_id: int
    existing: bool


_JOB_COLS = "id, source, kind, status, paused, priority, requested_by, created_at, finished_at"
_reply_decoder = msgspec.json.Decoder(TriggerReply)


async def _job(conn: asyncpg.Connection, row: asyncpg.Record) -> Job:
    # Finished jobs carry their final counters; running ones are counted live.
    live = row["status"] == "running" or not row.get("counters")
    rate = await conn.fetchval(
        "SELECT count(*) FROM attempts WHERE job_id = $1 AND recorded_at > now() - interval '60s'",
        row["id"],
    )
    return Job(
        id=row["id"],
        source=row["source"],
        kind=row["kind"],
        status=row["status"],
        paused=row["paused"],
        priority=row["priority"],
        requested_by=row["requested_by"],
        created_at=row["created_at"],
        finished_at=row["finished_at"],
        counters=await counters(conn, row["id"]) if live else dict(row["counters"]),
        rate_per_min=float(rate),
    )


async def list_jobs(request: web.Request) -> web.Response:
    limit, offset = paging(request)
    status, source, kind = (query_str(request, k) for k in ("status", "source", "kind"))
    where = """($1::text IS NULL OR status = $1) AND ($2::text IS NULL OR source = $2)
               AND ($3::text IS NULL OR kind = $3)"""
    async with rt_of(request).pool.acquire() as conn:
        total = await conn.fetchval(
            f"SELECT count(*) FROM jobs WHERE {where}", status, source, kind
        )
        rows = await conn.fetch(
            f"SELECT {_JOB_COLS}, counters FROM jobs WHERE {where} ORDER BY id DESC "
            "LIMIT $4 OFFSET $5",
            status,
            source,
            kind,
            limit,
            offset,
        )
        items = [await _job(conn, r) for r in rows]
    return respond(JobPage(items=items, total=total, limit=limit, offset=offset))


async def job_stats(request: web.Request) -> web.Response:
    async with rt_of(request).pool.acquire() as conn:
        jobs = await conn.fetch("SELECT status, count(*) AS n FROM jobs GROUP BY status")
        entries = await conn.fetch(
            """SELECT e.state, count(*) AS n FROM entries e JOIN jobs j ON j.id = e.job_id
               WHERE j.status = 'running' GROUP BY e.state"""
        )
        outcomes = await conn.fetch(
            """SELECT outcome, count(*) AS n FROM attempts
               WHERE recorded_at > now() - interval '1 hour' GROUP BY outcome"""
        )
    return respond(
        JobStats(
            jobs={r["status"]: r["n"] for r in jobs},
            entries={r["state"]: r["n"] for r in entries},
            outcomes_last_hour={r["outcome"]: r["n"] for r in outcomes},
        )
    )


async def recent_failures(request: web.Request) -> web.Response:
    limit, offset = paging(request)
    async with rt_of(request).pool.acquire() as conn:
        rows = await conn.fetch(
            """SELECT attempt_id, job_id, url, outcome, status, error, recorded_at FROM attempts
               WHERE outcome NOT IN ('ok', 'not_modified')
               ORDER BY recorded_at DESC LIMIT $1 OFFSET $2""",
            limit,
            offset,
        )
    return respond([Failure(**dict(r)) for r in rows])


async def get_job(request: web.Request) -> web.Response:
    job_id = path_id(request, "job_id")
    async with rt_of(request).pool.acquire() as conn:
        row = await conn.fetchrow(f"SELECT {_JOB_COLS}, counters FROM jobs WHERE id = $1", job_id)
        if row is None:
            raise operations.NotFound(f"job {job_id} not found")
        return respond(await _job(conn, row))


async def job_entries(request: web.Request) -> web.Response:
    job_id = path_id(request, "job_id")
    limit, offset = paging(request)
    state, url = query_str(request, "state"), query_str(request, "url")
    where = "job_id = $1 AND ($2::text IS NULL OR state = $2) AND ($3::text IS NULL OR url = $3)"
    async with rt_of(request).pool.acquire() as conn:
        if not await conn.fetchval("SELECT 1 FROM jobs WHERE id = $1", job_id):
            raise operations.NotFound(f"job {job_id} not found")
        total = await conn.fetchval(
            f"SELECT count(*) FROM entries WHERE {where}", job_id, state, url
        )
        rows = await conn.fetch(
            f"""SELECT id, url, domain, kind, depth, state, attempts, priority, not_before,
                       last_outcome, last_status, parse_error, updated_at
                FROM entries WHERE {where} ORDER BY id LIMIT $4 OFFSET $5""",
            job_id,
            state,
            url,
            limit,
            offset,
        )
    items = [Entry(**dict(r)) for r in rows]
    return respond(EntryPage(items=items, total=total, limit=limit, offset=offset))


def _out(result: operations.ActionResult) -> ActionOut:
    return ActionOut(
        job_id=result.job_id, domain=result.domain, affected=result.affected, status=result.status
    )


async def cancel(request: web.Request) -> web.Response:
    async with rt_of(request).pool.acquire() as conn:
        return respond(_out(await operations.cancel_job(conn, path_id(request, "job_id"))))


async def retry(request: web.Request) -> web.Response:
    async with rt_of(request).pool.acquire() as conn:
        return respond(_out(await operations.retry_failed(conn, path_id(request, "job_id"))))


async def boost(request: web.Request) -> web.Response:
    job_id = path_id(request, "job_id")
    body = await read_body(request, BoostIn | None) or BoostIn()
    _check_amount(body.amount)
    async with rt_of(request).pool.acquire() as conn:
        return respond(_out(await operations.boost_job(conn, job_id, body.amount)))


async def pause(request: web.Request) -> web.Response:
    async with rt_of(request).pool.acquire() as conn:
        return respond(_out(await operations.pause_job(conn, path_id(request, "job_id"), True)))


async def resume(request: web.Request) -> web.Response:
    async with rt_of(request).pool.acquire() as conn:
        return respond(_out(await operations.pause_job(conn, path_id(request, "job_id"), False)))


def _check_amount(amount: int) -> None:
    if not 1 <= amount <= 100:
        raise Problem(422, "Unprocessable Content", "amount: must be between 1 and 100")


async def bulk(request: web.Request) -> web.Response:
    body: BulkIn = await read_body(request, BulkIn)
    if body.action == "boost":
        _check_amount(body.amount)
    if len(body.ids) > 1000:
        raise Problem(422, "Unprocessable Content", "ids: at most 1000 per call")
    results = []
    async with rt_of(request).pool.acquire() as conn:
        for job_id in dict.fromkeys(body.ids):
            try:
                if body.action == "retry":
                    r = await operations.retry_failed(conn, job_id)
                elif body.action == "boost":
                    r = await operations.boost_job(conn, job_id, body.amount)
                else:
                    r = await operations.cancel_job(conn, job_id)
            except (operations.NotFound, operations.Conflict) as exc:
                results.append(BulkItem(job_id=job_id, ok=False, error=str(exc)))
                continue
            except asyncpg.DataError as exc:
                results.append(BulkItem(job_id=job_id, ok=False, error=f"invalid id: {exc}"))
                continue
            results.append(BulkItem(job_id=job_id, ok=True, affected=r.affected, status=r.status))
    return respond(BulkOut(results=results))


async def start(request: web.Request) -> web.Response:
    """Start (or join) a crawl: the same trigger request the CLI sends."""
    body: StartIn = await read_body(request, StartIn)
    rt = rt_of(request)
    trigger = Trigger(
        id=uuid.uuid4().hex,
        source=body.source,
        kind=body.kind,
        seeds=body.seeds,
        keywords=body.keywords,
        priority=body.priority,
        requested_by="api",
    )
    try:
        msg = await rt.nc.request(rt.names.trigger, encode(trigger), timeout=10)
    except (nats.errors.TimeoutError, nats.errors.NoRespondersError) as exc:
        raise Problem(503, "Service Unavailable", f"no scheduler answered: {exc}") from None
    reply = _reply_decoder.decode(msg.data)
    if reply.error or reply.job_id is None:
        raise Problem(422, "Unprocessable Content", reply.error or "no job started")
    return respond(Started(job_id=reply.job_id, existing=reply.existing), 201)


_JOB = (Param("job_id", ID, "job id", required=True, location="path"),)
_FILTERS = (
    Param("status", {"type": "string", "enum": ["running", "completed", "cancelled"]}),
    Param("source", {"type": "string"}),
    Param("kind", {"type": "string", "enum": ["discovery", "refresh"]}),
)
_ACT = {"tag": "jobs", "params": _JOB, "response": ActionOut, "errors": (404, 409)}

ROUTES = [
    Route(
        "GET",
        "/api/jobs/stats",
        job_stats,
        "Job and entry counts by state",
        "jobs",
        response=JobStats,
    ),
    Route(
        "GET",
        "/api/jobs/failures",
        recent_failures,
        "Recent failed attempts",
        "jobs",
        params=PAGING,
        response=list[Failure],
        errors=(400,),
    ),
    Route(
        "POST",
        "/api/jobs/bulk",
        bulk,
        "Retry, boost or cancel many jobs",
        "jobs",
        body=BulkIn,
        response=BulkOut,
        errors=(400, 422),
    ),
    Route(
        "GET",
        "/api/jobs",
        list_jobs,
        "List jobs (newest first)",
        "jobs",
        params=(*_FILTERS, *PAGING),
        response=JobPage,
        errors=(400,),
    ),
    Route(
        "POST",
        "/api/jobs",
        start,
        "Start a crawl of a source (or join its running job)",
        "jobs",
        body=StartIn,
        response=Started,
        status=201,
        errors=(400, 422, 503),
    ),
    Route(
        "GET",
        "/api/jobs/{job_id}",
        get_job,
        "One job with live counters",
        "jobs",
        params=_JOB,
        response=Job,
        errors=(404,),
    ),
    Route(
        "GET",
        "/api/jobs/{job_id}/entries",
        job_entries,
        "A job's frontier entries",
        "jobs",
        params=(
            *_JOB,
            Param("state", {"type": "string"}),
            Param("url", {"type": "string"}),
            *PAGING,
        ),
        response=EntryPage,
        errors=(400, 404),
    ),
    Route("POST", "/api/jobs/{job_id}/cancel", cancel, "Cancel a running job", **_ACT),
    Route("POST", "/api/jobs/{job_id}/retry", retry, "Retry the job's failed entries", **_ACT),
    Route(
        "POST",
        "/api/jobs/{job_id}/boost",
        boost,
        "Raise the priority of its waiting work",
        body=BoostIn,
        body_required=False,
        **{**_ACT, "errors": (400, 404, 422)},
    ),
    Route("POST", "/api/jobs/{job_id}/pause", pause, "Hold the job's dispatch", **_ACT),
    Route("POST", "/api/jobs/{job_id}/resume", resume, "Resume the job's dispatch", **_ACT),
]
