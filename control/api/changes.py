"""Product change events (issue 18): the refresher's ``product_events``, cursor-paged.

The same events are on the events stream (``<ns>.events.product.<source>.<kind>``) for
consumers; this is the way to read them back over HTTP, from any point.
"""

from __future__ import annotations

from aiohttp import web

from control.api.problems import Problem
from control.api.routes import (
    ID,
    Param,
    Route,
    pool_of,
    query_int,
    query_str,
    query_time,
    respond,
)
from schemas.messages import CHANGE_KINDS
from schemas.read import ChangePage, VerificationCounts
from services.refresher import store

VERIFICATION = ("pending", "confirmed", "cancelled", "unknown")


def _verification(request: web.Request) -> list[str] | None:
    states = [k for raw in request.query.getall("verification", []) for k in raw.split(",") if k]
    unknown = sorted(set(states) - set(VERIFICATION))
    if unknown:
        raise Problem(400, "Bad Request", f"verification: unknown {', '.join(unknown)}")
    return states or None


def _kinds(request: web.Request) -> list[str] | None:
    kinds = [k for raw in request.query.getall("kind", []) for k in raw.split(",") if k]
    unknown = sorted(set(kinds) - set(CHANGE_KINDS))
    if unknown:
        raise Problem(400, "Bad Request", f"kind: unknown {', '.join(unknown)}")
    return kinds or None


async def list_changes(request: web.Request) -> web.Response:
    limit = query_int(request, "limit", 100, lo=1, hi=1000)
    after = query_int(request, "after", 0, lo=0)
    assert limit is not None and after is not None
    where = store.ChangeFilter(
        source=query_str(request, "source"),
        since=query_time(request, "since"),
        kinds=_kinds(request),
        verification=_verification(request),
    )
    before = query_int(request, "before", None, lo=0)
    if before is not None:
        if after:
            raise Problem(
                422, "Unprocessable Content", "after and before: give one cursor, not both"
            )
        # Newest first (the dashboard's feed): next is the cursor for older events, 0 at the end.
        async with pool_of(request).acquire() as conn:
            items = await store.list_events(
                conn, where, cursor=before, newest_first=True, limit=limit
            )
        more = len(items) == limit
        older = items[-1].id if items and more else 0
        return respond(ChangePage(items=items, next=older, more=more))
    async with pool_of(request).acquire() as conn:
        items = await store.list_events(conn, where, cursor=after, limit=limit)
    nxt = items[-1].id if items else after
    return respond(ChangePage(items=items, next=nxt, more=len(items) == limit))


async def verification_counts(request: web.Request) -> web.Response:
    where = store.ChangeFilter(
        source=query_str(request, "source"), since=query_time(request, "since")
    )
    async with pool_of(request).acquire() as conn:
        counts = await store.verification_counts(conn, where)
    return respond(VerificationCounts(**counts))


ROUTES = [
    Route(
        "GET",
        "/api/changes",
        list_changes,
        "Product change events after a cursor",
        "changes",
        params=(
            Param("source", {"type": "string"}),
            Param("kind", {"type": "string", "enum": list(CHANGE_KINDS)}, "repeatable"),
            Param(
                "verification",
                {"type": "string", "enum": list(VERIFICATION)},
                "the candidates held for verification in this state, instead of the emitted events",
            ),
            Param("since", {"type": "string", "format": "date-time"}, "at or after this time"),
            Param("after", {**ID, "minimum": 0, "default": 0}, "the cursor: an event id"),
            Param(
                "before",
                {**ID, "minimum": 0},
                "newest first, before this event id (0: from the newest); not with after",
            ),
            Param("limit", {"type": "integer", "minimum": 1, "maximum": 1000, "default": 100}),
        ),
        response=ChangePage,
        errors=(400, 422),
    ),
    Route(
        "GET",
        "/api/changes/verification",
        verification_counts,
        "Candidate changes by how verification ended (how many it cancelled)",
        "changes",
        params=(
            Param("source", {"type": "string"}),
            Param("since", {"type": "string", "format": "date-time"}, "at or after this time"),
        ),
        response=VerificationCounts,
        errors=(400,),
    ),
]
