"""Fetcher: fetch work → guarded, paced, polite request → payload stored → fetch result."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import os
import ssl
import time
from collections.abc import Coroutine
from typing import Any

import aiohttp
from yarl import URL

from schemas.messages import FetchPolicy, FetchResult, FetchWork
from services.fetcher.browser import BrowserSession, Trust
from services.fetcher.cookies import CookieStore
from services.fetcher.http import PlainTransport, Response, Transport, request
from services.fetcher.identity import (
    PLAIN_ENCODING,
    Identity,
    identity_avoiding,
    identity_for,
    image_headers,
    with_referrer,
)
from services.fetcher.pacing import HostGuard, InFlight, jittered, wait_until
from services.fetcher.proxies import Proxy, ProxyPool
from services.fetcher.robots import RobotsCache
from services.fetcher.sessions import Sessions
from shared.bus import Unpublishable, send
from shared.channels import FETCH_RESULTS, FETCH_WORK
from shared.consumer import Delivery
from shared.errors import TrawlError
from shared.guard import (
    Allowlist,
    GuardedResolver,
    ProxyRules,
    UnsafeURL,
    check_target,
)
from shared.metrics import Metrics
from shared.payloads import JetStreamPayloadStore
from shared.secrets import MissingSecret
from shared.secrets import expand as expand_secrets
from shared.service import Runtime
from shared.wire import clean, clean_or_none, exact

log = logging.getLogger("trawl.fetcher")

ROBOTS_MAX_BYTES = 500 * 1024
ROBOTS_TIMEOUT = 10.0
HEARTBEAT = 20.0  # a fetch this old gets in_progress() every HEARTBEAT/2 s (ack_wait: 60 s)
PROXY_READY_WAIT = 5.0  # how long a proxied fetch waits for the first proxy list at start
# Answers a proxy gives itself when it cannot or will not serve (a robots.txt read through it).
_PROXY_REFUSALS = frozenset({403, 407, 429, 502, 504})


class NoProxy(TrawlError):
    """The source requires a proxy and none is healthy."""


class Counts:
    """The fetcher's own counters: shown in its stats (the keys) and served on /metrics."""

    def __init__(self, metrics: Metrics) -> None:
        count = metrics.counter
        self.requests = count(
            "trawl.fetcher.requests",
            "Requests made for work (robots.txt excluded), whatever their outcome.",
            unit="{request}",
            stat="fetched",
        )
        self.stored = count(
            "trawl.fetcher.stored",
            "Body bytes stored as payloads (before compression).",
            unit="By",
            stat="bytes",
        )
        self.expired = count(
            "trawl.fetcher.expired",
            "Work dropped because its deadline passed before it could be fetched.",
            unit="{work}",
            stat="expired",
        )
        self.joined = count(
            "trawl.fetcher.joined",
            "Redeliveries that joined the fetch of their attempt still running here.",
            unit="{delivery}",
            stat="joined",
        )
        self.proxied = count(
            "trawl.fetcher.proxied",
            "Requests made through a proxy.",
            unit="{request}",
            stat="proxied",
        )
        self.no_proxy = count(
            "trawl.fetcher.no_proxy",
            "Work not fetched: its source requires a proxy and none was healthy.",
            unit="{work}",
            stat="no_proxy",
        )


