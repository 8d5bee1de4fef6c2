"""Every request a rendered page makes passes here, and only here.

The browser never touches the network: each request is blocked, aborted, or fetched by trawl's
own client (the SSRF guard on every hop, its checked address pinned, proxies, caps) and its
answer handed to the browser. So a page cannot make trawl reach a forbidden address, whatever
its scripts do: fetch(), images, iframes, redirects or websockets.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from playwright.async_api import Route, WebSocketRoute
from yarl import URL

from schemas.messages import RenderPolicy
from services.fetcher.http import Response

log = logging.getLogger("trawl.renderer.gate")

# Hosts of analytics and ad trackers, blocked by default with their subdomains: they never
# carry a product, and they are the requests most likely to be noticed.
TRACKERS = frozenset(
    {
        "google-analytics.com",
        "googletagmanager.com",
        "googleadservices.com",
        "doubleclick.net",
        "googlesyndication.com",
        "facebook.net",
        "connect.facebook.com",
        "hotjar.com",
        "clarity.ms",
        "segment.io",
        "segment.com",
        "mixpanel.com",
        "bat.bing.com",
        "criteo.com",
        "criteo.net",
        "taboola.com",
        "outbrain.com",
        "newrelic.com",
        "nr-data.net",
        "sentry.io",
        "tiktok.com",
        "snapchat.com",
        "pinterest.com",
    }
)

# Request headers Chromium reports that are not the request's own to forward.
_DROPPED = frozenset({"host", "connection", "content-length", "transfer-encoding", "keep-alive"})
# Response headers that no longer describe the body trawl hands over (decoded, whole).
_STALE = frozenset({"content-encoding", "content-length", "transfer-encoding", "connection"})

Fetch = Callable[[str, str, dict[str, str], bytes | None, int, float], Awaitable[Response]]
Allowed = Callable[[str], Awaitable[bool]]


@dataclass
class Tally:
    """What one page asked for, reported with the render."""

    requests: int = 0  # fetched for the page (the document excluded)
    bytes: int = 0
    blocked: int = 0  # by type or tracker host
    refused: list[str] = field(default_factory=list)  # unsafe targets (the SSRF guard)
    disallowed: int = 0  # by robots.txt
    capped: int = 0  # over max_requests or max_bytes
    failed: int = 0


class Gate:
    """The request policy of one page render."""

    def __init__(
        self,
        *,
        page_url: str,
        document: Response,
        policy: RenderPolicy,
        fetch: Fetch,
        robots_allow: Allowed,
        same_site_in_flight: int,
        deadline: float,
    ) -> None:
        self.page = URL(page_url)
        self.document = document
        self.policy = policy
        self.fetch = fetch
        self.robots_allow = robots_allow
        self.deadline = deadline
        self.tally = Tally()
        self._document_served = False
        self._same_site = asyncio.Semaphore(max(1, same_site_in_flight))
        self._blocked_hosts = TRACKERS | {h.lower() for h in policy.block_hosts}
        self._in_flight = 0
        self._last_activity = time.monotonic()

    # -- interception ---------------------------------------------------------------------
    async def route(self, route: Route) -> None:
        request = route.request
        url = request.url
        if not self._document_served and request.is_navigation_request() and self._is_page(url):
            self._document_served = True
            await self._fulfil(route, self.document)
            return
        if request.is_navigation_request() and request.frame.parent_frame is None:
            # The page navigating itself away (location = ...): one render is one page.
            await route.abort("blockedbyclient")
            return
        target = URL(url)
        if target.scheme not in ("http", "https"):
            await route.abort("blockedbyclient")
            return
        if request.resource_type in self.policy.block or self._tracker(target.host or ""):
            self.tally.blocked += 1
            await route.abort("blockedbyclient")
            return
        if self.tally.requests >= self.policy.max_requests:
            self.tally.capped += 1
            await route.abort("blockedbyclient")
            return
        self.tally.requests += 1
        self._in_flight += 1
        self._last_activity = time.monotonic()
        try:
            await self._forward(route, target)
        finally:
            self._in_flight -= 1
            self._last_activity = time.monotonic()

    async def websocket(self, ws: WebSocketRoute) -> None:
        """No websocket reaches anything: there is no guarded client for them."""
        self.tally.blocked += 1
        await ws.close(code=1008, reason="blocked by the renderer")

    async def _forward(self, route: Route, target: URL) -> None:
        request = route.request
        same_site = target.origin() == self.page.origin()
        if same_site and not await self.robots_allow(str(target)):
            self.tally.disallowed += 1
            await route.abort("blockedbyclient")
            return
        remaining_bytes = self.policy.max_bytes - self.tally.bytes
        remaining_time = self.deadline - time.monotonic()
        if remaining_bytes <= 0 or remaining_time <= 0:
            self.tally.capped += 1
            await route.abort("blockedbyclient")
            return
        headers = {
            k: v for k, v in (await request.all_headers()).items() if k.lower() not in _DROPPED
        }
        body = request.post_data_buffer
        if same_site:  # the site's pace: at most its in-flight slots at a time
            async with self._same_site:
                response = await self.fetch(
                    str(target), request.method, headers, body, remaining_bytes, remaining_time
                )
        else:
            response = await self.fetch(
                str(target), request.method, headers, body, remaining_bytes, remaining_time
            )
        if response.outcome == "unsafe_url":
            self.tally.refused.append(str(target))
            log.warning(
                "render: request refused",
                extra={"action": "render_refused", "url": str(target), "error": response.error},
            )
            await route.abort("blockedbyclient")
            return
        if response.status is None:
            self.tally.failed += 1
            await route.abort("failed")
            return
        self.tally.bytes += len(response.body or b"")
        await self._fulfil(route, response)

    async def _fulfil(self, route: Route, response: Response) -> None:
        headers = {k: v for k, v in response.headers.items() if k.lower() not in _STALE}
        await route.fulfill(
            status=response.status or 200, headers=headers, body=bytes(response.body or b"")
        )

    # -- helpers ----------------------------------------------------------------------------
    def _is_page(self, url: str) -> bool:
        return URL(url).with_fragment(None) == self.page.with_fragment(None)

    def _tracker(self, host: str) -> bool:
        host = host.lower()
        return any(host == h or host.endswith("." + h) for h in self._blocked_hosts)

    async def settled(self, quiet: float = 0.5) -> None:
        """Return once no request has been in flight for ``quiet`` seconds from now (or the
        deadline passed): the page's own "network idle", which also covers requests that a
        script or a click has started but the browser has not handed over yet."""
        self._last_activity = max(self._last_activity, time.monotonic())
        while time.monotonic() < self.deadline:
            idle_for = time.monotonic() - self._last_activity
            if self._in_flight == 0 and idle_for >= quiet:
                return
            await asyncio.sleep(min(0.05, max(0.0, quiet - idle_for)) or 0.05)
