"""Exports as streamed downloads: a source's products or history as CSV, JSON Lines or Parquet
(``control/export.py`` encodes), one route per format so each documents its media type. Rows
leave in batches as the database cursor yields them: memory stays flat at a million rows."""

from __future__ import annotations

from aiohttp import web

from control import export
from control.api.problems import Problem
from control.api.routes import Param, Route, pool_of, query_str, query_time
from services.scheduler import store as scheduler_store
from services.scheduler.operations import NotFound


def _history(request: web.Request) -> bool:
    raw = (query_str(request, "history") or "false").lower()
    if raw not in ("true", "false", "1", "0", "yes", "no"):
        raise Problem(400, "Bad Request", f"history: expected true or false, got {raw!r}")
    return raw in ("true", "1", "yes")


def _handler(fmt: str):
    async def download(request: web.Request) -> web.StreamResponse:
        source = request.match_info["source"]
        since, history = query_time(request, "since"), _history(request)
        try:
            export.check_format(fmt)
        except export.ExportError as exc:
            raise Problem(501, "Not Implemented", str(exc)) from None
        async with pool_of(request).acquire() as conn:
            if not await scheduler_store.sources.exists(conn, source):
                raise NotFound(f"source {source!r} not found")
            resp = web.StreamResponse(
                headers={
                    "Content-Type": export.MEDIA_TYPES[fmt],
                    "Content-Disposition": "attachment; filename="
                    + export.filename(source, fmt, history=history),
                }
            )
            resp.enable_chunked_encoding()
            await resp.prepare(request)
            async with conn.transaction(readonly=True):
                async for chunk in export.chunks(conn, source, fmt, history=history, since=since):
                    if chunk:
                        await resp.write(chunk)
            await resp.write_eof()
        return resp

    download.__name__ = f"export_{fmt}"
    return download


_PARAMS = (
    Param("source", {"type": "string", "minLength": 1}, required=True, location="path"),
    Param("history", {"type": "boolean", "default": False}, "every snapshot, not the products"),
    Param("since", {"type": "string", "format": "date-time"}, "changed or seen since"),
)

ROUTES = [
    Route(
        "GET",
        f"/api/export/{{source}}/{fmt}",
        _handler(fmt),
        f"A source's products (or history) as a streamed {fmt} download",
        "exports",
        params=_PARAMS,
        content_type=export.MEDIA_TYPES[fmt].split(";")[0],
        errors=(400, 404, 422, *((501,) if fmt == "parquet" else ())),
    )
    for fmt in export.FORMATS
]
