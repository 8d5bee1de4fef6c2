"""Liveness and readiness: the process answers; NATS and Postgres are reachable."""

from __future__ import annotations

import asyncio

import msgspec
from aiohttp import web

from control.api.routes import Route, pool_of, respond, rt_of
from services.scheduler import store


class Health(msgspec.Struct, kw_only=True):
    status: str


class Ready(msgspec.Struct, kw_only=True):
    ready: bool
    checks: dict[str, bool]


async def healthz(request: web.Request) -> web.Response:
    return respond(Health(status="ok"))


async def readyz(request: web.Request) -> web.Response:
    rt = rt_of(request)
    checks = {"nats": rt.nc.is_connected, "postgres": False}
    try:
        async with asyncio.timeout(2):
            async with pool_of(request).acquire() as conn:
                checks["postgres"] = await store.ping(conn)
    except (TimeoutError, OSError, Exception):
        checks["postgres"] = False
    ok = all(checks.values())
    return respond(Ready(ready=ok, checks=checks), 200 if ok else 503)


ROUTES = [
    Route("GET", "/healthz", healthz, "Liveness", "health", response=Health, public=True),
    Route(
        "GET",
        "/readyz",
        readyz,
        "Readiness (NATS and Postgres reachable)",
        "health",
        response=Ready,
        other=((503, Ready),),
        public=True,
    ),
]
