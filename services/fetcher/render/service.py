"""Renderer: fetch work of rendering sources → the document fetched as the fetcher fetches it →
the page loaded in headless Chromium → its DOM stored as the payload → a fetch result.

A renderer is a fetcher whose responses are rendered before they are stored: pacing, the host
slot, robots.txt, identities, proxies and the SSRF guard of the main document are the
fetcher's own code. The page's subrequests go through ``render.gate``. The parser cannot tell a
rendered payload from a fetched one.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Coroutine
from typing import Any

import msgspec
from multidict import CIMultiDict

from schemas.messages import FetchResult, FetchWork, RenderPolicy
from services.fetcher.http import Response, Transport, request
from services.fetcher.identity import Identity
from services.fetcher.proxies import Proxy, ProxyPool
from services.fetcher.render.browser import BrowserPool, RenderSettings
from services.fetcher.render.decide import Learnt, shows_content
from services.fetcher.render.gate import Gate
from services.fetcher.render.page import RenderFailed, render_in
from services.fetcher.service import Fetcher, _span_attrs
from shared.channels import RENDER_WORK
from shared.errors import Retry
from shared.service import Runtime

log = logging.getLogger("trawl.renderer")

HTML_TYPES = frozenset({"text/html", "application/xhtml+xml"})
SUBREQUEST_REDIRECTS = 5


class Renderer(Fetcher):
    def __init__(self, rt: Runtime, chromium: BrowserPool, proxies: ProxyPool | None = None):
        super().__init__(rt, proxies)
        self.chromium = chromium
        self._screenshots: dict[str, str] = {}
        count = rt.metrics.counter
        self.rendered = count(
            "trawl.renderer.pages", "Pages rendered.", unit="{page}", stat="rendered"
        )
        self.plain = count(
            "trawl.renderer.plain",
            "Pages of render: auto sources stored as fetched (their document showed content).",
            unit="{page}",
            stat="plain",
        )
        self.learnt = Learnt()
        self.refused = count(
            "trawl.renderer.refused",
            "Requests of rendered pages refused by the SSRF guard.",
            unit="{request}",
            stat="refused",
        )

    async def fetch(self, work: FetchWork) -> FetchResult:
        policy = work.policy
        if policy.render is not None and policy.user_agent is None:
            # One identity for the document and everything the page loads: the browser's.
            agent = await self.chromium.user_agent()
            work = msgspec.structs.replace(
                work, policy=msgspec.structs.replace(policy, user_agent=agent)
            )
        return await super().fetch(work)

    async def finish(
        self,
        work: FetchWork,
        resp: Response,
        identity: Identity,
        proxy: Proxy | None,
        transport: Transport,
    ) -> Response:
        render_policy = work.policy.render
        if render_policy is None or resp.outcome != "ok" or resp.body is None:
            return resp
        if resp.content_type not in HTML_TYPES:
            return resp  # a PDF or a feed: stored as it came
        learnt_key = f"{work.attempt.source}:{work.domain}"
        plain_content: bool | None = None
        why = "policy"  # render: true
        if render_policy.auto:
            why = "learnt"  # the domain's pages are known to need a browser
            if not self.learnt.needs_browser(learnt_key):
                plain_content = shows_content(resp.body)
                if plain_content:
                    self.plain.add()
                    return resp  # the document shows what the parser needs: stored as fetched
                why = "shell"  # the document shows neither a product nor a listing
        try:
            rendered = await self._render(work, resp, proxy, transport, render_policy, why)
        except RenderFailed as exc:
            return Response(exc.outcome, resp.url, error=str(exc), elapsed_ms=resp.elapsed_ms)
        if plain_content is False and rendered.body and shows_content(rendered.body):
            self.learnt.remember(learnt_key)  # scripts build this site's pages
        return rendered

    async def _render(
        self,
        work: FetchWork,
        document: Response,
        proxy: Proxy | None,
        transport: Transport,
        policy: RenderPolicy,
        why: str,
    ) -> Response:
        """The page's requests go through ``transport``, the session that fetched the
        document: one identity (TLS, HTTP/2, cookies) for the page and everything it loads.
        ``why`` it is rendered goes into the log: ``policy``, ``shell`` or ``learnt``."""
        fetch_policy = work.policy
        allow, resolver = self.guard_for(fetch_policy)

        async def fetch(
            url: str,
            method: str,
            headers: dict[str, str],
            body: bytes | None,
            max_bytes: int,
            timeout: float,
        ) -> Response:
            return await request(
                transport,
                url,
                headers=headers,
                allow=allow,
                timeout=min(timeout, fetch_policy.timeout),
                max_bytes=min(max_bytes, fetch_policy.max_bytes),
                max_redirects=SUBREQUEST_REDIRECTS,
                accept_types=None,
                proxy=proxy,
                resolver=resolver,
                method=method,
                body=body,
            )

        async def robots_allow(url: str) -> bool:
            if not fetch_policy.robots:
                return True
            try:
                robots = await self._robots_for(fetch_policy)
                return (await robots.check(url, fetch_policy.user_agent)).allowed
            except ValueError:
                return False

        gate = Gate(
            page_url=document.url,
            document=document,
            policy=policy,
            fetch=fetch,
            robots_allow=robots_allow,
            same_site_in_flight=fetch_policy.max_in_flight,
            deadline=time.monotonic() + policy.timeout,
        )
        try:
            page = await render_in(
                self.chromium,
                gate,
                document.url,
                policy,
                locale=fetch_policy.locale,
                user_agent=fetch_policy.user_agent,
            )
        except RenderFailed:
            raise
        except Exception as exc:
            # The browser died under the page: the work is redelivered to a fresh one.
            log.warning(
                "render: browser failed",
                extra={"action": "render_crash", "url": document.url, "error": str(exc)[:300]},
            )
            raise Retry(f"renderer: browser failed: {exc}", delay=1.0) from exc
        self.rendered.add()
        if gate.tally.refused:
            self.refused.add(len(gate.tally.refused))
        if page.screenshot is not None:
            stored = await self.store.put(page.screenshot)
            self._screenshots[work.attempt.id] = stored.ref
        log.info(
            "rendered",
            extra={
                "action": "render_done",
                "url": document.url,
                "attempt_id": work.attempt.id,
                "why": why,
                "ms": round(page.elapsed_ms, 1),
                "requests": gate.tally.requests,
                "bytes": gate.tally.bytes,
                "blocked": gate.tally.blocked,
                "refused": len(gate.tally.refused),
                "disallowed": gate.tally.disallowed,
                "capped": gate.tally.capped,
                "clicks": page.clicks,
            },
        )
        headers_out: CIMultiDict[str] = CIMultiDict(document.headers)
        headers_out["Content-Type"] = "text/html; charset=utf-8"
        return Response(
            "ok",
            document.url,
            status=document.status,
            headers=headers_out,
            body=page.html.encode("utf-8"),
            elapsed_ms=document.elapsed_ms + page.elapsed_ms,
        )

    def _result(self, work: FetchWork, resp: Response, **kwargs: Any) -> FetchResult:
        result = super()._result(work, resp, **kwargs)
        shot = self._screenshots.pop(work.attempt.id, None)
        if shot is None:
            return result
        return msgspec.structs.replace(result, screenshot_ref=shot)


async def start(rt: Runtime) -> list[Coroutine[Any, Any, None]]:
    chromium = BrowserPool(RenderSettings.from_env())
    await chromium.start()
    proxies = await ProxyPool.open(rt.js, rt.names.proxies_bucket)
    renderer = Renderer(rt, chromium, proxies)
    consumer = rt.consumer(
        RENDER_WORK,
        renderer.on_work,
        concurrency=chromium.settings.contexts * 2,  # half of them wait on pacing
        batch=chromium.settings.contexts * 2,
        span_attrs=_span_attrs,
    )

    async def run() -> None:
        try:
            await consumer.run()
        finally:
            await renderer.close()
            with contextlib.suppress(asyncio.CancelledError):
                await chromium.close()

    return [run(), proxies.run(rt.stop), renderer.heartbeat()]
