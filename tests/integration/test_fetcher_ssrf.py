"""SSRF, live: a page server on 127.0.0.2 (allowed by the policy) redirects to other loopback
targets, and the URLs themselves are fetched as discovered links would be. Every one of them
ends as ``unsafe_url`` and a listener on each target sees no connection."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from aiohttp import web

from tests.unit.fetcher.loopback import ForwardProxy, Listener, fetcher, serve, work


@pytest.fixture
async def targets() -> AsyncIterator[dict[str, Listener]]:
    async with Listener("127.0.0.3") as l3, Listener("::1") as l6, Listener("127.0.0.1") as l1:
        yield {"127.0.0.3": l3, "::1": l6, "127.0.0.1": l1}


def _target_urls(t: dict[str, Listener]) -> list[str]:
    return [
        f"http://127.0.0.3:{t['127.0.0.3'].port}/",
        f"http://[::1]:{t['::1'].port}/",
        f"http://2130706435:{t['127.0.0.3'].port}/",  # 127.0.0.3 written in decimal
        f"http://0x7f000003:{t['127.0.0.3'].port}/",
        f"http://localhost:{t['127.0.0.1'].port}/",  # a name that resolves to loopback
    ]


async def _redirector(request: web.BaseRequest) -> web.Response:
    if request.path == "/to":
        raise web.HTTPFound(request.query["url"])
    if request.path == "/twice":  # an allowed hop first, then the forbidden one
        raise web.HTTPFound(f"/to?url={request.query['url']}")
    return web.Response(text="<html>ok</html>", content_type="text/html")


async def test_links_and_redirects_to_loopback_are_refused(nc, namespace, targets) -> None:
    async with serve(_redirector, "127.0.0.2") as base, fetcher(nc, namespace) as f:
        allowed = await f.fetch(work(f"{base}/"))
        assert allowed.outcome == "ok"  # the policy's own network is reachable
        outcomes = {}
        for i, url in enumerate(_target_urls(targets)):
            for how, start in (
                ("link", url),
                ("redirect", f"{base}/to?url={url}"),
                ("second redirect", f"{base}/twice?url={url}"),
            ):
                result = await f.fetch(work(start, entry_id=100 + i, robots=True))
                outcomes[(how, url)] = (result.outcome, result.error)
    wrong = {k: v for k, v in outcomes.items() if v[0] != "unsafe_url"}
    assert not wrong, wrong
    assert {name: t.connections for name, t in targets.items()} == dict.fromkeys(targets, 0)


async def test_a_proxy_does_not_open_a_way_around_the_guard(nc, namespace, pool, targets) -> None:
    from services.scheduler.proxies import add_proxy
    from shared.names import Names
    from tests.support.stack import eventually

    async with ForwardProxy() as proxy, fetcher(nc, namespace) as f:
        async with pool.acquire() as conn:
            await add_proxy(conn, nc.jetstream(), Names(namespace), proxy.url)

        async def known() -> bool:
            return len(f.proxies.proxies) == 1

        await eventually(known, timeout=5, what="the proxy list")
        results = [
            await f.fetch(work(url, entry_id=i, proxies="required"))
            for i, url in enumerate(_target_urls(targets))
        ]
    assert [r.outcome for r in results] == ["unsafe_url"] * len(results)
    assert proxy.requests == []
    assert all(t.connections == 0 for t in targets.values())


def _embedded_forms(port: int) -> dict[str, str]:
    """IPv6 literals that carry a forbidden IPv4 address (127.0.0.3 is the live listener)."""
    return {
        "IPv4-compatible ::a.b.c.d": f"http://[::127.0.0.3]:{port}/",
        "IPv4-compatible, hex": f"http://[::7f00:3]:{port}/",
        "IPv4-compatible metadata": "http://[::169.254.169.254]/latest/meta-data/",
        "IPv4-mapped": f"http://[::ffff:127.0.0.3]:{port}/",
        "NAT64 64:ff9b::/96": f"http://[64:ff9b::7f00:3]:{port}/",
        "NAT64 metadata": "http://[64:ff9b::a9fe:a9fe]/",
        "local-use NAT64 64:ff9b:1::/48": f"http://[64:ff9b:1::a00:1]:{port}/",
        "6to4 2002::/16": f"http://[2002:7f00:3::1]:{port}/",
        "6to4 private": "http://[2002:c0a8:101::1]/",
        "Teredo server 2001::/32": "http://[2001:0:a00:1::f5ff:fffe]/",
        "Teredo client": f"http://[2001:0:808:808::80ff:fffc]:{port}/",  # client ~ = 127.0.0.3
    }


async def test_ipv6_forms_of_private_ipv4_are_refused(nc, namespace, targets) -> None:
    """Each form as the URL of work (a seed or a discovered link: the fetcher sees them
    alike), behind a redirect and behind two: the outcome is ``unsafe_url`` naming the
    embedded IPv4 address, not a network error."""
    port = targets["127.0.0.3"].port
    forms = _embedded_forms(port)
    async with serve(_redirector, "127.0.0.2") as base, fetcher(nc, namespace) as f:
        outcomes = {}
        for i, (name, url) in enumerate(forms.items()):
            for how, start in (
                ("seed or link", url),
                ("redirect", f"{base}/to?url={url}"),
                ("second redirect", f"{base}/twice?url={url}"),
            ):
                result = await f.fetch(work(start, entry_id=200 + i, robots=True))
                outcomes[(name, how)] = (result.outcome, result.error)
    wrong = {k: v for k, v in outcomes.items() if v[0] != "unsafe_url"}
    assert not wrong, wrong
    assert len(outcomes) == 3 * len(forms)
    errors = {name: outcomes[(name, "seed or link")][1] or "" for name in forms}
    for name in ("IPv4-compatible ::a.b.c.d", "IPv4-compatible, hex", "NAT64 64:ff9b::/96"):
        assert "127.0.0.3, which is loopback" in errors[name], errors[name]
    assert "cloud metadata" in errors["IPv4-compatible metadata"]
    assert targets["127.0.0.3"].connections == 0
