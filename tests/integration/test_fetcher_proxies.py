"""Proxies, live on loopback: rotation after a block, `required` never goes direct, and a
proxy that keeps failing is deactivated and disappears from the fetchers' list."""

from __future__ import annotations

import socket

import msgspec
import pytest

from demo.shop import DemoShop
from services.scheduler.proxies import (
    MAX_CONSECUTIVE_FAILURES,
    add_proxy,
    list_proxies,
    publish_active_proxies,
    record_proxy_outcome,
)
from shared.names import Names
from tests.support.stack import eventually
from tests.unit.fetcher.loopback import ForwardProxy, fetcher, work

SECRET = "s3cret-pw"


@pytest.fixture
async def shop():
    async with DemoShop(hosts=("127.0.0.2",), port=0, products=8) as s:
        yield s


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


async def test_a_block_rotates_to_the_next_proxy(shop, nc, namespace, pool) -> None:
    names = Names(namespace)
    page = shop.truth()[0]["url"]
    async with ForwardProxy() as a, ForwardProxy() as b, fetcher(nc, namespace) as f:
        async with pool.acquire() as conn:
            row_a = await add_proxy(
                conn, nc.jetstream(), names, a.url.replace("//", f"//u:{SECRET}@")
            )
            row_b = await add_proxy(conn, nc.jetstream(), names, b.url)
        assert SECRET not in row_a["url"]

        async def both_known() -> bool:
            return len(f.proxies.proxies) == 2

        await eventually(both_known, timeout=5, what="the fetcher to see both proxies")
        by_id = {str(row_a["id"]): a, str(row_b["id"]): b}
        first = work(page, proxies="required")
        chosen = f.proxies.pick(f"{first.attempt.job_id}:{first.domain}", 0)
        assert chosen is not None
        by_id[chosen.id].refuse = 403  # the session's first proxy is blocked

        blocked = await f.fetch(first)
        retry = await f.fetch(work(page, proxies="required", attempt=2))

        assert (blocked.outcome, blocked.proxy) == ("blocked", chosen.id)
        assert retry.outcome == "ok", retry.error
        assert retry.proxy is not None and retry.proxy != chosen.id
        assert retry.fingerprint != blocked.fingerprint  # new identity with the new proxy
        assert len(by_id[chosen.id].requests) == 1
        assert len(by_id[retry.proxy].requests) == 1
        # Only the forwarding proxy reached the shop; nothing went direct.
        assert [r["path"] for r in shop.request_log] == [page.removeprefix(shop.base_urls[0])]
        # Credentials travel to the proxy only, never in results.
        auth = a.requests[0]["headers"].get("Proxy-Authorization") if a.requests else None
        assert auth is None or auth.startswith("Basic ")
        for result in (blocked, retry):
            assert SECRET not in msgspec.json.encode(result).decode()

        async with pool.acquire() as conn:
            for result in (blocked, retry):
                await record_proxy_outcome(conn, result)
            health = {str(r["id"]): r for r in await list_proxies(conn)}
        assert health[chosen.id]["failures"] == 1
        assert health[retry.proxy]["successes"] == 1
        assert SECRET not in str(health)


async def test_required_without_a_healthy_proxy_never_goes_direct(shop, nc, namespace) -> None:
    page = shop.base_urls[0] + "/"
    async with fetcher(nc, namespace) as f:
        result = await f.fetch(work(page, proxies="required", robots=True))
        direct = await f.fetch(work(page, proxies="optional", entry_id=2))
    assert result.outcome == "no_proxy"
    assert result.proxy is None
    # `optional` with no proxy goes direct; `required` sent nothing, robots.txt included.
    assert direct.outcome == "ok" and direct.proxy is None
    assert [r["path"] for r in shop.request_log] == ["/"]


