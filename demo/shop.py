"""The demo shop server: one low-level aiohttp server per loopback host.

Each host serves its own categories and products (category i lives on host i % n_hosts), so a
crawl must cross hosts. Rendered pages are cached per (host, epoch, route) with ETags computed
once, which keeps the shop well ahead of any crawler it serves. Requests under `/_shop/` are
the control API for tests running the shop as a process; they are neither faulted nor logged.
"""

from __future__ import annotations

import asyncio
import hashlib
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from datetime import time as dtime
from email.utils import format_datetime, parsedate_to_datetime
from pathlib import Path
from typing import IO, Any
from urllib.parse import urlsplit

import msgspec
from aiohttp import web

from demo import api, js_pages
from demo.catalog import Catalog, epoch_date
from demo.faults import FaultInjector, Faults
from demo.js_pages import JsPages
from demo.pages import Page, Pages
from shared.lru import LRU

Route = tuple[Any, ...]
RequestRecord = dict[str, Any]

_IMAGE = bytes.fromhex(  # a 1x1 GIF
    "47494638396101000100800000000000ffffff21f90401000000002c00000000010001000002024401003b"
)


def image_bytes(name: str) -> bytes:
    """A product's image: a 1x1 GIF whose two palette colours come from its file name, so
    every product has its own image (content-addressed storage keeps them apart)."""
    palette = hashlib.sha256(name.encode()).digest()[:6]
    return _IMAGE[:13] + palette + _IMAGE[19:]


@dataclass(frozen=True, slots=True)
class Rendered:
    status: int
    body: bytes
    content_type: str
    etag: str


def _render(page: Page) -> Rendered:
    body = page.body.encode()
    etag = f'"{hashlib.blake2b(body, digest_size=12).hexdigest()}"'
    return Rendered(page.status, body, page.content_type, etag)


def _page_number(value: str | None) -> int | None:
    if value is None:
        return 1
    return int(value) if value.isdigit() else None


def route(request: web.BaseRequest) -> Route:
    """Map a request to the render key that determines its body (query noise ignored)."""
    path = request.path
    if path == "/":
        return ("home",)
    if path in ("/robots.txt", "/sitemap.xml", "/cart", "/account"):
        return (path.strip("/"),)
    head, _, rest = path[1:].partition("/")
    page = _page_number(request.query.get("page"))
    if head == "c" and rest and "/" not in rest and page is not None:
        return ("c", rest, page)
    if head == "p" and rest and "/" not in rest:
        return ("p", rest)
    if path == "/search" and page is not None:
        return ("search", request.query.get("q", ""), page)
    if head == "info" and rest:
        return ("info", rest)
    if head == "img" and rest:
        return ("img", rest)
    return ("404",)


