"""Small servers on loopback for the fetcher's tests, and an in-process fetcher.

Nothing here talks to an address outside 127.0.0.0/8 and ::1.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import aiohttp
from aiohttp import web

from schemas.messages import Attempt, FetchPolicy, FetchWork


class ForwardProxy:
    """An HTTP forward proxy (absolute-URI requests) that counts what it forwards.

    ``refuse`` set: answers that status itself instead of forwarding (a blocked exit).
    """

    def __init__(self, host: str = "127.0.0.1", refuse: int | None = None) -> None:
        self.host = host
        self.refuse = refuse
        self.requests: list[dict[str, Any]] = []
        self.port = 0
        self._runner: web.ServerRunner | None = None
        self._client: aiohttp.ClientSession | None = None

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    async def _handle(self, request: web.BaseRequest) -> web.StreamResponse:
        self.requests.append(
            {"url": str(request.url), "headers": dict(request.headers), "t": time.time()}
        )
        if self.refuse is not None:
            return web.Response(status=self.refuse, text="refused by the proxy")
        assert self._client is not None
        headers = {
            k: v
            for k, v in request.headers.items()
            if k.lower() not in ("proxy-authorization", "proxy-connection", "host")
        }
        async with self._client.get(
            request.url, headers=headers, allow_redirects=False
        ) as upstream:
            body = await upstream.read()
            out = {
                k: v
                for k, v in upstream.headers.items()
                if k.lower() not in ("content-length", "transfer-encoding", "connection")
            }
            return web.Response(status=upstream.status, body=body, headers=out)

    async def __aenter__(self) -> ForwardProxy:
        self._client = aiohttp.ClientSession(auto_decompress=False)
        self._runner = web.ServerRunner(web.Server(self._handle, access_log=None))
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, 0)
        await site.start()
        self.port = self._runner.addresses[0][1]
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
        if self._client is not None:
            await self._client.close()


class Listener:
    """A bare TCP listener that only counts connections (a target that must never be hit)."""

    def __init__(self, host: str) -> None:
        self.host = host
        self.port = 0
        self.connections = 0
        self._server: asyncio.Server | None = None

    async def __aenter__(self) -> Listener:
        def accepted(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            self.connections += 1
            writer.close()

        self._server = await asyncio.start_server(accepted, self.host, 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._server is not None
        self._server.close()
        await self._server.wait_closed()


@asynccontextmanager
async def serve(
    handler: Callable[[web.BaseRequest], Any], host: str = "127.0.0.2"
) -> AsyncIterator[str]:
    """A low-level aiohttp server on ``host``; yields its base URL."""
    runner = web.ServerRunner(web.Server(handler, access_log=None), shutdown_timeout=0.5)
    await runner.setup()
    try:
        await web.TCPSite(runner, host, 0).start()
        yield f"http://{host}:{runner.addresses[0][1]}"
    finally:
        await runner.cleanup()


def work(
    url: str,
    *,
    job_id: int = 1,
    domain: str | None = None,
    attempt: int = 1,
    entry_id: int = 1,
    **policy: Any,
) -> FetchWork:
    """A FetchWork for ``url`` with a policy that lets the loopback servers through."""
    from yarl import URL

    parsed = URL(url)
    options: dict[str, Any] = {"robots": False, "allow_private": ["127.0.0.2/32"]}
    options.update(policy)
    return FetchWork(
        attempt=Attempt(job_id=job_id, entry_id=entry_id, source="test", url=url, number=attempt),
        domain=domain or f"{parsed.host}:{parsed.port}",
        policy=FetchPolicy(**options),
    )


@asynccontextmanager
async def fetcher(nc: Any, namespace: str, settings: Any = None) -> AsyncIterator[Any]:
    """An in-process Fetcher on a provisioned namespace, with its proxy watcher running."""
    from services.fetcher.proxies import ProxyPool
    from services.fetcher.service import Fetcher
    from shared.guard import ProxyRules
    from shared.names import Names
    from shared.provision import provision
    from shared.service import Runtime
    from shared.settings import Settings

    names = Names(namespace)
    js = nc.jetstream()
    await provision(js, names)
    stop = asyncio.Event()
    # The test proxies listen on 127.0.0.1: the deployment setting that admits them.
    settings = settings or Settings.from_env(
        {"TRAWL_NAMESPACE": namespace, "TRAWL_PROXY_NETWORKS": "127.0.0.1/32"}
    )
    rt = Runtime(
        "fetcher",
        settings,
        names,
        nc,
        js,
        stop,
    )
    proxies = await ProxyPool.open(js, names.proxies_bucket, ProxyRules.from_settings(settings))
    watcher = asyncio.create_task(proxies.run(stop), name="proxy-watch")
    f = Fetcher(rt, proxies)
    try:
        yield f
    finally:
        stop.set()
        await watcher
        await f.close()
