"""Proxies: list with health, register, enable/disable, remove (services/scheduler/proxies.py
holds the registry; every change republishes the fetchers' active list). URLs are shown with
their credentials masked."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import msgspec
from aiohttp import web

from control.api.problems import Problem
from control.api.routes import ID, Param, Route, path_id, read_body, respond, rt_of
from services.scheduler import proxies as registry
from services.scheduler.operations import NotFound


class ProxyOut(msgspec.Struct, kw_only=True):
    id: int
    url: str  # credentials masked
    active: bool
    healthy: bool
    consecutive_failures: int
    successes: int
    failures: int
    last_error: str | None
    last_used_at: datetime | None
    created_at: datetime


class ProxyIn(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    url: str  # http(s)://[user:password@]host:port


def _out(row: dict[str, Any]) -> ProxyOut:
    healthy = row["active"] and row["consecutive_failures"] < registry.MAX_CONSECUTIVE_FAILURES
    return ProxyOut(healthy=healthy, **row)


async def _find(conn: Any, proxy_id: int) -> dict[str, Any]:
    for row in await registry.list_proxies(conn):
        if row["id"] == proxy_id:
            return row
    raise NotFound(f"proxy {proxy_id} not found")


async def list_proxies(request: web.Request) -> web.Response:
    async with rt_of(request).pool.acquire() as conn:
        rows = await registry.list_proxies(conn)
    return respond([_out(r) for r in rows])


async def get_proxy(request: web.Request) -> web.Response:
    async with rt_of(request).pool.acquire() as conn:
        return respond(_out(await _find(conn, path_id(request, "proxy_id"))))


async def add_proxy(request: web.Request) -> web.Response:
    body: ProxyIn = await read_body(request, ProxyIn)
    rt = rt_of(request)
    async with rt.pool.acquire() as conn:
        try:
            row = await registry.add_proxy(conn, rt.js, rt.names, body.url)
        except registry.ProxyError as exc:  # its message masks the URL
            raise Problem(422, "Unprocessable Content", str(exc)) from None
    return respond(_out(row), 201)


async def enable(request: web.Request) -> web.Response:
    rt = rt_of(request)
    proxy_id = path_id(request, "proxy_id")
    async with rt.pool.acquire() as conn:
        row = await registry.enable_proxy(conn, rt.js, rt.names, proxy_id)
    if row is None:
        raise NotFound(f"proxy {proxy_id} not found")
    return respond(_out(row))


async def disable(request: web.Request) -> web.Response:
    rt = rt_of(request)
    proxy_id = path_id(request, "proxy_id")
    async with rt.pool.acquire() as conn:
        await _find(conn, proxy_id)
        # services/scheduler/proxies.py has no disable yet; this belongs there.
        await conn.execute("UPDATE proxies SET active = false WHERE id = $1", proxy_id)
        await registry.publish_active_proxies(conn, rt.js, rt.names)
        return respond(_out(await _find(conn, proxy_id)))


async def remove(request: web.Request) -> web.Response:
    rt = rt_of(request)
    proxy_id = path_id(request, "proxy_id")
    async with rt.pool.acquire() as conn:
        if not await registry.remove_proxy(conn, rt.js, rt.names, proxy_id):
            raise NotFound(f"proxy {proxy_id} not found")
    return respond(None)


_P = (Param("proxy_id", ID, "proxy id", True, "path"),)

ROUTES = [
    Route(
        "GET",
        "/api/proxies",
        list_proxies,
        "Proxies with their health",
        "proxies",
        response=list[ProxyOut],
    ),
    Route(
        "POST",
        "/api/proxies",
        add_proxy,
        "Register (or re-activate) a proxy",
        "proxies",
        body=ProxyIn,
        response=ProxyOut,
        status=201,
        errors=(400, 422),
    ),
    Route(
        "GET",
        "/api/proxies/{proxy_id}",
        get_proxy,
        "One proxy",
        "proxies",
        params=_P,
        response=ProxyOut,
        errors=(404,),
    ),
    Route(
        "DELETE",
        "/api/proxies/{proxy_id}",
        remove,
        "Remove a proxy",
        "proxies",
        params=_P,
        errors=(404,),
    ),
    Route(
        "POST",
        "/api/proxies/{proxy_id}/enable",
        enable,
        "Re-activate a proxy and forget its failures",
        "proxies",
        params=_P,
        response=ProxyOut,
        errors=(404,),
    ),
    Route(
        "POST",
        "/api/proxies/{proxy_id}/disable",
        disable,
        "Deactivate a proxy",
        "proxies",
        params=_P,
        response=ProxyOut,
        errors=(404,),
    ),
]