class DemoShop:
    """A generated shop served on several loopback hosts, with epochs, faults and a log."""

    def __init__(
        self,
        hosts: Sequence[str] = ("127.0.0.2", "127.0.0.3"),
        port: int = 0,
        products: int = 60,
        seed: int = 1,
        epoch: int = 0,
        per_page: int = 8,
        faults: Faults | None = None,
        log_path: str | Path | None = None,
        etags: bool = True,
        cache_bytes: int = 128 * 1024 * 1024,
        advertise: Sequence[str] | None = None,
        variants: bool = False,
    ) -> None:
        if len(hosts) < 1:
            raise ValueError("at least one host is needed")
        self.hosts = tuple(hosts)
        # Names written into links when they differ from the bound addresses (compose binds
        # 0.0.0.0 but other containers reach the shop as "demo-shop").
        self.advertise = tuple(advertise) if advertise else None
        if self.advertise and len(self.advertise) != len(self.hosts):
            raise ValueError("advertise needs one name per host")
        self.port = port
        self.per_page = per_page
        self.variants = variants  # product pages as groups of their options (demo.api)
        self.etags = etags  # ETag/Last-Modified validation (304s)
        self.log_path = Path(log_path) if log_path else None
        self.base_urls = [f"http://{h}:{port}" for h in (self.advertise or self.hosts)]
        self._ports = [port] * len(self.hosts)
        self.catalog = Catalog(seed, products, self.base_urls)
        self.catalog.state(epoch)  # validates the epoch
        self._epoch = epoch
        self._injector = FaultInjector(faults or Faults())
        self.request_log: list[RequestRecord] = []
        self._waiters: list[tuple[Callable[[RequestRecord], bool], asyncio.Future[RequestRecord]]]
        self._waiters = []
        # Rendered pages, bounded by their total body bytes.
        self._cache: LRU[tuple[int, int, Route], Rendered] = LRU(
            cache_bytes, weigh=lambda page: len(page.body)
        )
        self._pages = [
            Pages(self.catalog, i, per_page, variants=variants) for i in range(len(hosts))
        ]
        self._js = [JsPages(self.catalog, pages) for pages in self._pages]
        self._runners: list[web.ServerRunner] = []
        self._log_file: IO[str] | None = None
        self._encode = msgspec.json.Encoder().encode

    # -- lifecycle ----------------------------------------------------------------------------
    async def start(self) -> None:
        """Bind every host; with port 0 each host gets its own free port."""
        if self.log_path is not None:
            self._open_log(self.log_path)
        try:
            for i, host in enumerate(self.hosts):
                server = web.Server(self._handler(i), access_log=None)
                runner = web.ServerRunner(server, shutdown_timeout=1.0)
                await runner.setup()
                self._runners.append(runner)
                site = web.TCPSite(runner, host, self.port)
                await site.start()
                self._ports[i] = runner.addresses[0][1]
                shown = self.advertise[i] if self.advertise else host
                self.base_urls[i] = f"http://{shown}:{self._ports[i]}"
        except BaseException:
            await self.stop()
            raise
        # Absolute links depend on the bound ports: rebuild the renderers.
        self.catalog.base_urls = list(self.base_urls)
        self._pages = [
            Pages(self.catalog, i, self.per_page, variants=self.variants)
            for i in range(len(self.hosts))
        ]
        self._js = [JsPages(self.catalog, pages) for pages in self._pages]
        self._cache.clear()

    def _open_log(self, path: Path) -> None:
        self._log_file = path.open("a", encoding="utf-8")

    async def stop(self) -> None:
        runners, self._runners = self._runners, []
        for runner in runners:
            await runner.cleanup()
        if self._log_file is not None:
            self._log_file.close()
            self._log_file = None
        for _, fut in self._waiters:
            fut.cancel()
        self._waiters.clear()

    async def __aenter__(self) -> DemoShop:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    # -- state --------------------------------------------------------------------------------
    @property
    def epoch(self) -> int:
        return self._epoch

    def set_epoch(self, epoch: int) -> None:
        self.catalog.state(epoch)  # computed now, so the next request is not slowed down
        self._epoch = epoch

    @property
    def faults(self) -> Faults:
        return self._injector.faults

    @faults.setter
    def faults(self, faults: Faults) -> None:
        # A new injector restarts the RNG and every script.
        self._injector = FaultInjector(faults)

    def truth(self) -> list[dict[str, str]]:
        """The current epoch's listed products (see Catalog.truth)."""
        return self.catalog.truth(self._epoch)

    def delisted(self) -> list[dict[str, str]]:
        return self.catalog.delisted(self._epoch)

    def variant_truth(self) -> list[dict[str, str]]:
        """With ``variants``: each listed product's variants as a crawler should find them
        (key ``<product sku>#<variant sku>``, the price paid, in or out of stock)."""
        out = []
        state = self.catalog.state(self._epoch)
        for p in self.catalog.products:
            if p.index not in state.listed:
                continue
            options = api.variants(self.catalog, p, self._epoch, churn=True)
            if len(options) < 2:
                continue
            sold_out = "preorder" if state.availability[p.index] == "preorder" else "out_of_stock"
            for o in options:
                out.append(
                    {
                        "key": f"{p.sku}#{o['sku']}",
                        "variant_of": p.sku,
                        "price": o["sale_price"] or o["price"],
                        "availability": "in_stock" if o["stock"] else sold_out,
                    }
                )
        return out

    def source_definition(self, name: str = "demo-shop") -> dict[str, Any]:
        """A trawl source definition that crawls exactly this running shop."""
        return {
            "name": name,
            "seeds": [self.catalog.category_url(c) for c in self.catalog.categories],
            "allowed_domains": [u.removeprefix("http://") for u in self.base_urls],
            # Advertised names resolve to container addresses nobody can list in advance.
            "allow_private": True if self.advertise else [f"{h}/32" for h in self.hosts],
            "robots": "obey",
            "links": {
                "product": {"css": "a.product-card, .related a", "pattern": "/p/[^/?#]+"},
                "pagination": {
                    "css": "a[rel=next], nav.pagination a",
                    "pattern": "[?&]page=\\d+",
                },
                "deny": ["/cart", "/account"],
                "max_depth": 10,
            },
            "pacing": {"profile": "fast"},
        }

    def js_source_definition(self, name: str = "demo-js") -> dict[str, Any]:
        """A source that crawls the shop's JavaScript-only section (``/js/``) by rendering it:
        the same products as ``truth()``, none of them visible to a plain fetch."""
        plain = self.source_definition(name)
        hosts = [urlsplit(u).netloc for u in self.base_urls]
        seeds = [
            f"{self.base_urls[self.catalog.category_host(c)]}/js/c/{c}"
            for c in self.catalog.categories
        ]
        return {
            **plain,
            "seeds": seeds,
            "allowed_domains": hosts,
            "links": {
                "product": {"css": "a.product-card", "pattern": "/js/p/[^/?#]+"},
                # The static section is reachable from injected breadcrumbs: not this source's.
                "deny": ["^https?://[^/]+/(?!js/)"],
                "max_depth": 3,
            },
            "render": {"click": "button.load-more", "max_clicks": 20},
        }

    async def wait_for_request(self, predicate: Callable[[RequestRecord], bool]) -> RequestRecord:
        """The first logged request matching `predicate`, waiting for it if need be.

        Bound the wait with `asyncio.timeout` at the call site.
        """
        for record in self.request_log:
            if predicate(record):
                return record
        fut: asyncio.Future[RequestRecord] = asyncio.get_running_loop().create_future()
        entry = (predicate, fut)
        self._waiters.append(entry)
        try:
            return await fut
        finally:
            if entry in self._waiters:
                self._waiters.remove(entry)

    # -- serving ------------------------------------------------------------------------------
    def _handler(self, host: int) -> Callable[[web.BaseRequest], Any]:
        async def handle(request: web.BaseRequest) -> web.StreamResponse:
            if request.path.startswith("/_shop/"):
                return await self._control(request)
            return await self._serve(host, request)

        return handle

    async def _serve(self, host: int, request: web.BaseRequest) -> web.StreamResponse:
        t_start = time.time()
        path = request.raw_path
        sent = b""
        if api.is_api(request.path):
            sent = await request.read() if request.method == "POST" else b""
            path = api.fault_key(request.path, request.method, request.query_string, sent)
        decision = self._injector.decide(path, exempt=request.path == "/robots.txt")
        if decision.delay:
            await asyncio.sleep(decision.delay)
        if decision.reset:
            self._record(host, request, t_start, 0, 0, sent)
            return _reset(request)
        epoch = self._epoch
        headers = {}
        if decision.status is not None:
            rendered = self._page(host, epoch, ("error", decision.status))
            if decision.retry_after is not None:
                headers["Retry-After"] = str(decision.retry_after)
        elif api.is_api(request.path):
            rendered = self._api(epoch, request, sent)
        elif js_pages.handles(request.path):
            answer = self._js[host].respond(request.path, dict(request.query), epoch)
            etag = f'"{hashlib.blake2b(answer.body, digest_size=12).hexdigest()}"'
            rendered = Rendered(answer.status, answer.body, answer.content_type, etag)
            headers.update(answer.headers)
        elif request.method not in ("GET", "HEAD") and request.path not in ("/cart", "/account"):
            rendered = self._page(host, epoch, ("error", 405))
            headers["Allow"] = "GET, HEAD"
        else:
            key = route(request)
            if key[0] == "p" and self._injector.sold_out(path):
                key = ("p-sold-out", *key[1:])  # a planted transient "sold out"
            rendered = self._page(host, epoch, key)
        status = rendered.status
        body = rendered.body
        if status == 200:
            modified = _http_date(epoch)
            headers["ETag"] = rendered.etag
            headers["Last-Modified"] = modified
            if self.etags and _not_modified(request, rendered.etag, epoch):
                status, body = 304, b""
        response = web.Response(
            status=status, body=body or None, headers=headers, content_type=None
        )
        if body:
            response.headers["Content-Type"] = rendered.content_type
        try:
            await response.prepare(request)
            await response.write_eof()
        finally:
            self._record(host, request, t_start, status, len(body), sent)
        return response

    def _api(self, epoch: int, request: web.BaseRequest, sent: bytes) -> Rendered:
        status, doc = api.respond(
            self.catalog, epoch, request.path, request.method, dict(request.query), sent
        )
        body = self._encode(doc)
        etag = f'"{hashlib.blake2b(body, digest_size=12).hexdigest()}"'
        return Rendered(status, body, "application/json", etag)

    def _page(self, host: int, epoch: int, key: Route) -> Rendered:
        cache_key = (host, epoch, key)
        rendered = self._cache.get(cache_key)
        if rendered is None:
            rendered = self._render(self._pages[host], epoch, key)
            self._cache.put(cache_key, rendered)
        return rendered

    def _render(self, pages: Pages, epoch: int, key: Route) -> Rendered:
        match key:
            case ("img", name):
                body = image_bytes(name)
                etag = f'"{hashlib.sha256(body).hexdigest()[:16]}"'
                return Rendered(200, body, "image/gif", etag)
            case ("home",):
                page = pages.home()
            case ("c", category, number):
                page = pages.category(category, number, epoch)
            case ("p", slug):
                page = pages.product(slug, epoch)
            case ("p-sold-out", slug):
                page = pages.product(slug, epoch, sold_out=True)
            case ("search", query, number):
                page = pages.search(query, number, epoch)
            case ("robots.txt",):
                page = pages.robots()
            case ("sitemap.xml",):
                page = pages.sitemap(epoch)
            case ("cart",):
                page = pages.simple("Your cart", "Your cart is empty.")
            case ("account",):
                page = pages.simple("Your account", "Sign in to see your orders.")
            case ("info", name):
                page = pages.info(name)
            case ("error", status):
                page = pages.error(status)
            case _:
                page = pages.not_found()
        return _render(page)

    def _record(
        self,
        host: int,
        request: web.BaseRequest,
        t_start: float,
        status: int,
        size: int,
        sent: bytes = b"",
    ) -> None:
        record: RequestRecord = {
            "t_start": t_start,
            "t_end": time.time(),
            "host": self.hosts[host],
            "port": self._ports[host],
            "method": request.method,
            "path": request.raw_path,
            "status": status,
            "bytes": size,
            "headers": dict(request.headers),
        }
        if sent:  # an API POST: which page it asked for
            record["body"] = sent[:4096].decode("utf-8", "replace")
        self.request_log.append(record)
        if self._log_file is not None:
            self._log_file.write(self._encode(record).decode() + "\n")
            self._log_file.flush()  # another process may be tailing the file
        for predicate, fut in list(self._waiters):
            if not fut.done() and predicate(record):
                fut.set_result(record)

    # -- control API ----------------------------------------------------------------------------
    async def _control(self, request: web.BaseRequest) -> web.StreamResponse:
        action = request.path.removeprefix("/_shop/")
        method = request.method
        try:
            if action == "truth" and method == "GET":
                return web.json_response(self.truth())
            if action == "api_truth" and method == "GET":
                flavor = request.query.get("flavor", "graphql")
                return web.json_response(api.truth(self.catalog, self._epoch, flavor))
            if action == "delisted" and method == "GET":
                return web.json_response(self.delisted())
            if action == "source" and method == "GET":
                name = request.query.get("name", "demo-shop")
                return web.json_response(self.source_definition(name))
            if action == "log" and method == "GET":
                return web.json_response(self.request_log)
            if action == "epoch" and method == "POST":
                self.set_epoch(int(request.query["n"]))
                return web.json_response({"epoch": self._epoch})
            if action == "faults" and method == "POST":
                data = await request.json() if request.can_read_body else {}
                self.faults = Faults.from_dict(data)
                return web.json_response(self.faults.to_dict())
        except (KeyError, ValueError, TypeError) as exc:
            return web.json_response({"error": str(exc)}, status=400)
        return web.json_response({"error": "unknown control endpoint"}, status=404)


def _reset(request: web.BaseRequest) -> web.StreamResponse:
    """Drop the connection without answering (a reset as far as the client can tell)."""
    transport = request.transport
    if transport is not None:
        transport.abort()
    return web.Response()  # aiohttp drops it quietly: the transport is gone


def _http_date(epoch: int) -> str:
    return format_datetime(datetime.combine(epoch_date(epoch), dtime(), UTC), usegmt=True)


def _not_modified(request: web.BaseRequest, etag: str, epoch: int) -> bool:
    match = request.headers.get("If-None-Match")
    if match is not None:
        tags = {t.strip().removeprefix("W/") for t in match.split(",")}
        return "*" in tags or etag in tags
    since = request.headers.get("If-Modified-Since")
    if since is None:
        return False
    try:
        when = parsedate_to_datetime(since)
    except (TypeError, ValueError):
        return False
    modified = datetime.combine(epoch_date(epoch), dtime(), UTC)
    return when.tzinfo is not None and when >= modified
