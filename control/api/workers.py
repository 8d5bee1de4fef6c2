"""Workers (live service instances via the NATS service API) and streams (queue depth, lag)."""

from __future__ import annotations

from typing import Any

import msgspec
import nats.errors
import nats.js.errors
from aiohttp import web
from nats.aio.client import Client

from control.api.routes import Param, Route, respond, rt_of
from shared import names as n
from shared.bus import discover_instances
from shared.names import Names

STREAM_KEYS = (n.TRIGGER, n.FETCH, n.RENDER, n.FETCHED, n.PARSED, n.EVENTS, n.DLQ)


class Worker(msgspec.Struct, kw_only=True):
    service: str
    id: str
    instance: str
    version: str
    started: str
    metadata: dict[str, str]
    stats: dict[str, Any]  # the service's own counters (its stats endpoint)
    requests: int  # requests its service endpoints answered


class ConsumerState(msgspec.Struct, kw_only=True):
    name: str
    pending: int  # not yet delivered: the consumer's lag
    ack_pending: int  # delivered, not yet acknowledged
    redelivered: int
    waiting: int  # pull requests waiting


class StreamState(msgspec.Struct, kw_only=True):
    stream: str
    key: str
    messages: int
    bytes: int
    consumers: list[ConsumerState]


async def gather_stats(nc: Client, namespace: str, *, wait: float = 0.4) -> list[Worker]:
    """Scatter-gather on ``$SRV.STATS``: every live instance answers with its stats."""
    out: list[Worker] = []
    for info in await discover_instances(nc, "STATS", namespace, wait=wait):
        meta = info.get("metadata") or {}
        endpoints = info.get("endpoints") or []
        stats: dict[str, Any] = {}
        for ep in endpoints:
            if ep.get("name") == "stats" and isinstance(ep.get("data"), dict):
                stats = ep["data"]
        out.append(
            Worker(
                service=str(info.get("name", "")).removeprefix(f"{namespace}-"),
                id=str(info.get("id", "")),
                instance=str(meta.get("instance", "")),
                version=str(info.get("version", "")),
                started=str(info.get("started", "")),
                metadata={str(k): str(v) for k, v in meta.items()},
                stats=stats,
                requests=sum(int(ep.get("num_requests") or 0) for ep in endpoints),
            )
        )
    out.sort(key=lambda w: (w.service, w.instance, w.id))
    return out


async def list_workers(request: web.Request) -> web.Response:
    rt = rt_of(request)
    workers = await gather_stats(rt.nc, rt.settings.namespace)
    service = request.query.get("service")
    if service:
        workers = [w for w in workers if w.service == service]
    return respond(workers)


async def stream_states(js: Any, names: Names) -> list[StreamState]:
    out = []
    for key in STREAM_KEYS:
        name = names.stream(key)
        try:
            info = await js.stream_info(name)
            consumers = await js.consumers_info(name)
        except (nats.js.errors.NotFoundError, nats.errors.TimeoutError):
            continue
        out.append(
            StreamState(
                stream=name,
                key=key,
                messages=info.state.messages,
                bytes=info.state.bytes,
                consumers=[
                    ConsumerState(
                        name=c.name,
                        pending=c.num_pending or 0,
                        ack_pending=c.num_ack_pending or 0,
                        redelivered=c.num_redelivered or 0,
                        waiting=c.num_waiting or 0,
                    )
                    for c in consumers
                ],
            )
        )
    return out


async def list_streams(request: web.Request) -> web.Response:
    rt = rt_of(request)
    return respond(await stream_states(rt.js, rt.names))


ROUTES = [
    Route(
        "GET",
        "/api/workers",
        list_workers,
        "Live instances of every service with stats",
        "workers",
        params=(Param("service", {"type": "string"}),),
        response=list[Worker],
    ),
    Route(
        "GET",
        "/api/streams",
        list_streams,
        "Queue depth and consumer lag per stream",
        "workers",
        response=list[StreamState],
    ),
]
