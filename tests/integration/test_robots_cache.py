"""RobotsCache against the real NATS: rules, statuses, expiry, and one fetch for two replicas."""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import AsyncIterator
from typing import Any
from uuid import uuid4

import nats
import pytest
from nats.js.kv import KeyValue
from protego import Protego
from yarl import URL

from services.fetcher.robots import RobotsCache, RobotsVerdict, robots_key
from shared import robots as robots_module

NATS_URL = "nats://127.0.0.1:4222"

RULES = b"""\
User-agent: *
Disallow: /cart
Crawl-delay: 2

User-agent: trawl
Disallow: /private
Allow: /private/ok

User-agent: AcmeBot
Disallow: /acme
Crawl-delay: 7
"""


class Origin:
    """A fake robots.txt server: answers from a table and counts the fetches."""

    def __init__(self, table: dict[str, tuple[int | None, bytes]]) -> None:
        self.table = table
        self.calls: Counter[str] = Counter()
        self.gate: asyncio.Event | None = None

    async def __call__(self, robots_url: str) -> tuple[int | None, bytes]:
        self.calls[robots_url] += 1
        if self.gate is not None:
            await self.gate.wait()
        return self.table.get(robots_url, (404, b""))


class Clock:
    def __init__(self) -> None:
        self.now = time.time()

    def __call__(self) -> float:
        return self.now


class CountingKV:
    """A KeyValue proxy that counts ``create`` calls, to see both replicas contend for the lease."""

    def __init__(self, kv: KeyValue) -> None:
        self._kv = kv
        self.creates = 0

    async def create(self, key: str, value: bytes) -> int:
        self.creates += 1
        return await self._kv.create(key, value)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._kv, name)


async def eventually(condition: Any, within: float = 5.0) -> None:
    deadline = time.monotonic() + within
    while not condition():
        assert time.monotonic() < deadline, "condition not met in time"
        await asyncio.sleep(0.01)


@pytest.fixture
async def kv() -> AsyncIterator[KeyValue]:
    async def quiet(exc: Exception) -> None:
        pass

    nc = await nats.connect(
        NATS_URL, max_reconnect_attempts=3, reconnect_time_wait=0.2, error_cb=quiet
    )
    js = nc.jetstream()
    bucket = f"test_{uuid4().hex[:10]}_robots"
    try:
        yield await js.create_key_value(bucket=bucket, ttl=120, direct=True)
    finally:
        await js.delete_key_value(bucket)
        await nc.close()


async def test_rules_and_crawl_delay(kv: KeyValue) -> None:
    origin = Origin(
        {
            "https://shop.example/robots.txt": (200, RULES),
            "http://plain.example:8080/robots.txt": (200, b"User-agent: *\nDisallow: /cart\n"),
        }
    )
    cache = RobotsCache(kv, origin)

    # Our token has its own group: it replaces `*` (RFC 9309), but `*`'s delay still applies.
    assert await cache.check("https://shop.example/private/x") == RobotsVerdict(False, 2.0)
    assert await cache.check("https://shop.example/private/ok/1") == RobotsVerdict(True, 2.0)
    assert await cache.check("https://shop.example/cart") == RobotsVerdict(True, 2.0)
    assert (await cache.check("https://shop.example/robots.txt")).allowed
    # A source's own UA: its group is obeyed too, and the longer delay wins.
    acme = "AcmeBot/1.0 (+https://acme.example/bot)"
    assert await cache.check("https://shop.example/acme/1", acme) == RobotsVerdict(False, 7.0)
    assert await cache.check("https://shop.example/private/x", acme) == RobotsVerdict(False, 7.0)
    assert await cache.check("https://shop.example/p/1", acme) == RobotsVerdict(True, 7.0)

    # Only `*`: it applies to us. The port is part of the origin.
    assert await cache.check("http://plain.example:8080/cart?x=1") == RobotsVerdict(False, None)
    assert await cache.check("http://plain.example:8080/p/2") == RobotsVerdict(True, None)

    assert origin.calls == {
        "https://shop.example/robots.txt": 1,
        "http://plain.example:8080/robots.txt": 1,
    }
    # A second replica finds the records in KV and fetches nothing.
    other = RobotsCache(kv, origin)
    assert not (await other.check("https://shop.example/private/x")).allowed
    assert sum(origin.calls.values()) == 2
    entry = await kv.get(robots_key(URL("https://shop.example/a")))
    assert entry.key == "https_shop.example_443"


