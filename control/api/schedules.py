"""Schedules: list, get, create, enable/disable, trigger now, delete (services/scheduler/
schedules.py holds the logic, its store the SQL)."""

from __future__ import annotations

from typing import Literal

import msgspec
from aiohttp import web

from control.api.problems import Problem
from control.api.routes import ID, Param, Route, path_id, pool_of, read_body, respond
from schemas.read import ScheduleOut
from services.scheduler import schedules
from services.scheduler.operations import NotFound


class ScheduleIn(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    source: str
    spec: str  # @hourly … @yearly, "@every 30m", or five-field cron
    kind: Literal["discovery", "refresh"] = "refresh"


class RunNow(msgspec.Struct, kw_only=True):
    schedule_id: int
    job_id: int | None  # None: a scheduler claims the run within about a second


async def list_all(request: web.Request) -> web.Response:
    async with pool_of(request).acquire() as conn:
        rows = await schedules.list_schedules(conn)
    return respond(rows)


async def get_one(request: web.Request) -> web.Response:
    schedule_id = path_id(request, "schedule_id")
    async with pool_of(request).acquire() as conn:
        row = await schedules.get_schedule(conn, schedule_id)
    return respond(row)


async def create(request: web.Request) -> web.Response:
    body: ScheduleIn = await read_body(request, ScheduleIn)
    async with pool_of(request).acquire() as conn:
        try:
            schedule_id = await schedules.add_schedule(conn, body.source, body.spec, body.kind)
        except (ValueError, NotFound) as exc:
            raise Problem(422, "Unprocessable Content", str(exc)) from None
        row = await schedules.get_schedule(conn, schedule_id)
    return respond(row, 201)


async def _enable(request: web.Request, enabled: bool) -> web.Response:
    schedule_id = path_id(request, "schedule_id")
    async with pool_of(request).acquire() as conn:
        await schedules.set_schedule_enabled(conn, schedule_id, enabled)
        row = await schedules.get_schedule(conn, schedule_id)
    return respond(row)


async def enable(request: web.Request) -> web.Response:
    return await _enable(request, True)


async def disable(request: web.Request) -> web.Response:
    return await _enable(request, False)


async def run_now(request: web.Request) -> web.Response:
    schedule_id = path_id(request, "schedule_id")
    async with pool_of(request).acquire() as conn:
        job_id = await schedules.trigger_schedule_now(conn, schedule_id)
    return respond(RunNow(schedule_id=schedule_id, job_id=job_id), 202)


async def delete(request: web.Request) -> web.Response:
    async with pool_of(request).acquire() as conn:
        await schedules.remove_schedule(conn, path_id(request, "schedule_id"))
    return respond(None)


_S = (Param("schedule_id", ID, "schedule id", True, "path"),)

ROUTES = [
    Route(
        "GET", "/api/schedules", list_all, "List schedules", "schedules", response=list[ScheduleOut]
    ),
    Route(
        "POST",
        "/api/schedules",
        create,
        "Create (or re-enable) a schedule",
        "schedules",
        body=ScheduleIn,
        response=ScheduleOut,
        status=201,
        errors=(400, 422),
    ),
    Route(
        "GET",
        "/api/schedules/{schedule_id}",
        get_one,
        "One schedule",
        "schedules",
        params=_S,
        response=ScheduleOut,
        errors=(404,),
    ),
    Route(
        "DELETE",
        "/api/schedules/{schedule_id}",
        delete,
        "Delete a schedule",
        "schedules",
        params=_S,
        errors=(404,),
    ),
    Route(
        "POST",
        "/api/schedules/{schedule_id}/enable",
        enable,
        "Enable a schedule",
        "schedules",
        params=_S,
        response=ScheduleOut,
        errors=(404,),
    ),
    Route(
        "POST",
        "/api/schedules/{schedule_id}/disable",
        disable,
        "Disable a schedule",
        "schedules",
        params=_S,
        response=ScheduleOut,
        errors=(404,),
    ),
    Route(
        "POST",
        "/api/schedules/{schedule_id}/run",
        run_now,
        "Run the schedule now",
        "schedules",
        params=_S,
        response=RunNow,
        status=202,
        errors=(404,),
    ),
]
