"""The SSRF guard on the browser transport's own paths: no proxy from the environment, and a
connection that ends up anywhere but a checked address is dropped before its body is read."""

from __future__ import annotations

import pytest
from aiohttp import web
from yarl import URL

from services.fetcher.browser import BrowserSession, Trust
from services.fetcher.identity import identity_for
from shared.guard import Allowlist, GuardedResolver, UnsafeURL, parse_ip
from tests.unit.fetcher.loopback import ForwardProxy, fetcher, serve, work


async def _page(request: web.BaseRequest) -> web.Response:
    return web.Response(text="<html>ok</html>", content_type="text/html")


async def test_environment_proxies_are_not_used(nc, namespace, monkeypatch) -> None:
    async with ForwardProxy() as proxy, serve(_page) as base:
        for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "all_proxy"):
            monkeypatch.setenv(name, proxy.url)
        monkeypatch.delenv("NO_PROXY", raising=False)
        monkeypatch.delenv("no_proxy", raising=False)
        async with fetcher(nc, namespace) as f:
            result = await f.fetch(work(f"{base}/"))
    assert result.outcome == "ok", result.error
    assert result.fingerprint and not result.fingerprint.startswith("pinned")  # the browser path
    assert proxy.requests == []


async def test_a_connection_to_an_unchecked_address_is_dropped_before_the_body() -> None:
    allow = Allowlist.from_policy(["127.0.0.2/32"])
    session = BrowserSession(identity_for("s"), None, GuardedResolver(allow), Trust())
    async with serve(_page) as base:
        url = URL(base + "/")
        async with session.open("GET", url, {}, None, None) as answer:
            assert answer.status == 200
        # As if the pinned address differed from where the connection went.
        pinned = await session._pinned(url)
        pinned.addresses = frozenset({parse_ip("127.0.0.9")})  # type: ignore[arg-type]
        with pytest.raises(UnsafeURL, match="not to a checked address"):
            async with session.open("GET", url, {}, None, None):
                raise AssertionError("the body must not be reachable")
    await session.resolver.close()


async def test_an_unreadable_ca_file_is_a_clear_error(nc, namespace, tmp_path) -> None:
    async with serve(_page) as base, fetcher(nc, namespace) as f:
        missing = str(tmp_path / "missing-ca.pem")
        result = await f.fetch(work(f"https://{base.removeprefix('http://')}/", ca_file=missing))
    assert result.outcome == "rejected"  # the source's setting: no retry would help
    assert result.error is not None and "missing-ca.pem" in result.error