async def test_404_allows_everything(kv: KeyValue) -> None:
    clock = Clock()
    origin = Origin({"https://open.example/robots.txt": (404, b"<html>not found</html>")})
    cache = RobotsCache(kv, origin, ttl=3600, clock=clock)
    assert await cache.check("https://open.example/anything") == RobotsVerdict(True, None)
    assert await cache.check("https://open.example/else") == RobotsVerdict(True, None)
    assert origin.calls["https://open.example/robots.txt"] == 1
    # After the TTL it is fetched again; any other 4xx means "no robots.txt" as well.
    origin.table["https://open.example/robots.txt"] = (403, b"")
    clock.now += 3601
    assert (await cache.check("https://open.example/anything")).allowed
    assert origin.calls["https://open.example/robots.txt"] == 2


async def test_5xx_and_unreachable_disallow_for_a_while(kv: KeyValue) -> None:
    clock = Clock()
    origin = Origin(
        {
            "https://down.example/robots.txt": (503, b"busy"),
            "https://gone.example/robots.txt": (None, b""),
            "https://slow.example/robots.txt": (429, b""),
        }
    )
    cache = RobotsCache(kv, origin, error_ttl=600, clock=clock)
    for host in ("down", "gone", "slow"):
        assert await cache.check(f"https://{host}.example/p/1") == RobotsVerdict(False, None)
    assert sum(origin.calls.values()) == 3

    # Still disallowed, from the cache, before the error expiry...
    clock.now += 599
    assert not (await cache.check("https://down.example/p/1")).allowed
    assert origin.calls["https://down.example/robots.txt"] == 1
    # ...and fetched again after it.
    origin.table["https://down.example/robots.txt"] = (200, b"User-agent: *\nDisallow: /x\n")
    clock.now += 2
    assert (await cache.check("https://down.example/p/1")).allowed
    assert not (await cache.check("https://down.example/x")).allowed
    assert origin.calls["https://down.example/robots.txt"] == 2

    # When a re-fetch fails, the last good copy stays in force (RFC 9309 §2.4).
    origin.table["https://down.example/robots.txt"] = (500, b"")
    clock.now += 3601
    assert (await cache.check("https://down.example/p/1")).allowed
    assert not (await cache.check("https://down.example/x")).allowed
    assert origin.calls["https://down.example/robots.txt"] == 3


async def test_a_failing_fetch_counts_as_unreachable(kv: KeyValue) -> None:
    async def broken(robots_url: str) -> tuple[int | None, bytes]:
        raise ConnectionResetError("peer reset")

    cache = RobotsCache(kv, broken)
    assert await cache.check("https://broken.example/") == RobotsVerdict(False, None)


async def test_two_replicas_fetch_once(kv: KeyValue) -> None:
    origin = Origin({"https://busy.example/robots.txt": (200, b"User-agent: *\nDisallow: /no\n")})
    origin.gate = asyncio.Event()
    shared = CountingKV(kv)
    replicas = [RobotsCache(shared, origin), RobotsCache(shared, origin)]  # type: ignore[arg-type]
    checks = [
        asyncio.create_task(replica.check(f"https://busy.example/{path}"))
        for replica in replicas
        for path in ("a", "no", "b", "no/x", "c")
    ]
    # Hold the winner's fetch until both replicas went for the lease (one task each: the
    # per-process load is shared), so the loser really has to wait for the winner's record.
    await eventually(lambda: shared.creates >= 2 and sum(origin.calls.values()) == 1)
    origin.gate.set()
    verdicts = await asyncio.wait_for(asyncio.gather(*checks), 10)
    assert [v.allowed for v in verdicts] == [True, False, True, False, True] * 2
    assert origin.calls == {"https://busy.example/robots.txt": 1}
    assert shared.creates == 2


async def test_hot_host_is_parsed_once(kv: KeyValue, monkeypatch: pytest.MonkeyPatch) -> None:
    parses: list[str] = []
    real_parse = robots_module.Protego.parse

    def counting_parse(content: str) -> Protego:
        parses.append(content)
        return real_parse(content)

    monkeypatch.setattr(robots_module.Protego, "parse", counting_parse)
    origin = Origin({"https://hot.example/robots.txt": (200, b"User-agent: *\nDisallow: /x\n")})
    cache = RobotsCache(kv, origin, recheck=0.0)  # re-validate against KV on every check
    for path in ("a", "x", "b", "x/1"):
        assert (await cache.check(f"https://hot.example/{path}")).allowed == (path[0] != "x")
    assert len(parses) == 1  # same KV revision each time: the parsed rules are reused
    assert origin.calls["https://hot.example/robots.txt"] == 1


