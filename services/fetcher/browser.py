"""The browser transport: requests that look like the browser the identity claims, down to the
TLS ClientHello (JA4) and the HTTP/2 frames (the Akamai fingerprint).

Built on wreq (Rust, BoringSSL): its profiles carry each browser's handshake, so trawl keeps
them current by upgrading the library, never by writing a handshake of its own. The headers
stay ours (``identity.py``), sent in the identity's order with the library's defaults off.

One ``BrowserSession`` is one identity: its own cookie jar, its proxy, and its own clients, so
no connection ever carries two identities. The SSRF guard keeps its place in front of every
connection:

* trawl resolves a name itself (``GuardedResolver.resolve`` drops refused addresses) and pins
  the checked addresses in the client (``DnsOptions.add_resolve``), so the client never asks
  DNS and a rebinding answer is never dialled. A pin lives ``PIN_TTL`` seconds, then the host
  gets a fresh client and a fresh check (cookies are in the session's jar, not the client).
* the address actually connected (``remote_addr``) is checked against the pin before any byte
  of the body is read.
* no redirect is followed by the client (``redirect.Policy.none()``: ``http.py`` loops and
  checks each hop), no environment proxy is read (``no_proxy`` or the session's own proxy).
"""

from __future__ import annotations

import ipaddress
import os
import re
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import wreq
import wreq.exceptions as wreq_errors
from multidict import CIMultiDict
from yarl import URL

from services.fetcher.http import TransportError
from services.fetcher.identity import Identity, on_the_wire
from services.fetcher.proxies import Proxy
from shared.guard import GuardedResolver, IPAddress, UnsafeURL, parse_ip

PIN_TTL = 120.0  # seconds a host's checked addresses are used before they are checked again
_DRAIN = 64 * 1024  # an unread body this short is drained to keep its connection
MAX_HOSTS = 16  # pinned clients a session keeps (a session is one domain; redirects add a few)
# A kept-alive connection the server closed just as it was reused (its close and our next
# request crossed; a server that closes without "Connection: close" makes it common) fails the
# request's send with an incomplete message or a reset. A browser sends such a request again on
# a new connection without showing an error (Chromium: up to twice); so does this transport, for
# a GET or HEAD, once the host has answered without "Connection: close" (only then can a
# connection have been kept). wreq tells the cause only in the error's text.
STALE_RETRIES = 2
_STALE_ERROR = re.compile(r"IncompleteMessage|ConnectionReset")

_METHODS = {
    name: getattr(wreq.Method, name)
    for name in ("GET", "HEAD", "POST", "PUT", "DELETE", "OPTIONS", "PATCH")
}
# What a failing wreq request raises; all of them are the request's network error.
_WREQ_ERRORS: tuple[type[BaseException], ...] = tuple(
    getattr(wreq_errors, name)
    for name in (
        "TlsError",
        "ConnectionError",
        "ProxyConnectionError",
        "ConnectionResetError",
        "BodyError",
        "BuilderError",
        "DecodingError",
        "RequestError",
        "RedirectError",
        "StatusError",
        "TimeoutError",
    )
)

_PLATFORMS = {
    "windows": wreq.Platform.Windows,
    "macos": wreq.Platform.MacOS,
    "linux": wreq.Platform.Linux,
}


def emulation(identity: Identity, *, headers: bool = False) -> wreq.Emulation:
    """The library profile behind ``identity`` (its ``tls`` field, e.g. ``chrome154/windows``).

    The library's headers are off: ``identity.headers`` are the ones sent, so they can carry the
    locale, Referer and Sec-Fetch-* of each request. A test checks they equal the library's own
    defaults for the profile (``headers=True``).
    """
    name, _, platform = (identity.tls or "").partition("/")
    profile = getattr(wreq.Profile, name[:1].upper() + name[1:], None) if name else None
    if profile is None:
        raise ValueError(f"identity {identity.id} has no browser profile")
    return wreq.Emulation(
        profile=profile,
        platform=_PLATFORMS.get(platform, wreq.Platform.Windows),
        headers=headers,
    )


