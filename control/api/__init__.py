"""Admin HTTP API and dashboard, its own process (``python -m control.api``; replicas share the
port with ``reuse_port``).

One module per resource group declares its routes (``routes.Route``); the aiohttp router, the
auth rules and the OpenAPI document are all built from that one table.
"""

from __future__ import annotations

import logging
from pathlib import Path

from aiohttp import web

from control.api import (
    alerts,
    catalog,
    changes,
    dlq,
    domains,
    exports,
    health,
    job_history,
    jobs,
    payloads,
    products,
    proxies,
    schedules,
    sources,
    workers,
)
from control.api.auth import AUTH_KEY, PUBLIC_KEY, Auth, auth
from control.api.methods import ALLOW_KEY, allow, allow_table
from control.api.openapi import build_document
from control.api.params import checked
from control.api.problems import problems
from control.api.routes import RT_KEY, Route, respond
from shared.service import DbRuntime

log = logging.getLogger("trawl.scheduler.api")

STATIC = Path(__file__).parent / "static"
# Every resource module, imported by name: a module that fails to import fails the API at
# start, instead of silently leaving its routes out.
# job_history before jobs: its /api/jobs/history must match before /api/jobs/{job_id}.
RESOURCES = (
    health,
    job_history,
    jobs,
    sources,
    schedules,
    payloads,
    products,
    changes,
    alerts,
    catalog,
    exports,
    domains,
    proxies,
    workers,
    dlq,
)
ROUTES_KEY = web.AppKey("routes", list)


def all_routes() -> list[Route]:
    """Every resource's routes, plus the document and the dashboard."""
    out: list[Route] = [route for module in RESOURCES for route in module.ROUTES]
    out += [
        Route(
            "GET",
            "/openapi.json",
            openapi_json,
            "This document",
            "meta",
            public=True,
            response=dict,
        ),
        Route(
            "GET", "/", dashboard, "The dashboard", "meta", public=True, content_type="text/html"
        ),
    ]
    return out


async def openapi_json(request: web.Request) -> web.Response:
    return respond(build_document(request.app[ROUTES_KEY]))


async def dashboard(request: web.Request) -> web.FileResponse:
    return web.FileResponse(STATIC / "index.html")


def build_app(rt: DbRuntime, *, auth_conf: Auth | None = None) -> web.Application:
    routes = all_routes()
    app = web.Application(middlewares=[problems, allow, auth])
    app[ALLOW_KEY] = allow_table(routes)
    app[RT_KEY] = rt
    app[AUTH_KEY] = auth_conf or Auth.from_settings(rt.settings)
    app[ROUTES_KEY] = routes
    public = {(r.method, r.path) for r in routes if r.public}
    for r in routes:
        handler = checked(r)
        if r.method == "GET":  # HEAD too, with GET's auth rule (public or not)
            app.router.add_get(r.path, handler, allow_head=True)
        else:
            app.router.add_route(r.method, r.path, handler)
    app.router.add_static("/static/", STATIC)
    public.add(("GET", "/static"))
    app[PUBLIC_KEY] = frozenset(public)
    return app


async def serve_api(rt: DbRuntime) -> None:
    host, _, port = rt.settings.api_listen.rpartition(":")
    runner = web.AppRunner(build_app(rt), access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, host or "127.0.0.1", int(port), reuse_port=True)
    try:
        await site.start()
    except OSError:
        await runner.cleanup()
        raise  # the task dies, the process exits, and the supervisor retries with backoff
    log.info(
        "admin API listening", extra={"action": "api_listening", "listen": rt.settings.api_listen}
    )
    if not Auth.from_settings(rt.settings).enabled and host not in ("", "127.0.0.1", "localhost"):
        # Open is right for a local stack; on a reachable address it is an operator's slip.
        log.warning(
            "admin API open to the network: set TRAWL_API_TOKEN",
            extra={"action": "api_open", "listen": rt.settings.api_listen},
        )
    try:
        await rt.stop.wait()
    finally:
        await runner.cleanup()