async def test_abandoned_lease_is_taken_over(kv: KeyValue) -> None:
    clock = Clock()
    origin = Origin({"https://orphan.example/robots.txt": (200, b"User-agent: *\nDisallow: /\n")})
    key = robots_key(URL("https://orphan.example/"))
    # A replica took the lease long ago and died before writing the record.
    await kv.create(f"lease.{key}", repr(clock.now - 60).encode())
    cache = RobotsCache(kv, origin, lease_wait=5.0, clock=clock)
    verdict = await asyncio.wait_for(cache.check("https://orphan.example/p"), 2)
    assert verdict == RobotsVerdict(False, None)
    assert origin.calls["https://orphan.example/robots.txt"] == 1


async def test_a_silent_lease_holder_is_waited_for_then_bypassed(kv: KeyValue) -> None:
    origin = Origin({"https://stuck.example/robots.txt": (404, b"")})
    key = robots_key(URL("https://stuck.example/"))
    # A live lease whose holder never writes: the cache waits out lease_wait, then fetches.
    await kv.create(f"lease.{key}", repr(time.time()).encode())
    cache = RobotsCache(kv, origin, lease_wait=0.3)
    started = time.monotonic()
    assert (await asyncio.wait_for(cache.check("https://stuck.example/p"), 3)).allowed
    assert 0.2 < time.monotonic() - started < 2.5
    assert origin.calls["https://stuck.example/robots.txt"] == 1


async def test_awkward_hosts_make_valid_keys(kv: KeyValue) -> None:
    origin = Origin({})
    cache = RobotsCache(kv, origin)
    for url in ("http://[::1]:8080/x", "http://under_score.example/", "http://127.0.0.2:8801/c"):
        assert (await cache.check(url)).allowed
    assert robots_key(URL("http://[::1]:8080/x")) == "http_=3A=3A1_8080"
    assert robots_key(URL("http://under_score.example/")) == "http_under=5Fscore=2Eexample_80"
    assert robots_key(URL("https://Shop.Example./")) == "https_shop.example_443"
    assert set(origin.calls) == {
        "http://[::1]:8080/robots.txt",
        "http://under_score.example/robots.txt",
        "http://127.0.0.2:8801/robots.txt",
    }


async def test_a_giant_robots_txt_is_cut_at_500_kib_not_ignored(nc, namespace) -> None:
    """A 10 MB robots.txt, live: the rules in its first 500 KiB hold (RFC 9309 §2.5), those
    after the cut are ignored, and its size never turns it into "allow everything"."""
    from aiohttp import web

    from tests.unit.fetcher.loopback import fetcher, serve, work

    head = b"User-agent: *\nDisallow: /private\n"
    padding = b"# " + b"x" * 97 + b"\n"
    giant = head + padding * (10 * 1024 * 1024 // len(padding)) + b"Disallow: /late\n"

    async def site(request: web.BaseRequest) -> web.StreamResponse:
        if request.path == "/robots.txt":
            resp = web.StreamResponse(headers={"Content-Type": "text/plain"})
            await resp.prepare(request)  # chunked: no Content-Length to refuse it by
            for i in range(0, len(giant), 256 * 1024):
                await resp.write(giant[i : i + 256 * 1024])
            await resp.write_eof()
            return resp
        return web.Response(text="<html>page</html>", content_type="text/html")

    async with serve(site, "127.0.0.2") as base, fetcher(nc, namespace) as f:
        results = {
            path: await f.fetch(work(f"{base}{path}", entry_id=i, robots=True))
            for i, path in enumerate(("/private/x", "/late", "/"))
        }
    outcomes = {path: r.outcome for path, r in results.items()}
    assert outcomes == {"/private/x": "robots_disallowed", "/late": "ok", "/": "ok"}


async def test_a_robots_txt_declared_too_large_still_counts(nc, namespace) -> None:
    """The same with a Content-Length over the cap: read up to 500 KiB, not refused."""
    from aiohttp import web

    from tests.unit.fetcher.loopback import fetcher, serve, work

    body = b"User-agent: *\nDisallow: /\n" + b"#" * (600 * 1024)

    async def site(request: web.BaseRequest) -> web.Response:
        if request.path == "/robots.txt":
            return web.Response(body=body, content_type="text/plain")
        return web.Response(text="<html>page</html>", content_type="text/html")

    async with serve(site, "127.0.0.2") as base, fetcher(nc, namespace) as f:
        result = await f.fetch(work(f"{base}/", robots=True))
    assert result.outcome == "robots_disallowed"
