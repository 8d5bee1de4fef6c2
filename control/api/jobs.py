"""Jobs: stats, list with filters and paging, one job, operator actions, bulk actions, start."""

from __future__ import annotations

import uuid
from typing import Annotated, Any, Literal

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
    pool_of,
    query_str,
    read_body,
    respond,
    rt_of,
)
from schemas.messages import Trigger, TriggerReply
from schemas.read import EntryOut, FailureOut, JobOut, JobStats, Page
from services.scheduler import operations, store
from shared.bus import encode


class ActionOut(msgspec.Struct, kw_only=True):
    job_id: int | None = None
    domain: str | None = None
    affected: int = 0
    status: str | None = None


# The bounds live in the types, so the OpenAPI document states them (and msgspec enforces them).
_Amount = Annotated[int, msgspec.Meta(ge=1, le=100)]


class BoostIn(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    amount: _Amount = 20


class BulkIn(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    action: Literal["retry", "boost", "cancel"]
    ids: list[int]
    amount: _Amount = 20


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


_reply_decoder = msgspec.json.Decoder(TriggerReply)


async def list_jobs(request: web.Request) -> web.Response:
    limit, offset = paging(request)
    status, source, kind = (query_str(request, k) for k in ("status", "source", "kind"))
    async with pool_of(request).acquire() as conn:
        page = await store.jobs.page(
            conn, status=status, source=source, kind=kind, limit=limit, offset=offset
        )
    return respond(page)


async def job_stats(request: web.Request) -> web.Response:
    async with pool_of(request).acquire() as conn:
        return respond(await store.jobs.stats(conn))


async def recent_failures(request: web.Request) -> web.Response:
    limit, offset = paging(request)
    async with pool_of(request).acquire() as conn:
        return respond(await store.jobs.recent_failures(conn, limit=limit, offset=offset))


async def get_job(request: web.Request) -> web.Response:
    job_id = path_id(request, "job_id")
    async with pool_of(request).acquire() as conn:
        job = await store.jobs.get(conn, job_id)
    if job is None:
        raise operations.NotFound(f"job {job_id} not found")
    return respond(job)


async def job_entries(request: web.Request) -> web.Response:
    job_id = path_id(request, "job_id")
    limit, offset = paging(request)
    state, url = query_str(request, "state"), query_str(request, "url")
    async with pool_of(request).acquire() as conn:
        if not await store.jobs.exists(conn, job_id):
            raise operations.NotFound(f"job {job_id} not found")
        page = await store.jobs.entries(
            conn, job_id, state=state, url=url, limit=limit, offset=offset
        )
    return respond(page)


def _out(result: operations.ActionResult) -> ActionOut:
    return ActionOut(
        job_id=result.job_id, domain=result.domain, affected=result.affected, status=result.status
    )


async def cancel(request: web.Request) -> web.Response:
    async with pool_of(request).acquire() as conn:
        return respond(_out(await operations.cancel_job(conn, path_id(request, "job_id"))))


async def retry(request: web.Request) -> web.Response:
    async with pool_of(request).acquire() as conn:
        return respond(_out(await operations.retry_failed(conn, path_id(request, "job_id"))))


async def boost(request: web.Request) -> web.Response:
    job_id = path_id(request, "job_id")
    body = await read_body(request, BoostIn, optional=True) or BoostIn()
    _check_amount(body.amount)
    async with pool_of(request).acquire() as conn:
        return respond(_out(await operations.boost_job(conn, job_id, body.amount)))


async def pause(request: web.Request) -> web.Response:
    async with pool_of(request).acquire() as conn:
        return respond(_out(await operations.pause_job(conn, path_id(request, "job_id"), True)))


async def resume(request: web.Request) -> web.Response:
    async with pool_of(request).acquire() as conn:
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
    async with pool_of(request).acquire() as conn:
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
    Param("kind", {"type": "string", "enum": ["discovery", "refresh", "verify"]}),
)
_ACT: dict[str, Any] = {"tag": "jobs", "params": _JOB, "response": ActionOut, "errors": (404, 409)}

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
        response=list[FailureOut],
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
        response=Page[JobOut],
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
        response=JobOut,
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
        response=Page[EntryOut],
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
