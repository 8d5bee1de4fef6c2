"""robots.txt at admission, with the services as processes and a real site on two loopback
origins: the links a robots.txt the fetcher has already read disallows end ``robots_disallowed``
without ever being published as fetch work; a link to an origin whose robots.txt nobody has
read yet goes out as before, and the fetcher decides it."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import msgspec
import pytest
from aiohttp import web

from control.client import TrawlClient
from schemas.messages import FetchWork
from services.scheduler.catalog import save_source
from shared.names import Names
from shared.sources import source_from_dict
from tests.support.stack import Stack

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(150)]

ROBOTS = "User-agent: *\nDisallow: /private\nDisallow: /*?sort=\n"


class Site:
    """Two origins (127.0.0.2 and 127.0.0.3) of one small site, logging every request."""

    def __init__(self) -> None:
        self.log: list[tuple[str, str]] = []  # (host, path with query)
        self.a = self.b = ""
        self._runner: web.AppRunner | None = None

    async def __aenter__(self) -> Site:
        app = web.Application()
        app.router.add_get("/{tail:.*}", self.handle)
        self._runner = web.AppRunner(app)
        await self._runner.setup()
        origins = []
        for host in ("127.0.0.2", "127.0.0.3"):
            site = web.TCPSite(self._runner, host, 0)
            await site.start()
            port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
            origins.append(f"http://{host}:{port}")
        self.a, self.b = origins
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._runner is not None
        await self._runner.cleanup()

    async def handle(self, request: web.Request) -> web.Response:
        self.log.append((request.host, request.path_qs))
        if request.path == "/robots.txt":
            return web.Response(text=ROBOTS)
        links: list[str] = []
        if request.host == self.a.removeprefix("http://") and request.path == "/":
            links = [
                "/private/1",
                "/private/2",
                "/?sort=price",
                "/public/1",
                f"{self.b}/private/3",  # another origin: its robots.txt is not known yet
                f"{self.b}/public/4",
            ]
        elif request.path == "/public/1":
            links = ["/", "/private/1", "/private/5"]  # one known, one new and disallowed
        body = "".join(f'<a href="{href}">{href}</a>\n' for href in links)
        return web.Response(text=f"<html><body>{body}</body></html>", content_type="text/html")


async def test_known_disallowed_links_are_never_fetch_work(
    env: dict[str, str], settings: Any, pool: Any, nc: Any, namespace: str, tmp_path: Path
) -> None:
    published: list[str] = []

    async def on_work(msg: Any) -> None:
        published.append(msgspec.json.decode(msg.data, type=FetchWork).attempt.url)

    sub = await nc.subscribe(Names(namespace).fetch, cb=on_work)
    async with Site() as site:
        definition = {
            "name": "site",
            "seeds": [f"{site.a}/"],
            "allowed_domains": [site.a.removeprefix("http://"), site.b.removeprefix("http://")],
            "allow_private": ["127.0.0.2/32", "127.0.0.3/32"],
            "robots": "obey",
            "pacing": {"profile": "fast"},
        }
        async with pool.acquire() as conn:
            await save_source(conn, source_from_dict(definition))
        async with Stack(env, tmp_path / "logs") as stack, TrawlClient(settings) as client:
            reply = await client.trigger("site")
            summary = await client.wait(reply.job_id, timeout=100)
            assert summary["status"] == "completed", stack.logs()
            job = await client.job(reply.job_id)
        await nc.flush()
        await sub.unsubscribe()
        async with pool.acquire() as conn:
            rows = await conn.fetch(
                "SELECT url, state, last_outcome FROM entries WHERE job_id = $1", reply.job_id
            )
    a, b = site.a, site.b
    outcomes = {r["url"]: (r["state"], r["last_outcome"]) for r in rows}
    disallowed = ("done", "robots_disallowed")
    settled = [f"{a}/private/1", f"{a}/private/2", f"{a}/?sort=price", f"{a}/private/5"]
    assert {url: outcomes[url] for url in [*settled, f"{b}/private/3"]} == dict.fromkeys(
        [*settled, f"{b}/private/3"], disallowed
    )
    assert job["counters"]["outcome_robots_disallowed"] == 5
    # Settled at admission: never published. The other origin's link went to the fetcher,
    # which read that origin's robots.txt and disallowed it.
    assert Counter(published) == Counter(
        [f"{a}/", f"{a}/public/1", f"{b}/private/3", f"{b}/public/4"]
    )
    assert not [path for _, path in site.log if path.startswith("/private") or "sort=" in path]
    robots = Counter(host for host, path in site.log if path == "/robots.txt")
    assert robots == Counter({a.removeprefix("http://"): 1, b.removeprefix("http://"): 1})
