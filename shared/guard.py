"""SSRF guard: trawl only talks to public http(s) targets, or to networks a source (or an alert
rule) allows. The fetcher guards every fetch with it (the renderer every request of a page),
the notifier every webhook.

Two checkpoints, because aiohttp has two paths to a socket:

* **Names** go through the connector's resolver. ``GuardedResolver`` wraps it and drops every
  resolved address that ``check_ip`` refuses, so DNS answers (rebinding included) are checked
  on the very address the connector will dial, on every hop and on every redirect.
* **IP literals** (``http://10.0.0.1/``) never reach a resolver: aiohttp connects to them
  directly. ``check_target`` covers them (and the URL's shape); call it on every hop, or add
  ``guard_trace_config`` to the session so aiohttp calls it for you, redirects included.

How the caller tells an unsafe target from a network error: ``UnsafeURL`` subclasses
``OSError``, so when the resolver raises it aiohttp wraps it like any DNS failure, in
``aiohttp.ClientConnectorDNSError`` (a ``ClientConnectorError``) with ``os_error`` set to the
``UnsafeURL`` and ``__cause__`` pointing at it. ``unsafe_cause(exc)`` walks that chain and
returns the ``UnsafeURL`` or ``None``::

    try:
        async with session.get(url) as resp: ...
    except aiohttp.ClientError as exc:
        if (unsafe := unsafe_cause(exc)) is not None:
            ...  # outcome "unsafe", reason unsafe.reason; never retry
        ...      # a network error: retry later
    except UnsafeURL as exc:  # raised as-is by check_target and by the trace hooks
        ...
"""

from __future__ import annotations

import errno
import ipaddress
import re
import socket
import time
from collections.abc import Iterable
from typing import TYPE_CHECKING

import aiohttp
from aiohttp.abc import AbstractResolver, ResolveResult
from yarl import URL

from shared.errors import SourceError, TrawlError

if TYPE_CHECKING:
    from types import SimpleNamespace

    from shared.settings import Settings

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network

SCHEMES = frozenset({"http", "https"})

# Names of cloud metadata services; they answer on link-local addresses, but a resolver
# (or /etc/hosts) may map them anywhere, so the name itself is refused.
METADATA_HOSTS = frozenset(
    {
        "metadata",
        "metadata.google.internal",
        "metadata.goog",
        "metadata.azure.internal",
        "instance-data",
        "instance-data.ec2.internal",
    }
)

# Metadata endpoints stay forbidden even under `allow_private: true`; only an explicit
# network entry exempts them (nobody crawls a catalog there, credentials live there).
_METADATA_NETS = tuple(
    ipaddress.ip_network(n)
    for n in ("169.254.169.254/32", "169.254.170.2/32", "100.100.100.200/32", "fd00:ec2::254/128")
)

# Checked in order, so a specific label wins over a broad one (metadata before link-local,
# broadcast before reserved). Python's flags back this table up for anything not global.
_FORBIDDEN: tuple[tuple[IPNetwork, str], ...] = tuple(
    (ipaddress.ip_network(net), label)
    for net, label in (
        ("169.254.169.254/32", "a cloud metadata endpoint"),
        ("169.254.170.2/32", "a cloud metadata endpoint"),
        ("100.100.100.200/32", "a cloud metadata endpoint"),
        ("fd00:ec2::254/128", "a cloud metadata endpoint"),
        ("0.0.0.0/8", "unspecified (this network)"),
        ("10.0.0.0/8", "private"),
        ("100.64.0.0/10", "shared address space (CGNAT)"),
        ("127.0.0.0/8", "loopback"),
        ("169.254.0.0/16", "link-local"),
        ("172.16.0.0/12", "private"),
        ("192.0.0.0/24", "reserved for protocol assignments"),
        ("192.0.2.0/24", "documentation"),
        ("192.88.99.0/24", "reserved (6to4 relay)"),
        ("192.168.0.0/16", "private"),
        ("198.18.0.0/15", "reserved for benchmarking"),
        ("198.51.100.0/24", "documentation"),
        ("203.0.113.0/24", "documentation"),
        ("224.0.0.0/4", "multicast"),
        ("255.255.255.255/32", "broadcast"),
        ("240.0.0.0/4", "reserved"),
        ("::/128", "unspecified"),
        ("::1/128", "loopback"),
        ("::/96", "IPv4-compatible IPv6 (deprecated, RFC 4291)"),
        ("64:ff9b:1::/48", "local-use NAT64"),
        ("2001::/32", "Teredo"),
        ("100::/64", "discard-only"),
        ("2001:db8::/32", "documentation"),
        ("fc00::/7", "unique-local"),
        ("fe80::/10", "link-local"),
        ("fec0::/10", "site-local"),
        ("ff00::/8", "multicast"),
    )
)

