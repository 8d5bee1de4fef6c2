"""Which methods a path allows, from the route table: a 405 with an exact ``Allow``.

aiohttp falls through to the next matching resource, so ``GET /api/dlq/purge`` reached
``GET /api/dlq/{seq}`` (a 404 "no seq 'purge'") and ``OPTIONS /api/dlq/purge`` advertised
``GET`` and ``DELETE``. The path a client addressed is the most literal template that matches
it (fewest parameters); a method it does not list is a 405 naming only its methods.
"""

from __future__ import annotations

import re

from aiohttp import web

from control.api.routes import Route

ALLOW_KEY = web.AppKey("allow", list)


def allow_table(routes: list[Route]) -> list[tuple[re.Pattern[str], str]]:
    """(path pattern, ``Allow`` value), most literal templates first."""
    by_path: dict[str, set[str]] = {}
    for r in routes:
        methods = by_path.setdefault(r.path, set())
        methods.add(r.method)
        if r.method == "GET":
            methods.add("HEAD")
    ordered = sorted(by_path, key=lambda path: path.count("{"))
    return [(_pattern(path), ",".join(sorted(by_path[path]))) for path in ordered]


def _pattern(path: str) -> re.Pattern[str]:
    parts = re.split(r"(\{[^}]+\})", path)
    return re.compile("".join("[^/]+" if p.startswith("{") else re.escape(p) for p in parts))


@web.middleware
async def allow(request: web.Request, handler):
    for pattern, methods in request.app[ALLOW_KEY]:
        if pattern.fullmatch(request.path):
            if request.method not in methods.split(","):
                raise web.HTTPMethodNotAllowed(request.method, methods.split(","))
            break
    return await handler(request)
