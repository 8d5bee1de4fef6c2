"""Proxies: list with health, register, enable/disable, remove (services/scheduler/proxies.py
holds the registry; every change republishes the fetchers' active list). URLs are shown with
their credentials masked. A proxy at an address the fetcher would refuse (``check_proxy``; a name
by the addresses it resolves to) is refused here already, with the reason."""

from __future__ import annotations

import msgspec
from aiohttp import web

from control.api.problems import Problem
from control.api.routes import ID, Param, Route, path_id, pool_of, read_body, respond, rt_of
from schemas.read import ProxyOut
from services.scheduler import proxies as registry
from services.scheduler.operations import NotFound
from services.scheduler.store import Conn
from shared.guard import ProxyRules, UnsafeURL, check_proxy_resolved


class ProxyIn(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    url: str  # http(s)://[user:password@]host:port


async def _find(conn: Conn, proxy_id: int) -> ProxyOut:
    row = await registry.get_proxy(conn, proxy_id)
    if row is None:
        raise NotFound(f"proxy {proxy_id} not found")
    return registry.proxy_out(row)


async def list_proxies(request: web.Request) -> web.Response:
    async with pool_of(request).acquire() as conn:
        rows = await registry.list_proxies(conn)
    return respond([registry.proxy_out(r) for r in rows])


async def get_proxy(request: web.Request) -> web.Response:
    async with pool_of(request).acquire() as conn:
        return respond(await _find(conn, path_id(request, "proxy_id")))


async def add_proxy(request: web.Request) -> web.Response:
    body: ProxyIn = await read_body(request, ProxyIn)
    rt = rt_of(request)
    try:
        await check_proxy_resolved(body.url.strip(), ProxyRules.from_settings(rt.settings))
    except UnsafeURL as exc:  # names host and port only, never the credentials
        raise Problem(422, "Unprocessable Content", exc.reason) from None
    async with pool_of(request).acquire() as conn:
        try:
            row = await registry.add_proxy(conn, rt.js, rt.names, body.url)
        except registry.ProxyError as exc:  # its message masks the URL
            raise Problem(422, "Unprocessable Content", str(exc)) from None
    return respond(registry.proxy_out(row), 201)


async def enable(request: web.Request) -> web.Response:
    return await _set_active(request, True)


async def disable(request: web.Request) -> web.Response:
    return await _set_active(request, False)


async def _set_active(request: web.Request, active: bool) -> web.Response:
    rt = rt_of(request)
    proxy_id = path_id(request, "proxy_id")
    change = registry.enable_proxy if active else registry.disable_proxy
    async with pool_of(request).acquire() as conn:
        row = await change(conn, rt.js, rt.names, proxy_id)
    if row is None:
        raise NotFound(f"proxy {proxy_id} not found")
    return respond(registry.proxy_out(row))


async def remove(request: web.Request) -> web.Response:
    rt = rt_of(request)
    proxy_id = path_id(request, "proxy_id")
    async with pool_of(request).acquire() as conn:
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