NAME_TTL = 60.0  # seconds a name's verdict is kept (the connector's DNS cache keeps as long)
# IPv6 ranges whose last 32 bits are an IPv4 address: NAT64 (well-known prefix and the
# local-use /48 of RFC 8215, with the address at the end as a /96 prefix puts it) and the
# deprecated IPv4-compatible ::a.b.c.d (``::`` and ``::1`` are in that range too but are
# read as themselves).
_V4_IN_LAST_32 = tuple(
    ipaddress.IPv6Network(n) for n in ("64:ff9b::/96", "64:ff9b:1::/48", "::/96")
)
_OWN_MEANING = (ipaddress.IPv6Address("::"), ipaddress.IPv6Address("::1"))
# Characters of the numeric IPv4 forms libc accepts: 127.1, 0x7f000001, 0177.0.0.1, 2130706433.
_NUMERIC_V4 = re.compile(r"[0-9a-fA-FxX.]+")


class UnsafeURL(TrawlError, OSError):
    """The target is not a safe place to fetch from.

    Also an ``OSError`` so that aiohttp's connector carries it out of the resolver unchanged
    (see the module docstring); ``errno`` is ``EACCES`` and ``reason`` says why, e.g. "127.0.0.3
    is loopback".
    """

    def __init__(self, reason: str) -> None:
        OSError.__init__(self, errno.EACCES, reason)  # errno and strerror, as OSError sets them
        self.reason = reason

    def __str__(self) -> str:
        return self.reason

    def __reduce__(self) -> tuple[type[UnsafeURL], tuple[str]]:
        return type(self), (self.reason,)


class Allowlist:
    """Networks a source exempts from the guard (its ``allow_private`` policy).

    An entry exempts exactly its network: ``127.0.0.2/32`` leaves ``127.0.0.1`` forbidden.
    ``True`` (or ``["*"]``) exempts every range except the cloud metadata endpoints.
    """

    __slots__ = ("everything", "networks")

    def __init__(self, networks: Iterable[IPNetwork] = (), *, everything: bool = False) -> None:
        self.networks = tuple(networks)
        self.everything = everything

    @classmethod
    def from_policy(cls, allow_private: list[str] | bool) -> Allowlist:
        if allow_private is True:
            return cls(everything=True)
        if not allow_private:
            return cls()
        networks: list[IPNetwork] = []
        for entry in allow_private:
            text = str(entry).strip()
            if text == "*":
                return cls(everything=True)
            try:
                networks.append(ipaddress.ip_network(text, strict=False))
            except ValueError as exc:
                raise SourceError(
                    f"allow_private: {entry!r} is not an IP address or CIDR network"
                ) from exc
        return cls(networks)

    def allows(self, ip: IPAddress) -> bool:
        candidates = [ip, *embedded_ipv4s(ip)]
        for addr in candidates:
            if any(addr in net for net in self.networks):
                return True
        if self.everything:
            return not any(addr in net for addr in candidates for net in _METADATA_NETS)
        return False

    def __repr__(self) -> str:
        if self.everything:
            return "Allowlist(everything=True)"
        return f"Allowlist({[str(n) for n in self.networks]})"


def embedded_ipv4s(ip: IPAddress) -> tuple[ipaddress.IPv4Address, ...]:
    """Every IPv4 address an IPv6 address carries, so each can be checked on its own.

    IPv4-mapped ``::ffff:a.b.c.d``, IPv4-compatible ``::a.b.c.d``, NAT64 ``64:ff9b::a.b.c.d``
    (and the local-use ``64:ff9b:1::/48``), 6to4 ``2002:AABB:CCDD::`` and Teredo
    ``2001:0:SERVER::~CLIENT`` (both its server and its obfuscated client address). A packet
    to any of them may end up at that IPv4 address, through a relay or the host's own stack
    (Python calls ``::7f00:1`` global, Linux may not agree).
    """
    if isinstance(ip, ipaddress.IPv4Address):
        return ()
    if ip.ipv4_mapped is not None:
        return (ip.ipv4_mapped,)
    if ip.sixtofour is not None:
        return (ip.sixtofour,)
    if ip.teredo is not None:
        return ip.teredo
    if ip not in _OWN_MEANING and any(ip in net for net in _V4_IN_LAST_32):
        return (ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF),)
    return ()