class Fetcher:
    def __init__(self, rt: Runtime, proxies: ProxyPool | None = None) -> None:
        self.rt = rt
        self.store = JetStreamPayloadStore(rt.js, rt.names)
        self.guard = HostGuard()
        self.inflight: InFlight[FetchResult] = InFlight()
        self.proxies = proxies or ProxyPool()
        self._sessions: dict[tuple[str, ...], aiohttp.ClientSession] = {}
        self.browsers = Sessions()
        self._cookie_store: CookieStore | None = None
        self._resolvers: dict[tuple[str, ...], GuardedResolver] = {}
        self._robots: dict[tuple[str, ...], RobotsCache] = {}
        self._deliveries: dict[int, tuple[Delivery[FetchWork], float]] = {}
        self._tokens = itertools.count()
        self.metrics = rt.metrics
        self.counts = Counts(rt.metrics)

    # -- clients per SSRF policy -------------------------------------------------------------
    def _policy_key(self, policy: FetchPolicy) -> tuple[str, ...]:
        return tuple(sorted(policy.allow_private))

    def guard_for(self, policy: FetchPolicy) -> tuple[Allowlist, GuardedResolver]:
        """The SSRF guard of a source's policy: what it may reach, and the resolver that drops
        refused addresses (one per policy, shared by every client of the policy)."""
        key = self._policy_key(policy)
        allow = Allowlist.from_policy(True if "*" in key else list(key))
        resolver = self._resolvers.get(key)
        if resolver is None:
            resolver = self._resolvers[key] = GuardedResolver(allow)
        return allow, resolver

    def _session(self, policy: FetchPolicy) -> tuple[aiohttp.ClientSession, Allowlist]:
        key = self._policy_key(policy)
        allow, resolver = self.guard_for(policy)
        # A source's CA bundle is its own trust: a session of its own (plain mode, robots.txt).
        session_key = (*key, f"ca={policy.ca_file or ''}")
        session = self._sessions.get(session_key)
        if session is None:
            # The default context reads SSL_CERT_FILE, as OpenSSL does.
            trust = ssl.create_default_context(cafile=policy.ca_file) if policy.ca_file else True
            connector = aiohttp.TCPConnector(
                resolver=resolver, limit=0, limit_per_host=0, ttl_dns_cache=60, ssl=trust
            )
            session = aiohttp.ClientSession(
                connector=connector,
                cookie_jar=aiohttp.DummyCookieJar(),
                auto_decompress=True,
                max_line_size=16 * 1024,
                max_field_size=16 * 1024,
            )
            self._sessions[session_key] = session
        return session, allow

    async def _cookies(self) -> CookieStore:
        if self._cookie_store is None:
            self._cookie_store = await CookieStore.open(self.rt.js, self.rt.names.cookies_bucket)
        return self._cookie_store

    async def _robots_for(self, policy: FetchPolicy) -> RobotsCache:
        key = (
            *self._policy_key(policy),
            f"proxies={policy.proxies}",
            f"client={policy.client}",
            f"locale={policy.locale}",
            f"ua={policy.user_agent or ''}",
            f"ca={policy.ca_file or ''}",
        )
        cache = self._robots.get(key)
        if cache is None:
            mode = policy.proxies

            async def fetch_robots(url: str) -> tuple[int | None, bytes]:
                if mode == "none":
                    return await self._get_robots(policy, url, None)
                # Through a proxy, as the pages go. A proxy's own refusal (403/407/429, an error)
                # must not read as "no rules" (RFC 9309: 4xx = allow all): try the next one.
                session_key = f"robots:{URL(url).origin()}"
                for generation in range(max(1, len(self.proxies.proxies))):
                    proxy = self.proxies.pick(session_key, generation)
                    if proxy is None:
                        if mode == "required":
                            raise NoProxy("robots.txt: no healthy proxy")
                        return await self._get_robots(policy, url, None)
                    answer = await self._get_robots(policy, url, proxy)
                    if answer[0] is not None and answer[0] not in _PROXY_REFUSALS:
                        return answer
                return None, b""  # every proxy refused: unreachable (disallow for a while)

            kv = await self.rt.js.key_value(self.rt.names.robots_bucket)
            cache = self._robots[key] = RobotsCache(kv, fetch_robots)
        return cache

    def _robots_client(
        self, policy: FetchPolicy, url: str, proxy: Proxy | None
    ) -> tuple[Transport, dict[str, str], Allowlist]:
        """robots.txt is asked for as a visitor of the origin would type it, by an identity of
        its own (one per origin): a request that said "trawl" in Python's handshake, just before
        the pages came in Chrome's, would tie them together for the site."""
        allow, resolver = self.guard_for(policy)
        origin = str(URL(url).origin())
        identity = identity_for(
            f"robots:{origin}", locale=policy.locale, user_agent=policy.user_agent
        )
        headers = dict(identity.headers)
        if policy.client == "plain" or identity.tls is None:
            headers["Accept-Encoding"] = PLAIN_ENCODING
            return PlainTransport(self._session(policy)[0]), headers, allow
        browser = self.browsers.get(
            ("robots", *self._policy_key(policy), origin),
            identity,
            proxy,
            resolver,
            Trust(policy.ca_file),
        )
        return browser, headers, allow

    async def _get_robots(
        self, policy: FetchPolicy, url: str, proxy: Proxy | None
    ) -> tuple[int | None, bytes]:
        transport, headers, allow = self._robots_client(policy, url, proxy)
        resp = await request(
            transport,
            url,
            headers=headers,
            allow=allow,
            timeout=ROBOTS_TIMEOUT,
            max_bytes=ROBOTS_MAX_BYTES,
            max_redirects=5,
            accept_types=None,
            proxy=proxy,
            resolver=self.guard_for(policy)[1],
            truncate=True,  # RFC 9309 §2.5: the first 500 KiB are the rules, the rest is cut
        )
        if resp.status is None:
            return None, b""
        if resp.outcome == "ok" or resp.body is not None or not 200 <= resp.status < 300:
            return resp.status, bytes(resp.body or b"")
        # A 2xx whose body was not read (refused, cut short) is no robots.txt, and never
        # "allow everything": it counts as unreachable, so disallow for a while.
        return None, b""

    async def close(self) -> None:
        for session in self._sessions.values():
            await session.close()
        for resolver in self._resolvers.values():
            await resolver.close()

    # -- the handler -------------------------------------------------------------------------
    async def on_work(self, d: Delivery[FetchWork]) -> None:
        work = d.body
        # The heartbeat covers everything up to the ack: waits for not_before and for a host
        # slot count against ack_wait as much as the request does.
        token = next(self._tokens)
        self._deliveries[token] = (d, time.monotonic())
        try:
            # A redelivery of an attempt still running here joins it: no second request, no
            # second host slot.
            result, joined = await self.inflight.run(work.attempt.id, lambda: self._paced(work))
        finally:
            del self._deliveries[token]
        if joined:
            self.counts.joined.add()
        msg_id = f"fetched-{work.attempt.id}"
        try:
            await send(self.rt.js, self.rt.names, FETCH_RESULTS, result, msg_id=msg_id)
        except Unpublishable as exc:
            # Made safe in _result, and still refused: the attempt ends as unpublishable (the
            # entry fails with the reason) rather than never reporting at all.
            log.warning(
                "fetch result unpublishable",
                extra={
                    "action": "result_unpublishable",
                    "url": work.attempt.url,
                    "error": str(exc),
                },
            )
            failed = FetchResult(
                attempt=work.attempt,
                outcome="unpublishable",
                status=result.status,
                error=clean(f"result not publishable: {exc}", 1000),
                started_at=result.started_at,
                elapsed_ms=result.elapsed_ms,
                payload_ref=result.payload_ref,
                size=result.size,
            )
            await send(self.rt.js, self.rt.names, FETCH_RESULTS, failed, msg_id=msg_id)

    async def heartbeat(self) -> None:
        """Tell JetStream the fetches still running are alive, so they are not redelivered.

        One loop for all deliveries (not a task per message): a delivery running for more than
        ``HEARTBEAT`` seconds gets an ``in_progress()`` every ``HEARTBEAT / 2`` seconds.
        """
        while not self.rt.stop.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.rt.stop.wait(), HEARTBEAT / 2)
            due = time.monotonic() - HEARTBEAT
            for d, since in list(self._deliveries.values()):
                if since <= due:
                    with contextlib.suppress(Exception):
                        await d.msg.in_progress()

    async def _paced(self, work: FetchWork) -> FetchResult:
        """``not_before`` (with jitter), the host slot, the deadline, then the fetch."""
        if not self._expired(work):
            await wait_until(jittered(work.not_before), self.rt.stop)
            async with self.guard.slot(work.domain, work.policy.max_in_flight):
                if not self._expired(work):
                    return await self.fetch(work)
        return self._result(
            work, Response("timeout", work.attempt.url, error="work expired before it was fetched")
        )

    def _expired(self, work: FetchWork) -> bool:
        if work.deadline is None or time.time() <= work.deadline:
            return False
        # Dropped explicitly: counted, logged and reported (the scheduler re-queues it).
        self.counts.expired.add()
        log.warning(
            "work expired",
            extra={
                "action": "fetch_expired",
                "attempt_id": work.attempt.id,
                "url": work.attempt.url,
                "late_s": round(time.time() - work.deadline, 1),
            },
        )
        return True

    async def _proxy_for(self, work: FetchWork) -> Proxy | None:
        if work.policy.proxies == "none":
            return None
        if not self.proxies.ready.is_set():  # just started: the list is on its way
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.proxies.ready.wait(), PROXY_READY_WAIT)
        return self.proxies.pick(
            f"{work.attempt.job_id}:{work.domain}",
            work.attempt.number - 1,
            work.policy.avoid_proxies,
        )

    async def fetch(self, work: FetchWork) -> FetchResult:
        policy = work.policy
        proxy = await self._proxy_for(work)
        if proxy is None and policy.proxies == "required":
            # Never a direct request for such a source; retried later (a retryable outcome).
            self.counts.no_proxy.add()
            return self._result(
                work,
                Response(
                    "no_proxy", work.attempt.url, error="source requires a proxy; none is healthy"
                ),
            )
        if policy.ca_file and not os.access(policy.ca_file, os.R_OK):
            # The source's configuration, not the site: retrying would not help.
            error = f"tls.ca_file {policy.ca_file} cannot be read"
            return self._result(work, Response("rejected", work.attempt.url, error=error))
        session, allow = self._session(policy)
        try:
            # Before robots: an unsafe host is unsafe, not disallowed.
            target = check_target(work.attempt.url, allow)
            await self._resolvers[self._policy_key(policy)].check_name(
                target.raw_host or "", target.port or 0
            )
        except UnsafeURL as exc:
            return self._result(work, Response("unsafe_url", work.attempt.url, error=str(exc)))
        crawl_delay = None
        if policy.robots:
            try:
                verdict = await (await self._robots_for(policy)).check(
                    work.attempt.url, policy.user_agent
                )
            except ValueError as exc:
                return self._result(work, Response("unsafe_url", work.attempt.url, error=str(exc)))
            crawl_delay = verdict.crawl_delay
            if not verdict.allowed:
                return self._result(
                    work,
                    Response(
                        "robots_disallowed", work.attempt.url, error="disallowed by robots.txt"
                    ),
                    crawl_delay=crawl_delay,
                )
        identity = identity_avoiding(
            f"{work.attempt.job_id}:{work.domain}",
            policy.avoid_identities,
            generation=work.attempt.number - 1,
            locale=policy.locale,
            user_agent=policy.user_agent,
        )
        headers = dict(identity.headers)
        if work.attempt.kind == "image":
            headers = image_headers(headers)
        # A discovered page (or a page's image) carries the page that linked it.
        headers = with_referrer(headers, work.attempt.url, work.attempt.referrer)
        transport: Transport
        browser: BrowserSession | None = None
        if policy.client == "plain" or identity.tls is None:
            transport = PlainTransport(session)
            headers["Accept-Encoding"] = PLAIN_ENCODING
        else:
            browser = transport = self.browsers.get(
                (*self._policy_key(policy), str(work.attempt.job_id), work.domain),
                identity,
                proxy,
                self._resolvers[self._policy_key(policy)],
                Trust(policy.ca_file),
            )
            if not browser.restored:
                browser.restored = True
                await (await self._cookies()).restore(browser)
        if work.etag:
            headers["If-None-Match"] = work.etag
        if work.last_modified:
            headers["If-Modified-Since"] = work.last_modified
        method, body = api_request_parts(work, headers)
        try:
            headers = {k: expand_secrets(v, self.rt.settings.secrets) for k, v in headers.items()}
        except MissingSecret as exc:
            return self._result(work, Response("rejected", work.attempt.url, error=str(exc)))
        started = time.time()
        resp = await request(
            transport,
            work.attempt.url,
            headers=headers,
            allow=allow,
            timeout=policy.timeout,
            max_bytes=policy.max_bytes,
            max_redirects=policy.max_redirects,
            accept_types=policy.accept_types,
            proxy=proxy,
            resolver=self._resolvers[self._policy_key(policy)],
            method=method,
            body=body,
        )
        if browser is not None and browser.cookies_set:
            await (await self._cookies()).save(browser)
        if proxy is not None:
            self.counts.proxied.add()
            resp.error = proxy.redact(resp.error)
        resp = await self.finish(work, resp, identity, proxy, transport)
        self.metrics.http_request(
            work.domain, resp.outcome, resp.elapsed_ms / 1000, len(resp.body or b"")
        )
        payload_ref = None
        size = 0
        if resp.outcome == "ok" and resp.body is not None:
            stored = await self.store.put(resp.body, resp.gzip)
            payload_ref, size = stored.ref, stored.size
            self.counts.stored.add(size)
        self.counts.requests.add()
        log.info(
            "fetched",
            extra={
                "action": "fetch_done",
                "url": work.attempt.url,
                "attempt_id": work.attempt.id,
                "outcome": resp.outcome,
                "status": resp.status,
                "ms": round(resp.elapsed_ms, 1),
                "proxy": proxy.id if proxy else None,
                "fingerprint": identity.id,
            },
        )
        return self._result(
            work,
            resp,
            started=started,
            payload_ref=payload_ref,
            size=size,
            crawl_delay=crawl_delay,
            fingerprint=identity.id,
            proxy=proxy,
        )

    async def finish(
        self,
        work: FetchWork,
        resp: Response,
        identity: Identity,
        proxy: Proxy | None,
        transport: Transport,
    ) -> Response:
        """The response as it will be stored: as fetched here; a renderer renders it (its
        page's requests then go through ``transport``, the document's own session)."""
        return resp

    def _result(
        self,
        work: FetchWork,
        resp: Response,
        *,
        started: float | None = None,
        payload_ref: str | None = None,
        size: int = 0,
        crawl_delay: float | None = None,
        fingerprint: str | None = None,
        proxy: Proxy | None = None,
    ) -> FetchResult:
        self.metrics.fetch_result(work.domain, resp.outcome)  # every result, whatever its cause
        # What the server sent is made safe to encode here (shared.wire): header values with
        # non-UTF-8 bytes arrive as lone surrogates; validators are sent back only if exact.
        return FetchResult(
            attempt=work.attempt,
            outcome=resp.outcome,  # type: ignore[arg-type]
            final_url=clean_or_none(resp.url) if resp.url != work.attempt.url else None,
            status=resp.status,
            error=clean_or_none(resp.error, 2000),
            started_at=started or time.time(),
            elapsed_ms=resp.elapsed_ms,
            payload_ref=payload_ref,
            content_type=clean_or_none(resp.content_type, 256),
            charset=exact(resp.charset, 64),
            size=size,
            retry_after=resp.retry_after,
            crawl_delay=crawl_delay,
            etag=exact(resp.headers.get("ETag")),
            last_modified=exact(resp.headers.get("Last-Modified")),
            fingerprint=fingerprint,
            proxy=proxy.id if proxy else None,
        )


