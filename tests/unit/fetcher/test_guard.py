"""The SSRF guard: address rules, URL shapes, and a live aiohttp session on loopback."""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from collections.abc import AsyncIterator

import aiohttp
import pytest
from aiohttp import web
from aiohttp.abc import AbstractResolver, ResolveResult

from shared.errors import SourceError
from shared.guard import (
    Allowlist,
    GuardedResolver,
    ProxyRules,
    UnsafeURL,
    check_ip,
    check_proxy,
    check_proxy_resolved,
    check_target,
    check_url,
    guard_trace_config,
    unsafe_cause,
)

NONE = Allowlist.from_policy([])
DEMO = Allowlist.from_policy(["127.0.0.2/32", "127.0.0.3/32"])


class FakeResolver(AbstractResolver):
    """Answers from a table; no DNS, no connection."""

    def __init__(self, table: dict[str, list[str]]) -> None:
        self.table = table
        self.closed = False

    async def resolve(
        self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
    ) -> list[ResolveResult]:
        if host not in self.table:
            raise OSError(socket.EAI_NONAME, f"{host} not found")
        return [
            ResolveResult(
                hostname=host,
                host=addr,
                port=port,
                family=socket.AF_INET6 if ":" in addr else socket.AF_INET,
                proto=0,
                flags=socket.AI_NUMERICHOST,
            )
            for addr in self.table[host]
        ]

    async def close(self) -> None:
        self.closed = True


# -- addresses ---------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("ip", "reason"),
    [
        ("10.1.2.3", "private"),
        ("172.16.0.1", "private"),
        ("172.31.255.254", "private"),
        ("192.168.1.1", "private"),
        ("100.64.0.1", "CGNAT"),
        ("100.127.255.254", "CGNAT"),
        ("169.254.169.254", "metadata"),
        ("169.254.1.1", "link-local"),
        ("127.0.0.1", "loopback"),
        ("0.0.0.0", "unspecified"),
        ("224.0.0.1", "multicast"),
        ("240.0.0.1", "reserved"),
        ("255.255.255.255", "broadcast"),
        ("192.0.2.10", "documentation"),
        ("::1", "loopback"),
        ("::", "unspecified"),
        ("fd00::1", "unique-local"),
        ("fc00::1", "unique-local"),
        ("fe80::1", "link-local"),
        ("ff02::1", "multicast"),
        ("2001:db8::1", "documentation"),
        ("::ffff:10.0.0.1", "10.0.0.1, which is private"),
        ("::ffff:127.0.0.1", "loopback"),
        ("2002:0a00:0001::1", "10.0.0.1, which is private"),  # 6to4
        ("64:ff9b::7f00:1", "loopback"),  # NAT64
        # IPv4-compatible (::/96): Python calls these global, the guard reads the IPv4 inside.
        ("::127.0.0.1", "127.0.0.1, which is loopback"),
        ("::7f00:3", "127.0.0.3, which is loopback"),
        ("::169.254.169.254", "169.254.169.254, which is a cloud metadata endpoint"),
        ("::10.0.0.1", "10.0.0.1, which is private"),
        ("::8.8.8.8", "IPv4-compatible"),  # deprecated even when public
        ("64:ff9b::a9fe:a9fe", "169.254.169.254, which is a cloud metadata endpoint"),
        ("64:ff9b:1::a00:1", "10.0.0.1, which is private"),  # local-use NAT64
        ("64:ff9b:1::808:808", "local-use NAT64"),
        ("2002:a9fe:a9fe::", "169.254.169.254, which is a cloud metadata endpoint"),
        ("2002:c0a8:101::1", "192.168.1.1, which is private"),
        # Teredo: 2001:0:SERVER:flags:port:~CLIENT; either embedded address counts.
        ("2001:0:a00:1::f5ff:fffe", "10.0.0.1, which is private"),  # server 10.0.0.1
        ("2001:0:808:808::80ff:fffe", "127.0.0.1, which is loopback"),  # client ~7f000001
        ("2001:0:808:808::f7f7:f7f7", "Teredo"),  # both public: still not a place to fetch
    ],
)
def test_forbidden_addresses(ip: str, reason: str) -> None:
    with pytest.raises(UnsafeURL) as err:
        check_ip(ip, NONE)
    assert reason in err.value.reason
    assert str(err.value).startswith(f"{ipaddress.ip_address(ip)} is ")


