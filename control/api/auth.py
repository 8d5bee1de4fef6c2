"""Bearer-token auth: a read-write token (``TRAWL_API_TOKEN``) and an optional read-only one.

No token configured → the API is open (a local stack). Missing or wrong token → 401; the
read-only token on a write → 403. Tokens are compared in constant time.
"""

from __future__ import annotations

import hmac
from dataclasses import dataclass

from aiohttp import web

from control.api.problems import problem_response
from shared.settings import Settings


@dataclass(frozen=True)
class Auth:
    token: str = ""
    read_token: str = ""

    @classmethod
    def from_settings(cls, settings: Settings) -> Auth:
        # TRAWL_API_READ_TOKEN: read via getattr until shared/settings.py carries it.
        return cls(settings.api_token, getattr(settings, "api_read_token", "") or "")

    def level(self, header: str) -> str | None:
        """'write', 'read' or None for an Authorization header value."""
        scheme, _, given = header.partition(" ")
        if scheme.lower() != "bearer" or not given.strip():
            return None
        raw = given.strip().encode()
        # Compare against both tokens every time, so timing says nothing about which matched.
        write = hmac.compare_digest(raw, self.token.encode())
        read = bool(self.read_token) and hmac.compare_digest(raw, self.read_token.encode())
        if write:
            return "write"
        return "read" if read else None


AUTH_KEY = web.AppKey("auth", Auth)
# (method, canonical path) of the routes that need no token.
PUBLIC_KEY = web.AppKey("public", frozenset)


def _is_write(request: web.Request) -> bool:
    return request.method not in ("GET", "HEAD", "OPTIONS")


@web.middleware
async def auth(request: web.Request, handler):
    conf: Auth = request.app[AUTH_KEY]
    route = request.match_info.route.resource
    canonical = route.canonical if route is not None else ""
    if not conf.token or (request.method, canonical) in request.app[PUBLIC_KEY]:
        return await handler(request)
    level = conf.level(request.headers.get("Authorization", ""))
    if level is None:
        return problem_response(
            401,
            "Unauthorized",
            "missing or wrong bearer token",
            headers={"WWW-Authenticate": 'Bearer realm="trawl"'},
        )
    if level == "read" and _is_write(request):
        return problem_response(403, "Forbidden", "the read-only token cannot change anything")
    return await handler(request)