@dataclass(frozen=True, slots=True)
class Trust:
    """What a session trusts: the source's CA file, else ``SSL_CERT_FILE`` when set (as
    OpenSSL-based clients do; the library would otherwise use its own root store), else the
    library's roots. Verification is never off."""

    ca_file: str | None = None

    def verify(self) -> bool | Path:
        path = self.ca_file or os.environ.get("SSL_CERT_FILE")
        return Path(path) if path else True


class _WreqAnswer:
    __slots__ = ("_resp", "complete", "content_length", "gzip", "headers", "status")

    def __init__(self, resp: wreq.Response) -> None:
        self._resp = resp
        self.complete = False  # the body was read to its end: the connection can be reused
        self.status = resp.status.as_int()
        headers: CIMultiDict[str] = CIMultiDict()
        for name, value in resp.headers:
            headers.add(bytes(name).decode("latin-1"), bytes(value).decode("latin-1"))
        self.content_length = resp.content_length if "Content-Encoding" not in headers else None
        # gzip comes as sent (the client's gzip decoder is off) and is inflated by http.py;
        # its headers go as the decoder left them, so nothing downstream sees the difference.
        self.gzip = headers.get("Content-Encoding", "").strip().lower() == "gzip"
        if self.gzip:
            headers.popall("Content-Encoding")
            headers.popall("Content-Length", None)
        self.headers = headers

    async def chunks(self) -> AsyncIterator[bytes | memoryview]:
        try:
            async with self._resp.stream() as stream:
                async for chunk in stream:
                    if isinstance(chunk, memoryview):  # a HeaderMap is trailers: not body
                        yield chunk
            self.complete = True
        except _WREQ_ERRORS as exc:
            raise TransportError(f"{type(exc).__name__}: {exc}") from exc


@dataclass(slots=True)
class _Pinned:
    client: wreq.Client
    addresses: frozenset[IPAddress]
    until: float
    keeps_alive: bool = False  # the host answered without "Connection: close"

    async def request(self, method: str, url: URL, kwargs: dict[str, Any]) -> wreq.Response:
        verb = method.upper()
        retries = STALE_RETRIES if verb in ("GET", "HEAD") else 0
        while True:
            try:
                return await self.client.request(_METHODS[verb], str(url), **kwargs)
            except _WREQ_ERRORS as exc:
                if not (retries and self.keeps_alive and _STALE_ERROR.search(str(exc))):
                    raise TransportError(f"{type(exc).__name__}: {exc}") from exc
                retries -= 1


