"""Query parameters checked against the schemas the route table declares (and the OpenAPI
document publishes), before any handler runs: the document and the server cannot disagree.

Only the keywords the route table uses are understood (type integer/string/boolean, enum,
minimum, maximum, minLength, maxLength, pattern, format date-time); a schema with another
keyword fails at start-up, not silently at request time. Every problem is reported at once,
as a 400.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from aiohttp import web
from multidict import MultiMapping

from control.api.problems import Problem
from control.api.routes import Handler, Param, Route

KNOWN = frozenset(
    {
        "type",
        "enum",
        "minimum",
        "maximum",
        "minLength",
        "maxLength",
        "default",
        "description",
        "format",
        "pattern",
    }
)
FORMATS = frozenset({"date-time"})
# ASCII only: ``str.isdigit`` and ``int`` accept "¹", "٣" and "1_0", which the schema does not.
INTEGER_RE = re.compile(r"-?[0-9]{1,20}", re.ASCII)
BOOLEANS = {"true": True, "false": False}
DATE_TIME_RE = re.compile(
    r"[0-9]{4}-[0-9]{2}-[0-9]{2}[Tt][0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]+)?([Zz]|[+-][0-9]{2}:[0-9]{2})",
    re.ASCII,
)


def checked(route: Route) -> Handler:
    """The route's handler behind a check of its declared query parameters."""
    query = [p for p in route.params if p.location == "query"]
    for p in query:
        if unknown := set(p.schema) - KNOWN:
            raise ValueError(f"{route.method} {route.path}: {p.name}: unsupported {unknown}")
        if p.schema.get("format", "date-time") not in FORMATS:
            raise ValueError(f"{route.method} {route.path}: {p.name}: unsupported format")
    handler = route.handler
    if not query:
        return handler

    async def handle(request: web.Request) -> web.StreamResponse:
        errors = list(problems(query, request.query))
        if errors:
            raise Problem(400, "Bad Request", "; ".join(errors), errors=errors)
        return await handler(request)

    handle.__name__ = handler.__name__
    return handle


def problems(params: list[Param], query: MultiMapping[str]) -> Iterator[str]:
    for p in params:
        values = query.getall(p.name, [])
        if not values:
            if p.required:
                yield f"{p.name}: required"
            continue
        if len(values) > 1:
            yield f"{p.name}: given {len(values)} times, expected once"
            continue
        if msg := _invalid(p.schema, values[0]):
            yield f"{p.name}: {msg}"


def _is_date_time(raw: str) -> bool:
    """RFC 3339's shape (``2026-01-02T03:04:05Z``, an offset, lower-case t and z allowed). A
    well-formed time that does not exist (month 13, year 0) is the handler's 422."""
    return DATE_TIME_RE.fullmatch(raw) is not None


def _invalid(schema: dict[str, Any], raw: str) -> str | None:
    kind = schema.get("type", "string")
    value: Any = raw
    if kind == "integer":
        if not INTEGER_RE.fullmatch(raw):
            return f"expected an integer, got {raw[:40]!r}"
        value = int(raw)
        if "minimum" in schema and value < schema["minimum"]:
            return f"must be ≥ {schema['minimum']}"
        if "maximum" in schema and value > schema["maximum"]:
            return f"must be ≤ {schema['maximum']}"
    elif kind == "boolean":
        if raw not in BOOLEANS:
            return f"expected true or false, got {raw[:40]!r}"
        value = BOOLEANS[raw]
    elif kind == "string":
        if len(raw) < schema.get("minLength", 0):
            return f"must be at least {schema['minLength']} characters"
        if "maxLength" in schema and len(raw) > schema["maxLength"]:
            return f"must be at most {schema['maxLength']} characters"
        if "pattern" in schema and not re.search(schema["pattern"], raw):
            return f"does not match {schema['pattern']}"
        if schema.get("format") == "date-time" and not _is_date_time(raw):
            return f"expected an RFC 3339 date-time, got {raw[:40]!r}"
    else:
        raise ValueError(f"unsupported parameter type {kind!r}")
    if "enum" in schema and value not in schema["enum"]:
        return f"one of {', '.join(map(str, schema['enum']))}, got {raw[:40]!r}"
    return None
