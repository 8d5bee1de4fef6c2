"""The route table: each resource module declares its routes once, with the parameters and
msgspec types that both the aiohttp router and the OpenAPI document are built from."""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import asyncpg
import msgspec
from aiohttp import web

from control.api.problems import Problem
from shared.nesting import MAX_DEPTH
from shared.service import DbRuntime

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]

RT_KEY = web.AppKey("rt", DbRuntime)
BIGINT_MAX = 2**63 - 1
_DIGITS = re.compile(r"[0-9]{1,20}", re.ASCII)


@dataclass(frozen=True)
class Param:
    name: str
    schema: dict[str, Any]
    description: str = ""
    required: bool = False
    location: str = "query"  # query | path


@dataclass(frozen=True)
class Route:
    """One operation. ``path`` is in OpenAPI form (``/api/jobs/{job_id}``), also valid for
    aiohttp; ``response`` is a msgspec type (``None``: 204 without a body)."""

    method: str
    path: str
    handler: Handler
    summary: str
    tag: str
    params: tuple[Param, ...] = ()
    body: Any = None
    body_required: bool = True
    response: Any = None
    status: int = 200
    errors: tuple[int, ...] = ()
    public: bool = False  # no token needed (health, documents, the dashboard shell)
    content_type: str = "application/json"
    extra_body_types: tuple[str, ...] = ()  # other accepted request media types (raw schema)
    # Responses other than the success and problem+json ones: (status, msgspec type).
    other: tuple[tuple[int, Any], ...] = ()
    operation_id: str = field(default="")

    @property
    def write(self) -> bool:
        return self.method not in ("GET", "HEAD")

    @property
    def op_id(self) -> str:
        return self.operation_id or self.handler.__name__


def path_params(route_path: str) -> list[str]:
    return [part[1:-1] for part in route_path.split("/") if part.startswith("{")]


# -- parameter schemas used across modules ----------------------------------------------------
ID = {"type": "integer", "minimum": 1, "maximum": BIGINT_MAX}
LIMIT = Param("limit", {"type": "integer", "minimum": 1, "maximum": 500, "default": 50})
OFFSET = Param("offset", {"type": "integer", "minimum": 0, "maximum": 10**9, "default": 0})
PAGING = (LIMIT, OFFSET)


# -- request helpers ---------------------------------------------------------------------------
def rt_of(request: web.Request) -> DbRuntime:
    return request.app[RT_KEY]


def pool_of(request: web.Request) -> asyncpg.Pool:
    """The API's database pool (the API process always opens one)."""
    pool = rt_of(request).pool
    assert pool is not None
    return pool


def path_id(request: web.Request, name: str) -> int:
    """A positive bigint path parameter; anything else is a 404 (no such object)."""
    raw = request.match_info[name]
    # ASCII digits only: ``isdigit`` takes "¹" (then ``int`` raises) and ``int`` reads "٣" as 3.
    if not _DIGITS.fullmatch(raw) or not 1 <= int(raw) <= BIGINT_MAX:
        raise Problem(404, "Not Found", f"no {name.removesuffix('_id')} {raw!r}")
    return int(raw)


def query_time(request: web.Request, name: str) -> datetime | None:
    """An RFC 3339 date-time query parameter (its shape is checked against the route table by
    ``params.py``); a well-formed time that does not exist (month 13, year 0) is a 422."""
    raw = request.query.get(name)
    if raw is None:
        return None
    try:
        return datetime.fromisoformat(raw.upper())
    except ValueError:
        raise Problem(422, "Unprocessable Content", f"{name}: no such time: {raw!r}") from None


def query_int(
    request: web.Request, name: str, default: int | None, *, lo: int = 0, hi: int = BIGINT_MAX
) -> int | None:
    raw = request.query.get(name)
    if raw is None or raw == "":
        return default
    if not _DIGITS.fullmatch(raw.removeprefix("-")):
        raise Problem(400, "Bad Request", f"{name}: expected an integer, got {raw[:40]!r}")
    value = int(raw)
    if not lo <= value <= hi:
        raise Problem(400, "Bad Request", f"{name}: must be between {lo} and {hi}")
    return value


def query_str(request: web.Request, name: str) -> str | None:
    raw = request.query.get(name)
    return raw if raw else None


def paging(request: web.Request) -> tuple[int, int]:
    limit = query_int(request, "limit", 50, lo=1, hi=500)
    offset = query_int(request, "offset", 0, lo=0, hi=10**9)
    assert limit is not None and offset is not None
    return limit, offset


async def read_body(request: web.Request, body_type: Any, *, optional: bool = False) -> Any:
    """Decode and validate a JSON body with msgspec; errors become a 422 problem.

    ``optional``: no body at all gives None. A JSON ``null`` is still a body, and the document
    does not allow it."""
    raw = await request.read()
    if optional and not raw.strip():
        return None
    try:
        return msgspec.json.decode(raw or b"null", type=body_type)
    except msgspec.ValidationError as exc:
        raise Problem(422, "Unprocessable Content", f"invalid body: {exc}") from None
    except msgspec.DecodeError as exc:
        raise Problem(400, "Bad Request", f"body is not valid JSON: {exc}") from None
    except RecursionError:  # msgspec recurses into unknown fields too
        raise Problem(400, "Bad Request", f"body nested deeper than {MAX_DEPTH} levels") from None


_encoder = msgspec.json.Encoder(decimal_format="string")


def respond(data: Any, status: int = 200) -> web.Response:
    if data is None:
        return web.Response(status=204)
    return web.Response(body=_encoder.encode(data), status=status, content_type="application/json")