@dataclass
class BrowserSession:
    """One identity: a cookie jar, a proxy (or none), and clients pinned to checked addresses.

    Cookies stay in ``jar``: they go out only to the hosts that set them, never into a log or
    a message.
    """

    identity: Identity
    proxy: Proxy | None
    resolver: GuardedResolver
    trust: Trust = Trust()
    key: tuple[str, ...] = ()  # the Sessions key: names the session's cookies in the KV store
    jar: wreq.Jar = field(default_factory=wreq.Jar)
    _clients: dict[str, _Pinned] = field(default_factory=dict)
    last_used: float = field(default_factory=time.monotonic)
    restored: bool = False  # the saved cookies were loaded (cookies.CookieStore)
    cookies_set: bool = False  # a response set cookies since the last save
    _scheme: str = "https"
    _host: str = ""  # the session's domain: where its host-only cookies belong
    _http1: set[str] = field(default_factory=set)  # hosts that answered over HTTP/1.x

    def cookie_lines(self) -> list[tuple[str, str]]:
        """The jar as (URL, Set-Cookie line) pairs, for ``Jar.add`` on another replica; also
        clears ``cookies_set``. A host-only cookie belongs to the session's domain."""
        self.cookies_set = False
        return [
            (f"{self._scheme}://{c.domain or self._host}{c.path or '/'}", str(c))
            for c in self.jar.get_all()
        ]

    def _client(self, addresses: frozenset[IPAddress], host: str | None) -> wreq.Client:
        options: dict[str, Any] = {
            "emulation": emulation(self.identity),
            "redirect": wreq.redirect.Policy.none(),
            "cookie_provider": self.jar,
            "tls_verify": self.trust.verify(),
            "referer": False,
            # Off: the member is kept as sent and stored without compressing again (inflate.py).
            "gzip": False,
            "deflate": True,
            "brotli": True,
            "zstd": True,
        }
        if self.proxy is not None:
            options["proxies"] = [
                wreq.Proxy.all(
                    str(self.proxy.url), custom_http_headers=dict(self.proxy.headers or {})
                )
            ]
        else:
            options["no_proxy"] = True  # and so no HTTP_PROXY / HTTPS_PROXY from the environment
        if host is not None:
            dns = wreq.DnsOptions()
            dns.add_resolve(host, list(addresses))
            options["dns_options"] = dns
        try:
            return wreq.Client(**options)
        except OSError as exc:  # the CA file cannot be read: say which setting
            raise TransportError(f"TLS trust {self.trust.verify()}: {exc.strerror or exc}") from exc
        except _WREQ_ERRORS as exc:
            raise TransportError(f"{type(exc).__name__}: {exc}") from exc

    async def _pinned(self, url: URL) -> _Pinned:
        """The client for ``url``'s host, pinned to addresses the guard accepted."""
        host = url.raw_host or ""
        now = time.monotonic()
        self.last_used = now
        key = "" if self.proxy is not None else host
        pinned = self._clients.get(key)
        if pinned is not None and pinned.until > now:
            return pinned
        if self.proxy is not None:
            # The proxy resolves the name; http.py checked it (resolver.check_name) first.
            pinned = _Pinned(self._client(frozenset(), None), frozenset(), float("inf"))
        elif (literal := parse_ip(host)) is not None:
            # check_target has checked the literal; nothing to resolve.
            pinned = _Pinned(self._client(frozenset({literal}), None), frozenset({literal}), 1e18)
        else:
            answers = await self.resolver.resolve(host, url.port or 0)
            addresses = frozenset(ipaddress.ip_address(a["host"]) for a in answers)
            pinned = _Pinned(self._client(addresses, host), addresses, now + PIN_TTL)
        if len(self._clients) >= MAX_HOSTS and key not in self._clients:
            self._clients.pop(next(iter(self._clients)))
        self._clients[key] = pinned
        return pinned

    @asynccontextmanager
    async def open(
        self,
        method: str,
        url: URL,
        headers: dict[str, str],
        body: bytes | None,
        proxy: Proxy | None,
    ) -> AsyncIterator[_WreqAnswer]:
        """``proxy`` is the session's own (``http.py`` passes it along for the aiohttp path)."""
        pinned = await self._pinned(url)
        if not self._host:
            self._scheme, self._host = url.scheme, url.raw_host or ""
        host = url.raw_host or ""
        http1 = url.scheme == "http" or host in self._http1
        sent, order = on_the_wire(headers, http1=http1)
        kwargs: dict[str, Any] = {"headers": sent, "orig_headers": order}
        if body is not None:
            kwargs["body"] = body
        resp = await pinned.request(method, url, kwargs)
        if resp.version != wreq.Version.HTTP_2 and resp.version != wreq.Version.HTTP_3:
            # An HTTP/1.1-only host: from the next request on it gets HTTP/1.1's headers (the
            # first went as for HTTP/2, the likelier guess, since ALPN decides after the send).
            self._http1.add(host)
        answer = _WreqAnswer(resp)
        if not pinned.keeps_alive and "close" not in answer.headers.get("Connection", "").lower():
            pinned.keeps_alive = True
        if "Set-Cookie" in answer.headers:
            self.cookies_set = True
        try:
            if self.proxy is None:
                _check_connected(resp, pinned.addresses)
            yield answer
        finally:
            small = resp.content_length is not None and resp.content_length <= _DRAIN
            if answer.complete or small or method.upper() == "HEAD":
                # Released and the connection kept (a redirect's short body is drained).
                await resp.__aexit__(None, None, None)
            else:
                await resp.close()  # a body left unread (a cap was hit): drop the connection


def _check_connected(resp: wreq.Response, addresses: frozenset[IPAddress]) -> None:
    """The connection went where the guard said it could, or the body is not read."""
    remote = resp.remote_addr
    if remote is None:
        raise UnsafeURL("the connected address is unknown")
    ip = ipaddress.ip_address(remote.ip())
    if ip not in addresses:
        raise UnsafeURL(f"connected to {ip}, not to a checked address")
