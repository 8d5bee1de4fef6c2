"""Payloads: list, metadata, the decompressed body, the latest for a URL, and a diff of two.

control/payload_index.py reads the metadata (through the scheduler's store) and makes the diff;
bodies come from the payload store.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from aiohttp import web

from control import payload_index
from control.api.problems import Problem
from control.api.routes import (
    ID,
    PAGING,
    Param,
    Route,
    paging,
    pool_of,
    query_int,
    query_str,
    respond,
    rt_of,
)
from services.scheduler.operations import NotFound
from shared.payloads import JetStreamPayloadStore, PayloadNotFound

Record = dict[str, Any]


def _plain(value: Any) -> Any:
    """Records and mappings as plain dicts (msgspec encodes those, dates included)."""
    if isinstance(value, Mapping) or hasattr(value, "items"):
        return {k: _plain(v) for k, v in dict(value).items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


def _ref(request: web.Request) -> str:
    ref = request.match_info["ref"]
    kind, _, digest = ref.partition(":")
    if kind not in ("js", "obj") or not digest:
        raise NotFound(f"payload {ref!r} not found")
    return ref


async def list_payloads(request: web.Request) -> web.Response:
    limit, offset = paging(request)
    job_id = query_int(request, "job_id", None, lo=1)
    async with pool_of(request).acquire() as conn:
        rows = await payload_index.list_payloads(
            conn, url=query_str(request, "url"), job_id=job_id, limit=limit, offset=offset
        )
    return respond(_plain(list(rows)))


async def latest(request: web.Request) -> web.Response:
    url = query_str(request, "url")
    if url is None:
        raise Problem(400, "Bad Request", "url: required")
    async with pool_of(request).acquire() as conn:
        row = await payload_index.latest_payload(conn, url)
    if row is None:
        raise NotFound(f"no payload for {url}")
    return respond(_plain(row))


async def meta(request: web.Request) -> web.Response:
    ref = _ref(request)
    async with pool_of(request).acquire() as conn:
        row = await payload_index.payload_meta(conn, ref)
    if row is None:
        raise NotFound(f"payload {ref} not found")
    return respond(_plain(row))


async def data(request: web.Request) -> web.Response:
    rt = rt_of(request)
    ref = _ref(request)
    async with pool_of(request).acquire() as conn:
        row = await payload_index.payload_meta(conn, ref)
    if row is None:
        raise NotFound(f"payload {ref} not found")
    try:
        body = await JetStreamPayloadStore(rt.js, rt.names).get(ref)
    except PayloadNotFound as exc:
        raise NotFound(str(exc)) from None
    content_type = _plain(row).get("content_type") or "application/octet-stream"
    # Never let a stored page run as HTML on the API's origin.
    return web.Response(
        body=body,
        headers={
            "Content-Type": content_type,
            "Content-Security-Policy": "sandbox",
            "X-Content-Type-Options": "nosniff",
        },
    )


async def diff(request: web.Request) -> web.Response:
    a, b = query_str(request, "a"), query_str(request, "b")
    if not a or not b:
        raise Problem(400, "Bad Request", "a and b: two payload references are required")
    rt = rt_of(request)
    store = JetStreamPayloadStore(rt.js, rt.names)
    async with pool_of(request).acquire() as conn:
        try:
            result = await payload_index.diff_payloads(store, conn, a, b)
        except (PayloadNotFound, payload_index.PayloadIndexError) as exc:
            raise NotFound(str(exc)) from None
    if isinstance(result, str):
        result = {"a": a, "b": b, "diff": result}
    return respond(_plain(result))


_REF = (Param("ref", {"type": "string", "minLength": 1}, "js:<sha256>", True, "path"),)
_OBJ = dict[str, Any]

ROUTES = [
    Route(
        "GET",
        "/api/payloads",
        list_payloads,
        "Stored payloads (newest first)",
        "payloads",
        params=(Param("url", {"type": "string"}), Param("job_id", ID), *PAGING),
        response=list[_OBJ],
        errors=(400,),
    ),
    Route(
        "GET",
        "/api/payloads/latest",
        latest,
        "The latest payload of a URL",
        "payloads",
        params=(Param("url", {"type": "string", "minLength": 1}, required=True),),
        response=_OBJ,
        errors=(400, 404),
    ),
    Route(
        "GET",
        "/api/payloads/diff",
        diff,
        "Diff two payloads of a page",
        "payloads",
        params=(
            Param("a", {"type": "string", "minLength": 1}, required=True),
            Param("b", {"type": "string", "minLength": 1}, required=True),
        ),
        response=_OBJ,
        errors=(400, 404),
    ),
    Route(
        "GET",
        "/api/payloads/{ref}",
        meta,
        "A payload's metadata",
        "payloads",
        params=_REF,
        response=_OBJ,
        errors=(404,),
    ),
    Route(
        "GET",
        "/api/payloads/{ref}/data",
        data,
        "A payload's body, decompressed",
        "payloads",
        params=_REF,
        content_type="*/*",
        errors=(404,),
    ),
]