@pytest.mark.parametrize(
    "ip",
    [
        "93.184.216.34",
        "8.8.8.8",
        "2606:4700::6810:85e5",
        "172.32.0.1",
        "::ffff:8.8.8.8",  # the translated forms of a public address are as public as it is
        "64:ff9b::808:808",
        "2002:808:808::1",
    ],
)
def test_public_addresses_pass(ip: str) -> None:
    check_ip(ip, NONE)


def test_allowlist_exempts_exactly_its_networks() -> None:
    check_ip("127.0.0.2", DEMO)
    check_ip("127.0.0.3", DEMO)
    check_ip("::ffff:127.0.0.2", DEMO)  # the same address, mapped
    for ip in ("127.0.0.1", "127.0.0.4", "10.0.0.1", "::1"):
        with pytest.raises(UnsafeURL):
            check_ip(ip, DEMO)


def test_allowlist_policies() -> None:
    office = Allowlist.from_policy(["10.0.0.0/8", "fd12::/16", "192.168.1.7"])
    check_ip("10.9.8.7", office)
    check_ip("fd12::5", office)
    check_ip("192.168.1.7", office)
    with pytest.raises(UnsafeURL):
        check_ip("192.168.1.8", office)
    for everything in (True, ["*"]):
        allow = Allowlist.from_policy(everything)
        check_ip("127.0.0.1", allow)
        check_ip("fd00::1", allow)
        # The metadata endpoint needs an explicit entry, even under "allow everything".
        with pytest.raises(UnsafeURL, match="metadata"):
            check_ip("169.254.169.254", allow)
    check_ip("169.254.169.254", Allowlist.from_policy(["169.254.169.254/32"]))
    with pytest.raises(UnsafeURL):
        check_ip("127.0.0.1", Allowlist.from_policy(False))
    with pytest.raises(SourceError, match="not-a-network"):
        Allowlist.from_policy(["not-a-network"])


# -- URLs --------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("url", "reason"),
    [
        ("file:///etc/passwd", "scheme"),
        ("ftp://example.com/x", "scheme"),
        ("javascript:alert(1)", "scheme"),
        ("gopher://example.com/", "scheme"),
        ("http://user:secret@example.com/", "credentials"),
        ("http://user@example.com/", "credentials"),
        ("http:///path", "no host"),
        ("http://example.com:0/", "port"),
        ("http://example.com:99999/", "valid URL"),
        ("http://metadata.google.internal/computeMetadata/v1/", "metadata"),
        ("http://METADATA.google.internal./", "metadata"),
    ],
)
def test_check_url_refuses(url: str, reason: str) -> None:
    with pytest.raises(UnsafeURL, match=reason):
        check_url(url)


@pytest.mark.parametrize(
    ("url", "ip"),
    [
        ("http://2130706435/", "127.0.0.3"),  # decimal
        ("http://0x7f000001/", "127.0.0.1"),  # hex
        ("http://0177.0.0.1/", "127.0.0.1"),  # octal
        ("http://127.1/", "127.0.0.1"),  # short
        ("http://0x7f.0.0.1/", "127.0.0.1"),
        ("http://10.0.0.1:8080/x", "10.0.0.1"),
        ("http://[::ffff:10.0.0.1]/", "10.0.0.1"),
        ("https://[fd00::1]/", "fd00::1"),
        ("http://169.254.169.254/latest/meta-data/", "169.254.169.254"),
    ],
)
def test_check_target_reads_odd_literals(url: str, ip: str) -> None:
    check_url(url)  # the shape is fine; the address is not
    with pytest.raises(UnsafeURL, match=ip.replace(".", r"\.")):
        check_target(url, NONE)


