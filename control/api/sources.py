"""Sources: list, get, create or replace, delete, and validate without saving."""

from __future__ import annotations

from typing import Any

import msgspec
from aiohttp import web

from control.api.problems import Problem
from control.api.routes import Param, Route, pool_of, respond
from control.sources import apply_source, remove_source
from schemas.read import SourceOut
from schemas.source import Source
from services.scheduler.catalog import get_source, list_sources
from services.scheduler.operations import NotFound
from shared.errors import SourceError
from shared.nesting import MAX_DEPTH
from shared.sources import RefusedDocument, load_source_text, source_from_dict, source_to_dict

YAML_TYPES = ("application/yaml", "text/yaml", "text/plain")


class Validation(msgspec.Struct, kw_only=True):
    valid: bool
    errors: list[str]
    source: Source | None = None


async def list_all(request: web.Request) -> web.Response:
    async with pool_of(request).acquire() as conn:
        return respond(await list_sources(conn))


async def get_one(request: web.Request) -> web.Response:
    name = request.match_info["name"]
    async with pool_of(request).acquire() as conn:
        found = await get_source(conn, name)
    if found is None:
        raise NotFound(f"source {name!r} not found")
    return respond(found)


async def _definition(request: web.Request) -> dict[str, Any]:
    try:
        data = msgspec.json.decode(await request.read() or b"null")
    except msgspec.DecodeError as exc:
        raise Problem(400, "Bad Request", f"body is not valid JSON: {exc}") from None
    except RecursionError:  # what survives decoding is bounded again by source_from_dict
        raise Problem(400, "Bad Request", f"body nested deeper than {MAX_DEPTH} levels") from None
    if not isinstance(data, dict):
        raise Problem(422, "Invalid source definition", "expected a JSON object")
    return data


async def _save(request: web.Request, data: dict[str, Any]) -> web.Response:
    source = source_from_dict(data)  # SourceError → 422 with every problem listed
    async with pool_of(request).acquire() as conn:
        created = (await apply_source(conn, source)).created
        saved = await get_source(conn, source.name, with_running_job=False)
    return respond(saved, 201 if created else 200)


async def create(request: web.Request) -> web.Response:
    return await _save(request, await _definition(request))


async def replace(request: web.Request) -> web.Response:
    name = request.match_info["name"]
    data = await _definition(request)
    data.setdefault("name", name)
    if data["name"] != name:
        raise Problem(422, "Invalid source definition", f"name {data['name']!r} != {name!r}")
    return await _save(request, data)


async def delete(request: web.Request) -> web.Response:
    name = request.match_info["name"]
    async with pool_of(request).acquire() as conn:
        # As `trawl source delete`: its schedules go with it; a source with jobs is a 409.
        deleted = await remove_source(conn, name)
    if not deleted:
        raise NotFound(f"source {name!r} not found")
    return respond(None)


async def validate(request: web.Request) -> web.Response:
    """Check a definition (JSON object, or YAML text) and report every problem; saves nothing."""
    mime = request.content_type
    raw = await request.read()
    try:
        if mime in YAML_TYPES:
            source = load_source_text(raw.decode("utf-8", "replace"), filename="<body>")
        else:
            source = load_source_text(
                raw.decode("utf-8", "replace") or "null", fmt="json", filename="<body>"
            )
    except RefusedDocument as exc:  # not looked at, so not "invalid": refused
        raise Problem(422, "Document refused", str(exc)) from None
    except SourceError as exc:
        return respond(Validation(valid=False, errors=str(exc).splitlines()))
    except UnicodeError:
        # YAML escapes can spell lone surrogates, which no text field may hold.
        return respond(Validation(valid=False, errors=["text is not valid Unicode"]))
    # Round-trip through the stored form, as save would.
    source = source_from_dict(source_to_dict(source))
    return respond(Validation(valid=True, errors=[], source=source))


_NAME = (Param("name", {"type": "string", "minLength": 1}, "source name", True, "path"),)

ROUTES = [
    Route("GET", "/api/sources", list_all, "List sources", "sources", response=list[SourceOut]),
    Route(
        "POST",
        "/api/sources",
        create,
        "Create or replace a source (201 when new)",
        "sources",
        body=Source,
        response=SourceOut,
        other=((201, SourceOut),),
        errors=(400, 422),
    ),
    Route(
        "POST",
        "/api/sources/validate",
        validate,
        "Validate a definition without saving",
        "sources",
        # Any document: checking it is the point, and a wrong one is answered ``valid: false``
        # (422 only for a document refused unread: too deep, an alias bomb, control bytes).
        body=Any,
        body_required=False,  # an empty body is reported as an empty definition
        response=Validation,
        extra_body_types=YAML_TYPES,
        errors=(422,),
    ),
    Route(
        "GET",
        "/api/sources/{name}",
        get_one,
        "One source",
        "sources",
        params=_NAME,
        response=SourceOut,
        errors=(404,),
    ),
    Route(
        "PUT",
        "/api/sources/{name}",
        replace,
        "Create or replace a source (201 when new)",
        "sources",
        params=_NAME,
        body=Source,
        response=SourceOut,
        other=((201, SourceOut),),
        errors=(400, 422),
    ),
    Route(
        "DELETE",
        "/api/sources/{name}",
        delete,
        "Delete a source without jobs or schedules",
        "sources",
        params=_NAME,
        errors=(404, 409),
    ),
]