def embedded_ipv4(ip: IPAddress) -> ipaddress.IPv4Address | None:
    """The (first) IPv4 address an IPv6 address stands for; see ``embedded_ipv4s``."""
    inner = embedded_ipv4s(ip)
    return inner[0] if inner else None


def forbidden_reason(ip: IPAddress) -> str | None:
    """Why ``ip`` is forbidden ("loopback", "private", …), or ``None`` for a public address.

    An IPv6 form of a forbidden IPv4 address is refused with the IPv4 address's reason. The
    forms that translate to a public IPv4 address (mapped, 6to4, NAT64) are as public as it
    is; the others (IPv4-compatible, local-use NAT64, Teredo) fall to the table below.
    """
    for inner in embedded_ipv4s(ip):
        reason = forbidden_reason(inner)
        if reason is not None:
            return f"an IPv6 form of {inner}, which is {reason}"
    if embedded_ipv4s(ip) and not any(ip in net for net, _ in _FORBIDDEN):
        return None
    for net, label in _FORBIDDEN:
        if ip in net:
            return label
    if not ip.is_global:  # whatever IANA lists as special-purpose and the table missed
        return "not globally routable"
    return None


def parse_ip(host: str) -> IPAddress | None:
    """``host`` as an IP address, or ``None`` for a name.

    IPv4 is read the way libc and browsers read it (``socket.inet_aton``), so the odd forms
    ``2130706435``, ``0x7f000001``, ``0177.0.0.1`` and ``127.1`` all mean 127.0.0.x.
    """
    host = host.strip("[]")
    if ":" in host:
        try:
            return ipaddress.IPv6Address(host)
        except ValueError:
            return None
    # A browser drops one trailing dot before reading a numeric host.
    candidate = host[:-1] if host.endswith(".") else host
    if not candidate or not _NUMERIC_V4.fullmatch(candidate):
        return None
    try:
        return ipaddress.IPv4Address(socket.inet_aton(candidate))
    except OSError:
        return None


def check_url(url: str | URL) -> URL:
    """Refuse a URL by its shape alone: scheme, host, credentials, port, metadata names.

    Returns the parsed URL. IP literals need the source's allowlist: see ``check_target``.
    """
    try:
        parsed = url if isinstance(url, URL) else URL(url)
        scheme = parsed.scheme.lower()
        host = parsed.raw_host
        port = parsed.port
    except (ValueError, TypeError) as exc:
        raise UnsafeURL(f"{url!r} is not a valid URL: {exc}") from exc
    if scheme not in SCHEMES:
        raise UnsafeURL(f"scheme {scheme or '(none)'!r} is not allowed, only http and https")
    if parsed.raw_user is not None or parsed.raw_password is not None:
        raise UnsafeURL("credentials in the URL are not allowed")
    if not host:
        raise UnsafeURL(f"{url!s} has no host")
    if port is None or not 0 < port < 65536:
        raise UnsafeURL(f"port {port} is out of range")
    if _is_metadata_name(host):
        raise UnsafeURL(f"{host} is a cloud metadata endpoint")
    return parsed


def check_ip(ip: str | IPAddress, allow: Allowlist) -> None:
    """Refuse an address that is not public, unless the allowlist exempts it."""
    if isinstance(ip, str):
        parsed = parse_ip(ip)
        if parsed is None:
            raise UnsafeURL(f"{ip!r} is not an IP address")
        ip = parsed
    reason = forbidden_reason(ip)
    if reason is not None and not allow.allows(ip):
        raise UnsafeURL(f"{ip} is {reason}")


def check_target(url: str | URL, allow: Allowlist) -> URL:
    """``check_url`` plus the address check for IP-literal hosts. Call it on every hop."""
    parsed = check_url(url)
    assert parsed.raw_host is not None  # check_url refused hostless URLs
    if (ip := parse_ip(parsed.raw_host)) is not None:
        check_ip(ip, allow)
    return parsed