def test_check_target_passes_public_and_allowed() -> None:
    assert check_target("https://shop.example/p/1?x=2", NONE).raw_host == "shop.example"
    check_target("http://93.184.216.34/", NONE)
    check_target("http://127.0.0.2:8801/c/kitchen", DEMO)
    check_target("http://2130706434:8801/", DEMO)  # 127.0.0.2 spelt as a number
    with pytest.raises(UnsafeURL, match=r"127\.0\.0\.1 is loopback"):
        check_target("http://127.1:8801/", DEMO)


# -- the resolver ------------------------------------------------------------------------------
async def test_resolver_filters_resolved_addresses() -> None:
    fake = FakeResolver(
        {
            "public.test": ["93.184.216.34"],
            "internal.test": ["10.0.0.5"],
            "mixed.test": ["10.0.0.5", "93.184.216.34"],
            "mapped.test": ["::ffff:10.0.0.1"],
            "ula.test": ["fd00::7"],
            "cgnat.test": ["100.64.1.1"],
            "demo.test": ["127.0.0.2", "127.0.0.1"],
        }
    )
    guarded = GuardedResolver(DEMO, fake)
    assert [r["host"] for r in await guarded.resolve("public.test", 80)] == ["93.184.216.34"]
    assert [r["host"] for r in await guarded.resolve("mixed.test", 80)] == ["93.184.216.34"]
    assert [r["host"] for r in await guarded.resolve("demo.test", 80)] == ["127.0.0.2"]
    for host, reason in [
        ("internal.test", "10.0.0.5 is private"),
        ("mapped.test", "10.0.0.1, which is private"),
        ("ula.test", "unique-local"),
        ("cgnat.test", "CGNAT"),
    ]:
        with pytest.raises(UnsafeURL, match=reason) as err:
            await guarded.resolve(host, 80)
        assert err.value.reason.startswith(host)
    with pytest.raises(UnsafeURL, match="metadata"):
        await guarded.resolve("metadata.google.internal", 80)
    with pytest.raises(OSError) as not_found:
        await guarded.resolve("nowhere.test", 80)
    assert not isinstance(not_found.value, UnsafeURL)
    await guarded.close()
    assert not fake.closed  # a resolver passed in belongs to the caller


async def test_unsafe_target_is_told_apart_from_network_errors() -> None:
    """Through a real ClientSession, without any connection: the resolver refuses first."""
    fake = FakeResolver({"internal.test": ["169.254.169.254"], "down.test": []})
    resolver = GuardedResolver(NONE, fake)
    connector = aiohttp.TCPConnector(resolver=resolver, use_dns_cache=False)
    async with aiohttp.ClientSession(connector=connector) as session:
        with pytest.raises(aiohttp.ClientConnectorError) as err:
            await session.get("http://internal.test/latest/meta-data/")
        unsafe = unsafe_cause(err.value)
        assert unsafe is not None and "metadata" in unsafe.reason
        assert err.value.os_error is unsafe

        with pytest.raises(aiohttp.ClientConnectorError) as err:
            await session.get("http://nowhere.test/")
        assert unsafe_cause(err.value) is None


