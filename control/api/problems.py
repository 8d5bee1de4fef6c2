"""Errors as ``application/problem+json`` (RFC 9457), mapped in one place."""

from __future__ import annotations

import logging
from typing import Any

import asyncpg
import msgspec
from aiohttp import web

from services.scheduler.operations import Conflict, NotFound
from shared.errors import SourceError, TrawlError

log = logging.getLogger("trawl.scheduler.api")

PROBLEM_TYPE = "application/problem+json"


class ProblemBody(msgspec.Struct, kw_only=True, omit_defaults=True):
    """An error response (RFC 9457)."""

    type: str = "about:blank"
    title: str
    status: int
    detail: str | None = None
    errors: list[str] | None = None


class Problem(TrawlError):
    """Raised by handlers; rendered by the middleware."""

    def __init__(
        self,
        status: int,
        title: str,
        detail: str | None = None,
        *,
        errors: list[str] | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(detail or title)
        self.body = ProblemBody(title=title, status=status, detail=detail, errors=errors)
        self.headers = headers or {}


def problem_response(status: int, title: str, detail: str | None = None, **kw: Any) -> web.Response:
    return render(Problem(status, title, detail, **kw))


def render(problem: Problem) -> web.Response:
    return web.Response(
        body=msgspec.json.encode(problem.body),
        status=problem.body.status,
        headers={"Content-Type": PROBLEM_TYPE, **problem.headers},
    )


@web.middleware
async def problems(request: web.Request, handler):
    try:
        return await handler(request)
    except Problem as exc:
        return render(exc)
    except NotFound as exc:
        return problem_response(404, "Not Found", str(exc))
    except Conflict as exc:
        return problem_response(409, "Conflict", str(exc))
    except SourceError as exc:
        lines = str(exc).splitlines()
        return problem_response(422, "Invalid source definition", str(exc), errors=lines)
    except asyncpg.ForeignKeyViolationError as exc:
        return problem_response(409, "Conflict", f"still referenced: {exc.detail or exc}")
    except asyncpg.UniqueViolationError as exc:
        return problem_response(409, "Conflict", f"already exists: {exc.detail or exc}")
    except asyncpg.DataError as exc:
        # e.g. a NUL byte or a number Postgres cannot store: the request follows the document
        # (JSON Schema cannot say "no NUL"), its content cannot be stored: 422, as semantics.
        return problem_response(422, "Unprocessable Content", f"invalid value: {exc}")
    except UnicodeError:
        return problem_response(400, "Bad Request", "text is not valid Unicode")
    except web.HTTPException as exc:
        if exc.status < 400:
            raise
        # Keep what the status needs (``Allow`` on a 405), not the plain-text body's type.
        kept = {k: v for k, v in exc.headers.items() if k.lower() in ("allow", "retry-after")}
        return problem_response(exc.status, exc.reason, exc.text or None, headers=kept)
    except Exception:
        log.exception(
            "API handler failed",
            extra={"action": "api_error", "path": request.path, "method": request.method},
        )
        return problem_response(500, "Internal Server Error", "see the scheduler's log")