# Ports of the services trawl runs beside (NATS client, cluster and monitoring; Postgres and
# pgbouncer). A "proxy" there would let an API caller talk to them through the fetcher.
SERVICE_PORTS = frozenset({4222, 6222, 8222, 5432, 6432})


class ProxyRules:
    """Where a proxy may be: a public address, or one of the networks the operator lists
    (``TRAWL_PROXY_NETWORKS``); never a cloud metadata endpoint, and never on a port of one of
    trawl's own services (``SERVICE_PORTS`` and the ports in this deployment's settings).

    Not the sources' ``allow_private``: proxies are global, so only whoever deploys trawl says
    which private networks hold them.
    """

    __slots__ = ("allow", "service_ports")

    def __init__(self, networks: Iterable[str] = (), service_ports: Iterable[int] = ()) -> None:
        self.allow = Allowlist.from_policy(list(networks))
        self.service_ports = SERVICE_PORTS | frozenset(service_ports)

    @classmethod
    def from_settings(cls, settings: Settings) -> ProxyRules:
        ports = set()
        for url in (settings.nats_url, settings.database_url):
            with_scheme = url if "://" in url else f"tcp://{url}"
            try:
                port = URL(with_scheme).explicit_port
            except ValueError:
                port = None
            if port:
                ports.add(port)
        for listen in (settings.api_listen, settings.metrics_listen):
            port_text = listen.rpartition(":")[2]
            if port_text.isdecimal() and int(port_text) > 0:
                ports.add(int(port_text))
        return cls(settings.proxy_networks, ports)


def check_proxy(url: str | URL, rules: ProxyRules) -> URL:
    """Refuse a proxy URL whose address (an IP literal) or port is not a place for a proxy.

    Names are refused when they name a metadata service; the address they resolve to is
    checked when the fetcher connects (the connector's ``GuardedResolver``), like any target.
    Credentials are allowed (``http://user:password@host:port``) and never in the message.
    """
    try:
        parsed = url if isinstance(url, URL) else URL(url)
        scheme, host, port = parsed.scheme.lower(), parsed.raw_host, parsed.port
    except (ValueError, TypeError) as exc:
        raise UnsafeURL(f"the proxy URL is not valid: {exc}") from exc
    if scheme not in SCHEMES or not host or port is None or not 0 < port < 65536:
        raise UnsafeURL("a proxy URL is http(s)://[user:password@]host:port")
    if _is_metadata_name(host):
        raise UnsafeURL(f"proxy {host} is a cloud metadata endpoint")
    if port in rules.service_ports:
        raise UnsafeURL(f"proxy port {port} is the port of one of trawl's own services")
    if (ip := parse_ip(host)) is not None:
        _check_proxy_ip(ip, rules)
    return parsed


async def check_proxy_resolved(
    url: str | URL, rules: ProxyRules, resolver: AbstractResolver | None = None
) -> URL:
    """``check_proxy`` plus, for a name, every address it resolves to now (registration:
    the API and the CLI). A name that does not resolve passes; the connect-time check
    decides then. ``resolver`` defaults to aiohttp's, made and closed here."""
    parsed = check_proxy(url, rules)
    host = parsed.raw_host or ""
    if parse_ip(host) is not None:
        return parsed
    inner = resolver or aiohttp.DefaultResolver()
    try:
        results = await inner.resolve(host, parsed.port or 0, socket.AF_UNSPEC)
    except OSError:
        return parsed
    finally:
        if resolver is None:
            await inner.close()
    for result in results:
        if (ip := parse_ip(result["host"])) is not None:
            _check_proxy_ip(ip, rules, f"proxy {host} resolves to {ip}, which")
    return parsed


def _check_proxy_ip(ip: IPAddress, rules: ProxyRules, subject: str = "") -> None:
    subject = subject or f"proxy {ip}"
    if any(a in net for a in (ip, *embedded_ipv4s(ip)) for net in _METADATA_NETS):
        raise UnsafeURL(f"{subject} is a cloud metadata endpoint")
    reason = forbidden_reason(ip)
    if reason is not None and not rules.allow.allows(ip):
        raise UnsafeURL(f"{subject} is {reason} (not in TRAWL_PROXY_NETWORKS)")