# -- live, on loopback only --------------------------------------------------------------------
class _Server:
    """A listener that counts the TCP connections it accepts, before any HTTP parsing."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.connections = 0


@pytest.fixture
async def servers() -> AsyncIterator[dict[str, _Server]]:
    """An aiohttp app served on 127.0.0.2 and on 127.0.0.3."""

    async def hello(request: web.Request) -> web.Response:
        return web.Response(text="hello")

    app = web.Application()
    app.router.add_get("/", hello)
    runner = web.AppRunner(app)
    await runner.setup()
    handler = runner.server
    assert handler is not None
    loop = asyncio.get_running_loop()
    found: dict[str, _Server] = {}
    listeners: list[asyncio.Server] = []
    for host in ("127.0.0.2", "127.0.0.3"):
        counts = _Server(0)

        def factory(counts: _Server = counts) -> asyncio.Protocol:
            counts.connections += 1
            return handler()

        listener = await loop.create_server(factory, host, 0)
        listeners.append(listener)
        counts.port = listener.sockets[0].getsockname()[1]
        found[host] = counts
    try:
        yield found
    finally:
        for listener in listeners:
            listener.close()
            await listener.wait_closed()
        await runner.cleanup()


async def test_live_session_reaches_allowed_and_not_forbidden(servers: dict[str, _Server]) -> None:
    port, other = servers["127.0.0.2"].port, servers["127.0.0.3"].port
    names = FakeResolver({"shop-a.test": ["127.0.0.2"], "shop-b.test": ["127.0.0.3"]})
    only_a = Allowlist.from_policy(["127.0.0.2/32"])
    resolver = GuardedResolver(only_a, names)
    connector = aiohttp.TCPConnector(resolver=resolver, use_dns_cache=False)
    trace = guard_trace_config(only_a)
    async with aiohttp.ClientSession(connector=connector, trace_configs=[trace]) as session:
        async with session.get(f"http://shop-a.test:{port}/") as resp:
            assert resp.status == 200
            assert await resp.text() == "hello"
        async with session.get(f"http://127.0.0.2:{port}/") as resp:
            assert resp.status == 200

        # A name resolving to the other loopback address: refused by the resolver.
        with pytest.raises(aiohttp.ClientConnectorError) as err:
            await session.get(f"http://shop-b.test:{other}/")
        assert (unsafe := unsafe_cause(err.value)) is not None
        assert unsafe.reason == "shop-b.test: 127.0.0.3 is loopback"

        # The IP literal, plain and spelt as a number: refused by the trace hook.
        for host in ("127.0.0.3", "2130706435"):
            with pytest.raises(UnsafeURL, match=r"127\.0\.0\.3 is loopback"):
                await session.get(f"http://{host}:{other}/")

    # "localhost" through the real system resolver: loopback, refused.
    system = GuardedResolver(only_a)
    connector = aiohttp.TCPConnector(resolver=system, use_dns_cache=False)
    async with aiohttp.ClientSession(connector=connector) as session:
        with pytest.raises(aiohttp.ClientConnectorError) as err:
            await session.get(f"http://localhost:{port}/")
        assert (unsafe := unsafe_cause(err.value)) is not None
        assert "loopback" in unsafe.reason
    await system.close()

    assert servers["127.0.0.2"].connections >= 1
    assert servers["127.0.0.3"].connections == 0


async def test_redirect_to_forbidden_literal_is_refused(servers: dict[str, _Server]) -> None:
    """A redirect is checked before aiohttp follows it: the hook sees the Location."""
    port = servers["127.0.0.3"].port
    only_a = Allowlist.from_policy(["127.0.0.2/32"])

    async def redirect(request: web.Request) -> web.Response:
        raise web.HTTPFound(f"http://127.0.0.3:{port}/")

    app = web.Application()
    app.router.add_get("/go", redirect)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.2", 0)
    await site.start()
    try:
        redirect_port = runner.addresses[0][1]
        connector = aiohttp.TCPConnector(resolver=GuardedResolver(only_a, FakeResolver({})))
        async with aiohttp.ClientSession(
            connector=connector, trace_configs=[guard_trace_config(only_a)]
        ) as session:
            with pytest.raises(UnsafeURL, match=r"127\.0\.0\.3 is loopback"):
                await session.get(f"http://127.0.0.2:{redirect_port}/go")
    finally:
        await runner.cleanup()
    assert servers["127.0.0.3"].connections == 0


# -- proxies -----------------------------------------------------------------------------------
LAB = ProxyRules(["10.9.0.0/16", "127.0.0.1/32"], service_ports=[8686])


@pytest.mark.parametrize(
    ("url", "reason"),
    [
        ("http://169.254.169.254:80", "metadata"),
        ("http://[::169.254.169.254]:3128", "metadata"),
        ("http://[::ffff:a9fe:a9fe]:3128", "metadata"),
        ("http://metadata.google.internal:80", "metadata"),
        ("http://127.0.0.1:5432", "port 5432"),  # our Postgres, on an allowed network
        ("http://127.0.0.1:4222", "port 4222"),  # NATS
        ("http://127.0.0.1:8686", "port 8686"),  # the API, from the settings
        ("http://u:pw@localhost:6432", "port 6432"),  # by name too: pgbouncer
        ("http://127.0.0.2:3128", "loopback"),  # loopback, but not the listed /32
        ("http://10.8.0.1:3128", "private"),
        ("http://[::127.0.0.2]:3128", "127.0.0.2, which is loopback"),
        ("http://[fd00::1]:3128", "unique-local"),
        ("ftp://1.2.3.4:21", "http(s)"),
    ],
)
def test_proxies_at_forbidden_places_are_refused(url: str, reason: str) -> None:
    with pytest.raises(UnsafeURL) as err:
        check_proxy(url, LAB)
    assert reason in err.value.reason
    assert "pw" not in err.value.reason


@pytest.mark.parametrize(
    "url",
    [
        "http://u:pw@10.9.3.4:3128",  # the deployment's listed network
        "http://127.0.0.1:3128",
        "http://8.8.8.8:8080",
        "https://proxy.example.com:443",  # names: their address is checked at connect
    ],
)
def test_proxies_at_public_or_listed_places_pass(url: str) -> None:
    check_proxy(url, LAB)


def test_proxy_rules_take_the_ports_of_this_deployment() -> None:
    from shared.settings import Settings

    settings = Settings.from_env(
        {
            "NATS_URL": "nats://127.0.0.1:14222",
            "DATABASE_URL": "postgresql://root@127.0.0.1:15432/trawl",
            "TRAWL_API_LISTEN": "127.0.0.1:18686",
            "TRAWL_PROXY_NETWORKS": "10.0.0.0/8, 127.0.0.1",
        }
    )
    rules = ProxyRules.from_settings(settings)
    assert {14222, 15432, 18686, 5432, 4222} <= rules.service_ports
    assert rules.allow.allows(ipaddress.ip_address("10.1.1.1"))
    assert not rules.allow.allows(ipaddress.ip_address("127.0.0.2"))


async def test_a_proxy_name_is_judged_by_its_addresses_at_registration() -> None:
    names = FakeResolver(
        {
            "proxy.lab": ["10.9.1.1"],
            "proxy.office": ["10.8.1.1"],
            "proxy.mixed": ["8.8.8.8", "169.254.169.254"],
            "proxy.example": ["8.8.8.8"],
        }
    )
    await check_proxy_resolved("http://proxy.lab:3128", LAB, names)
    await check_proxy_resolved("http://proxy.example:3128", LAB, names)
    await check_proxy_resolved("http://unknown.invalid:3128", LAB, names)  # connect decides
    for host, reason in (
        ("proxy.office", "proxy.office resolves to 10.8.1.1, which is private"),
        ("proxy.mixed", "cloud metadata"),  # any address, not just the first
    ):
        with pytest.raises(UnsafeURL) as err:
            await check_proxy_resolved(f"http://u:pw@{host}:3128", LAB, names)
        assert reason in err.value.reason and "pw" not in err.value.reason
    with pytest.raises(UnsafeURL, match="loopback"):  # the system resolver: /etc/hosts
        await check_proxy_resolved("http://localhost:3128", ProxyRules())
