"""Domains: pacing state, pause/resume, set pace, and why-not-fetched for pending work."""

from __future__ import annotations

from datetime import datetime

import msgspec
from aiohttp import web

from control.api.problems import Problem
from control.api.routes import (
    PAGING,
    Param,
    Route,
    paging,
    query_str,
    read_body,
    respond,
    rt_of,
)
from services.scheduler import operations


class Domain(msgspec.Struct, kw_only=True):
    domain: str
    paused: bool
    max_in_flight: int
    in_flight: int
    min_delay: float
    max_delay: float
    crawl_delay: float | None
    backoff: float
    next_allowed_at: datetime
    pending: int
    waiting: int
    blocked_last_hour: int
    updated_at: datetime


class DomainAction(msgspec.Struct, kw_only=True):
    domain: str
    status: str


class PaceIn(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    min_delay: float | None = None
    max_delay: float | None = None
    max_in_flight: int | None = None


class Waiting(msgspec.Struct, kw_only=True):
    entry_id: int
    job_id: int
    url: str
    domain: str
    state: str
    reason: str  # the first thing that holds this entry back
    not_before: datetime | None
    last_outcome: str | None
    attempts: int


_DOMAIN_COLS = """d.domain, d.paused, d.max_in_flight, d.in_flight, d.min_delay, d.max_delay,
    d.crawl_delay, d.backoff, d.next_allowed_at, d.updated_at,
    (SELECT count(*) FROM entries e WHERE e.domain = d.domain AND e.state = 'pending') AS pending,
    (SELECT count(*) FROM entries e WHERE e.domain = d.domain AND e.state = 'waiting') AS waiting,
    (SELECT count(*) FROM attempts a JOIN entries e ON e.id = a.entry_id
      WHERE e.domain = d.domain AND a.outcome = 'blocked'
        AND a.recorded_at > now() - interval '1 hour') AS blocked_last_hour"""

# Why an open entry is not being fetched, in the order dispatch checks (dispatch.py).
_WHY = """
SELECT e.id AS entry_id, e.job_id, e.url, e.domain, e.state, e.not_before, e.last_outcome,
       e.attempts,
       CASE
         WHEN j.status <> 'running' THEN 'job is ' || j.status
         WHEN j.paused THEN 'job is paused'
         WHEN e.state = 'dispatched' THEN 'dispatched, waiting for the fetcher'
         WHEN e.state = 'fetched' THEN 'fetched, waiting for the parser'
         WHEN e.state = 'waiting' THEN 'retry backoff until ' || to_char(e.not_before
              AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"') || ' after '
              || coalesce(e.last_outcome, 'an error')
         WHEN d.domain IS NULL THEN 'domain not registered yet'
         WHEN d.paused THEN 'domain is paused'
         WHEN d.in_flight >= d.max_in_flight THEN 'domain at max_in_flight ('
              || d.in_flight || '/' || d.max_in_flight || ')'
         WHEN d.next_allowed_at > now() THEN 'domain pacing: next request at '
              || to_char(d.next_allowed_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"')
         ELSE 'queued behind ' || (SELECT count(*) FROM entries o
              WHERE o.domain = e.domain AND o.state = 'pending' AND o.rank > e.rank)
              || ' higher-ranked entries of the domain'
       END AS reason
FROM entries e
JOIN jobs j ON j.id = e.job_id
LEFT JOIN domains d ON d.domain = e.domain
WHERE e.state IN ('pending', 'waiting', 'dispatched', 'fetched')
  AND ($1::text IS NULL OR e.domain = $1)
  AND ($2::text IS NULL OR e.url = $2)
ORDER BY e.rank DESC, e.id
LIMIT $3 OFFSET $4
"""


async def list_domains(request: web.Request) -> web.Response:
    limit, offset = paging(request)
    async with rt_of(request).pool.acquire() as conn:
        rows = await conn.fetch(
            f"SELECT {_DOMAIN_COLS} FROM domains d ORDER BY d.domain LIMIT $1 OFFSET $2",
            limit,
            offset,
        )
    return respond([Domain(**dict(r)) for r in rows])


async def get_domain(request: web.Request) -> web.Response:
    domain = request.match_info["domain"]
    async with rt_of(request).pool.acquire() as conn:
        row = await conn.fetchrow(
            f"SELECT {_DOMAIN_COLS} FROM domains d WHERE d.domain = $1", domain
        )
    if row is None:
        raise operations.NotFound(f"domain {domain} not found")
    return respond(Domain(**dict(row)))


async def pause(request: web.Request) -> web.Response:
    return await _pause(request, True)


async def resume(request: web.Request) -> web.Response:
    return await _pause(request, False)


async def _pause(request: web.Request, paused: bool) -> web.Response:
    async with rt_of(request).pool.acquire() as conn:
        result = await operations.pause_domain(conn, request.match_info["domain"], paused)
    return respond(DomainAction(domain=result.domain or "", status=result.status or ""))


async def pace(request: web.Request) -> web.Response:
    body: PaceIn = await read_body(request, PaceIn)
    for value in (body.min_delay, body.max_delay):
        if value is not None and not 0 <= value <= 86400:
            raise Problem(422, "Unprocessable Content", "delays must be within 0..86400 s")
    if body.max_in_flight is not None and not 1 <= body.max_in_flight <= 1000:
        raise Problem(422, "Unprocessable Content", "max_in_flight must be within 1..1000")
    async with rt_of(request).pool.acquire() as conn:
        try:
            result = await operations.set_domain_pace(
                conn,
                request.match_info["domain"],
                min_delay=body.min_delay,
                max_delay=body.max_delay,
                max_in_flight=body.max_in_flight,
            )
        except operations.Conflict as exc:
            raise Problem(422, "Unprocessable Content", str(exc)) from None
    return respond(DomainAction(domain=result.domain or "", status=result.status or ""))


async def why(request: web.Request) -> web.Response:
    """What each open entry of a domain is waiting for."""
    limit, offset = paging(request)
    domain = request.match_info.get("domain")
    async with rt_of(request).pool.acquire() as conn:
        if domain and not await conn.fetchval("SELECT 1 FROM domains WHERE domain = $1", domain):
            raise operations.NotFound(f"domain {domain} not found")
        rows = await conn.fetch(_WHY, domain, query_str(request, "url"), limit, offset)
    return respond([Waiting(**dict(r)) for r in rows])


_D = (Param("domain", {"type": "string", "minLength": 1}, "host[:port]", True, "path"),)

ROUTES = [
    Route(
        "GET",
        "/api/domains",
        list_domains,
        "Domains with their pacing state",
        "domains",
        params=PAGING,
        response=list[Domain],
        errors=(400,),
    ),
    Route(
        "GET",
        "/api/domains/why",
        why,
        "Why open work is not fetched (all domains)",
        "domains",
        params=(Param("url", {"type": "string"}, "one URL only"), *PAGING),
        response=list[Waiting],
        errors=(400,),
        operation_id="why_all",
    ),
    Route(
        "GET",
        "/api/domains/{domain}",
        get_domain,
        "One domain",
        "domains",
        params=_D,
        response=Domain,
        errors=(404,),
    ),
    Route(
        "GET",
        "/api/domains/{domain}/why",
        why,
        "Why the domain's open work is not fetched",
        "domains",
        params=(*_D, Param("url", {"type": "string"}), *PAGING),
        response=list[Waiting],
        errors=(400, 404),
    ),
    Route(
        "POST",
        "/api/domains/{domain}/pause",
        pause,
        "Stop dispatching to the domain",
        "domains",
        params=_D,
        response=DomainAction,
        errors=(404,),
    ),
    Route(
        "POST",
        "/api/domains/{domain}/resume",
        resume,
        "Resume dispatching to the domain",
        "domains",
        params=_D,
        response=DomainAction,
        errors=(404,),
    ),
    Route(
        "POST",
        "/api/domains/{domain}/pace",
        pace,
        "Set the domain's pace",
        "domains",
        params=_D,
        body=PaceIn,
        response=DomainAction,
        errors=(400, 404, 422),
    ),
]
