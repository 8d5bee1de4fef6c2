"""Domains: pacing state, pause/resume, set pace, and why-not-fetched for pending work."""

from __future__ import annotations

from typing import Annotated

import msgspec
from aiohttp import web

from control.api.problems import Problem
from control.api.routes import (
    PAGING,
    Param,
    Route,
    paging,
    pool_of,
    query_str,
    read_body,
    respond,
)
from schemas.read import DomainOut, WaitingOut
from services.scheduler import operations, store


class DomainAction(msgspec.Struct, kw_only=True):
    domain: str
    status: str


class DomainReset(msgspec.Struct, kw_only=True):
    domain: str
    status: str  # "reset"
    retries_due: int  # waiting retries of the domain brought forward to now


# The bounds live in the types, so the OpenAPI document states them (and msgspec enforces them).
_Delay = Annotated[float, msgspec.Meta(ge=0, le=86400)]


class PaceIn(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    min_delay: _Delay | None = None
    max_delay: _Delay | None = None
    max_in_flight: Annotated[int, msgspec.Meta(ge=1, le=1000)] | None = None


async def list_domains(request: web.Request) -> web.Response:
    limit, offset = paging(request)
    async with pool_of(request).acquire() as conn:
        return respond(await store.domains.list_all(conn, limit=limit, offset=offset))


async def get_domain(request: web.Request) -> web.Response:
    domain = request.match_info["domain"]
    async with pool_of(request).acquire() as conn:
        found = await store.domains.get(conn, domain)
    if found is None:
        raise operations.NotFound(f"domain {domain} not found")
    return respond(found)


async def pause(request: web.Request) -> web.Response:
    return await _pause(request, True)


async def resume(request: web.Request) -> web.Response:
    return await _pause(request, False)


async def _pause(request: web.Request, paused: bool) -> web.Response:
    async with pool_of(request).acquire() as conn:
        result = await operations.pause_domain(conn, request.match_info["domain"], paused)
    return respond(DomainAction(domain=result.domain or "", status=result.status or ""))


async def pace(request: web.Request) -> web.Response:
    body: PaceIn = await read_body(request, PaceIn)
    for value in (body.min_delay, body.max_delay):
        if value is not None and not 0 <= value <= 86400:
            raise Problem(422, "Unprocessable Content", "delays must be within 0..86400 s")
    if body.max_in_flight is not None and not 1 <= body.max_in_flight <= 1000:
        raise Problem(422, "Unprocessable Content", "max_in_flight must be within 1..1000")
    async with pool_of(request).acquire() as conn:
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


async def reset(request: web.Request) -> web.Response:
    async with pool_of(request).acquire() as conn:
        result = await operations.reset_domain(conn, request.match_info["domain"])
    return respond(
        DomainReset(domain=result.domain or "", status="reset", retries_due=result.affected)
    )


async def why(request: web.Request) -> web.Response:
    """What each open entry of a domain is waiting for."""
    limit, offset = paging(request)
    domain = request.match_info.get("domain")
    async with pool_of(request).acquire() as conn:
        if domain and not await store.domains.exists(conn, domain):
            raise operations.NotFound(f"domain {domain} not found")
        waiting = await store.domains.why_waiting(
            conn, domain=domain, url=query_str(request, "url"), limit=limit, offset=offset
        )
    return respond(waiting)


_D = (Param("domain", {"type": "string", "minLength": 1}, "host[:port]", True, "path"),)

ROUTES = [
    Route(
        "GET",
        "/api/domains",
        list_domains,
        "Domains with their pacing state",
        "domains",
        params=PAGING,
        response=list[DomainOut],
        errors=(400,),
    ),
    Route(
        "GET",
        "/api/domains/why",
        why,
        "Why open work is not fetched (all domains)",
        "domains",
        params=(Param("url", {"type": "string"}, "one URL only"), *PAGING),
        response=list[WaitingOut],
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
        response=DomainOut,
        errors=(404,),
    ),
    Route(
        "GET",
        "/api/domains/{domain}/why",
        why,
        "Why the domain's open work is not fetched",
        "domains",
        params=(*_D, Param("url", {"type": "string"}), *PAGING),
        response=list[WaitingOut],
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
        "/api/domains/{domain}/reset",
        reset,
        "Clear the domain's back-off and waits (Retry-After included); its retries are due now",
        "domains",
        params=_D,
        response=DomainReset,
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