def unsafe_cause(exc: BaseException) -> UnsafeURL | None:
    """The ``UnsafeURL`` behind an (aiohttp) exception, or ``None`` for an ordinary error."""
    seen: set[int] = set()
    todo: list[BaseException | None] = [exc]
    while todo:
        current = todo.pop()
        if current is None or id(current) in seen:
            continue
        seen.add(id(current))
        if isinstance(current, UnsafeURL):
            return current
        todo.extend((getattr(current, "os_error", None), current.__cause__, current.__context__))
    return None


class GuardedResolver(AbstractResolver):
    """A resolver that only hands the connector addresses ``check_ip`` accepts.

    Forbidden addresses are dropped; when none is left, ``UnsafeURL`` is raised (aiohttp then
    raises ``ClientConnectorDNSError`` with it as ``os_error``). ``resolver`` defaults to
    aiohttp's ``DefaultResolver``, created on first use because it needs the running loop.
    A resolver passed in belongs to the caller; ``close()`` only closes the one made here.
    aiohttp does not close a resolver it was given either, so close this one yourself.
    """

    def __init__(self, allow: Allowlist, resolver: AbstractResolver | None = None) -> None:
        self.allow = allow
        self._inner = resolver
        self._owns_inner = resolver is None
        self._verdicts: dict[str, tuple[float, str | None]] = {}

    async def resolve(
        self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
    ) -> list[ResolveResult]:
        if _is_metadata_name(host):
            raise UnsafeURL(f"{host} is a cloud metadata endpoint")
        if self._inner is None:
            self._inner = aiohttp.DefaultResolver()
        results = await self._inner.resolve(host, port, family)
        safe: list[ResolveResult] = []
        refused: UnsafeURL | None = None
        for result in results:
            try:
                check_ip(result["host"], self.allow)
            except UnsafeURL as exc:
                refused = refused or exc
            else:
                safe.append(result)
        if not safe:
            if refused is None:
                raise OSError(errno.ENOENT, f"{host} resolved to no address")
            raise UnsafeURL(f"{host}: {refused.reason}")
        return safe

    async def check_name(self, host: str, port: int = 0) -> None:
        """Raise ``UnsafeURL`` when ``host`` resolves only to refused addresses.

        An early check (before robots.txt, and for proxied requests, whose names the proxy
        resolves); verdicts are kept ``NAME_TTL`` seconds. The connector still checks the
        address it dials, so a cached "safe" cannot be turned by DNS rebinding.
        """
        if parse_ip(host) is not None:
            return  # literals are check_target's
        now = time.monotonic()
        cached = self._verdicts.get(host)
        if cached is None or cached[0] < now:
            try:
                await self.resolve(host, port)
                reason = None
            except UnsafeURL as exc:
                reason = exc.reason
            except OSError:
                reason = None  # a DNS failure is the request's network error, not ours
            if len(self._verdicts) > 4096:
                self._verdicts.clear()
            cached = self._verdicts[host] = (now + NAME_TTL, reason)
        if cached[1] is not None:
            raise UnsafeURL(cached[1])

    async def close(self) -> None:
        if self._owns_inner and self._inner is not None:
            await self._inner.close()
            self._inner = None


def guard_trace_config(allow: Allowlist) -> aiohttp.TraceConfig:
    """Session hooks that run ``check_target`` on the first URL and on every redirect target.

    With it, ``session.get(url)`` raises ``UnsafeURL`` itself for IP-literal and badly shaped
    targets; names are still the resolver's job. A redirect is checked before it is followed.
    """

    async def on_start(
        session: aiohttp.ClientSession,
        ctx: SimpleNamespace,
        params: aiohttp.TraceRequestStartParams,
    ) -> None:
        check_target(params.url, allow)

    async def on_redirect(
        session: aiohttp.ClientSession,
        ctx: SimpleNamespace,
        params: aiohttp.TraceRequestRedirectParams,
    ) -> None:
        location = params.response.headers.get("Location")
        if location:
            try:
                target = params.url.join(URL(location))
            except ValueError:
                return  # aiohttp refuses a malformed Location itself
            check_target(target, allow)

    trace = aiohttp.TraceConfig()
    trace.on_request_start.append(on_start)
    trace.on_request_redirect.append(on_redirect)
    return trace


def _is_metadata_name(host: str) -> bool:
    return host.rstrip(".").lower() in METADATA_HOSTS