def api_request_parts(work: FetchWork, headers: dict[str, str]) -> tuple[str, bytes | None]:
    """Method and body of the work; an API page's headers go over the browser profile's
    (``headers`` is updated). A JSON body goes as application/json unless the source says."""
    request = work.attempt.request
    if request is None:
        return "GET", None
    # The same browser, now calling an API from its page: fetch() metadata, not navigation's.
    headers["Accept"] = "application/json"
    for name, value in (("Sec-Fetch-Mode", "cors"), ("Sec-Fetch-Dest", "empty")):
        if name in headers:
            headers[name] = value
    if "Sec-Fetch-Site" in headers:
        headers["Sec-Fetch-Site"] = "same-origin"
    headers.pop("Sec-Fetch-User", None)
    headers.pop("Upgrade-Insecure-Requests", None)
    body = request.body.encode() if request.body is not None else None
    if body is not None:
        headers["Content-Type"] = "application/json"
    for name, value in request.headers.items():
        for existing in [k for k in headers if k.lower() == name.lower()]:
            del headers[existing]
        headers[name] = value
    return request.method, body


def _span_attrs(work: FetchWork) -> dict[str, Any]:
    return {
        "url.full": work.attempt.url,
        "trawl.domain": work.domain,
        "trawl.job_id": work.attempt.job_id,
    }


async def start(rt: Runtime) -> list[Coroutine[Any, Any, None]]:
    proxies = await ProxyPool.open(
        rt.js, rt.names.proxies_bucket, ProxyRules.from_settings(rt.settings)
    )
    fetcher = Fetcher(rt, proxies)
    consumer = rt.consumer(
        FETCH_WORK,
        fetcher.on_work,
        concurrency=rt.settings.concurrency * 4,
        batch=256,
        span_attrs=_span_attrs,
    )

    async def run() -> None:
        try:
            await consumer.run()
        finally:
            await fetcher.close()

    return [run(), proxies.run(rt.stop), fetcher.heartbeat()]
