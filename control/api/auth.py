"""Bearer-token auth: a read-write token (``TRAWL_API_TOKEN``) and an optional read-only one
(``TRAWL_API_READ_TOKEN``).

It fails closed. No token configured → the API is open (a local stack). Once either token is
set every non-public route needs a token: missing or wrong → 401, the read-only token on a
write → 403. With only the read-only token set, writes are refused to everyone (403) until a
write token is set: a read token never grants more than reads. Tokens are compared in constant
time.
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
        return cls(settings.api_token, settings.api_read_token)

    @property
    def enabled(self) -> bool:
        return bool(self.token or self.read_token)

    def level(self, header: str) -> str | None:
        """'write', 'read' or None for an Authorization header value."""
        scheme, _, given = header.partition(" ")
        if scheme.lower() != "bearer" or not given.strip():
            return None
        raw = given.strip().encode()
        # Compare against both tokens every time, so timing says nothing about which matched;
        # an unset token matches nothing (not even an empty one).
        write = hmac.compare_digest(raw, self.token.encode()) and bool(self.token)
        read = hmac.compare_digest(raw, self.read_token.encode()) and bool(self.read_token)
        if write:
            return "write"
        return "read" if read else None


AUTH_KEY = web.AppKey("auth", Auth)
# (method, canonical path) of the routes that need no token.
PUBLIC_KEY = web.AppKey("public", frozenset)


def _is_write(request: web.Request) -> bool:
    return request.method not in ("GET", "HEAD", "OPTIONS")


def is_public(request: web.Request) -> bool:
    route = request.match_info.route.resource
    canonical = route.canonical if route is not None else ""
    # HEAD is GET without the body: public when the GET is.
    method = "GET" if request.method == "HEAD" else request.method
    return (method, canonical) in request.app[PUBLIC_KEY]


@web.middleware
async def auth(request: web.Request, handler):
    conf: Auth = request.app[AUTH_KEY]
    # The router's own 404/405 (no such route or method) says nothing a token protects.
    routed = request.match_info.http_exception is None
    if not conf.enabled or not routed or is_public(request):
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
        detail = (
            "the read-only token cannot change anything"
            if conf.token
            else "writes are disabled: no write token (TRAWL_API_TOKEN) is configured"
        )
        return problem_response(403, "Forbidden", detail)
    return await handler(request)