async def test_five_consecutive_failures_deactivate_a_proxy(shop, nc, namespace, pool) -> None:
    names = Names(namespace)
    js = nc.jetstream()
    page = shop.base_urls[0] + "/"
    dead = f"http://u:{SECRET}@127.0.0.1:{_closed_port()}"
    async with ForwardProxy() as alive, fetcher(nc, namespace) as f:
        async with pool.acquire() as conn:
            row = await add_proxy(conn, js, names, dead)

        async def known() -> bool:
            return [p.id for p in f.proxies.proxies] == [str(row["id"])]

        await eventually(known, timeout=5, what="the fetcher to see the proxy")
        flags = []
        async with pool.acquire() as conn:
            for attempt in range(1, MAX_CONSECUTIVE_FAILURES + 1):
                result = await f.fetch(work(page, proxies="required", attempt=attempt))
                assert result.outcome == "network_error"
                assert result.proxy == str(row["id"])
                assert SECRET not in (result.error or "")
                flags.append(await record_proxy_outcome(conn, result))
            assert flags == [False] * (MAX_CONSECUTIVE_FAILURES - 1) + [True]
            [health] = await list_proxies(conn)
            assert not health["active"]
            assert health["consecutive_failures"] == MAX_CONSECUTIVE_FAILURES
            assert SECRET not in (health["last_error"] or "")
            assert await publish_active_proxies(conn, js, names) == []

        async def emptied() -> bool:
            return f.proxies.proxies == []

        await eventually(emptied, timeout=5, what="the fetcher to drop the dead proxy")
        result = await f.fetch(work(page, proxies="required", attempt=6))
        assert result.outcome == "no_proxy"
        # A success in between resets the streak: a second proxy, 4 failures, 1 success.
        async with pool.acquire() as conn:
            other = await add_proxy(conn, js, names, alive.url)
            ok = await f.fetch(work(page, proxies="optional", entry_id=9))
    assert shop.request_log == [] or all(r["path"] == "/" for r in shop.request_log)
    assert other["active"] and ok.outcome == "ok"


async def test_a_proxy_at_a_forbidden_place_is_never_used(shop, nc, namespace, pool) -> None:
    """Proxies written straight into the registry (past the API's check): one on the port of
    this deployment's Postgres (a listener stands in for it), one at the metadata address, one
    on a private network the deployment did not list. The fetcher drops all three: the work
    finds no proxy, and nothing connects to the stand-in."""
    from shared.settings import Settings
    from tests.unit.fetcher.loopback import Listener

    names = Names(namespace)
    page = shop.base_urls[0] + "/"
    async with Listener("127.0.0.1") as postgres, ForwardProxy() as good:
        settings = Settings.from_env(
            {
                "TRAWL_NAMESPACE": namespace,
                "DATABASE_URL": f"postgresql://root@127.0.0.1:{postgres.port}/trawl",
                "TRAWL_PROXY_NETWORKS": "127.0.0.1/32",
            }
        )
        async with fetcher(nc, namespace, settings) as f:
            async with pool.acquire() as conn:
                for url in (
                    f"http://127.0.0.1:{postgres.port}",
                    "http://169.254.169.254:80",
                    "http://10.0.0.1:3128",
                ):
                    await add_proxy(conn, nc.jetstream(), names, url)
            # The list is applied whole: once the good one is in, the others were judged.
            async with pool.acquire() as conn:
                row = await add_proxy(conn, nc.jetstream(), names, good.url)

            async def judged() -> bool:
                return [p.id for p in f.proxies.proxies] == [str(row["id"])]

            await eventually(judged, timeout=5, what="the fetcher to keep only the good proxy")
            async with pool.acquire() as conn:
                await conn.execute("DELETE FROM proxies WHERE id = $1", row["id"])
                await publish_active_proxies(conn, nc.jetstream(), names)

            async def emptied() -> bool:
                return f.proxies.proxies == []

            await eventually(emptied, timeout=5, what="the fetcher to drop the good proxy")
            result = await f.fetch(work(page, proxies="required"))
    assert result.outcome == "no_proxy"
    assert postgres.connections == 0
    assert good.requests == []
