"""One guarded HTTP request: redirects followed by hand (every hop checked), caps on time,
body size and decompressed size, and the outcome taxonomy applied.

The request goes through a ``Transport``: ``PlainTransport`` (aiohttp, for
sources in plain mode) or the browser session of ``services.fetcher.browser`` (TLS and HTTP/2
of the claimed browser). The loop here does not care which: it checks each hop, follows
redirects itself and counts the decompressed body against the cap as it streams in."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass, field
from email.utils import parsedate_to_datetime
from typing import Protocol

import aiohttp
from multidict import CIMultiDict
from yarl import URL

from schemas.outcomes import classify_status
from services.fetcher.inflate import Inflater
from services.fetcher.proxies import Proxy
from shared.guard import (
    Allowlist,
    GuardedResolver,
    UnsafeURL,
    check_target,
    unsafe_cause,
)

REDIRECTS = (301, 302, 303, 307, 308)
CHUNK = 64 * 1024


class TransportError(Exception):
    """A transport's own failure (connection, TLS, protocol): the request's network error."""


class Answer(Protocol):
    """A response whose body has not been read yet."""

    status: int
    headers: CIMultiDict[str]
    content_length: int | None
    gzip: bool  # chunks() gives a gzip member as sent (``inflate.py``), not the body

    def chunks(self) -> AsyncIterator[bytes | memoryview]:
        """The decompressed body (or the gzip member, see ``gzip``), as it arrives."""
        ...


class Transport(Protocol):
    def open(
        self,
        method: str,
        url: URL,
        headers: dict[str, str],
        body: bytes | None,
        proxy: Proxy | None,
    ) -> AbstractAsyncContextManager[Answer]:
        """Send one request (no redirect following); the answer's body is read inside."""
        ...


class _AiohttpAnswer:
    __slots__ = ("_resp", "content_length", "headers", "status")
    gzip = False  # aiohttp decompresses every encoding itself

    def __init__(self, resp: aiohttp.ClientResponse) -> None:
        self._resp = resp
        self.status = resp.status
        self.headers = CIMultiDict(resp.headers)
        self.content_length = resp.content_length

    async def chunks(self) -> AsyncIterator[bytes | memoryview]:
        async for chunk in self._resp.content.iter_chunked(CHUNK):
            yield chunk


class PlainTransport:
    """aiohttp: Python's own TLS and HTTP/1.1. For sites you own (``client: plain``)."""

    def __init__(self, session: aiohttp.ClientSession) -> None:
        self.session = session

    @asynccontextmanager
    async def open(
        self,
        method: str,
        url: URL,
        headers: dict[str, str],
        body: bytes | None,
        proxy: Proxy | None,
    ) -> AsyncIterator[Answer]:
        async with self.session.request(
            method,
            url,
            headers=headers,
            data=body,
            allow_redirects=False,
            proxy=proxy.url if proxy else None,
            proxy_headers=proxy.headers if proxy else None,
        ) as resp:
            yield _AiohttpAnswer(resp)


@dataclass
class Response:
    outcome: str
    url: str
    status: int | None = None
    headers: CIMultiDict[str] = field(default_factory=CIMultiDict)  # case-insensitive
    body: bytes | bytearray | None = None  # a bytearray when read here: filled in place
    # The server's gzip member of ``body``, checked to decode to exactly it: stored as is. A
    # Response built with another body (a rendered page) has none.
    gzip: bytes | None = None
    error: str | None = None
    elapsed_ms: float = 0.0
    retry_after: float | None = None

    @property
    def content_type(self) -> str | None:
        value = self.headers.get("Content-Type")
        return value.split(";")[0].strip().lower() if value else None

    @property
    def charset(self) -> str | None:
        value = self.headers.get("Content-Type", "")
        for part in value.split(";")[1:]:
            key, _, val = part.strip().partition("=")
            if key.lower() == "charset" and val:
                return val.strip("\"' ").lower()
        return None


def parse_retry_after(value: str | None) -> float | None:
    if not value:
        return None
    value = value.strip()
    if value.isascii() and value.isdigit():  # str.isdigit() also takes "¹²³", float() not
        return float(value)
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


async def request(
    transport: Transport | aiohttp.ClientSession,
    url: str,
    *,
    headers: dict[str, str],
    allow: Allowlist,
    timeout: float,
    max_bytes: int,
    max_redirects: int,
    accept_types: list[str] | None,
    proxy: Proxy | None = None,
    resolver: GuardedResolver | None = None,
    method: str = "GET",
    body: bytes | None = None,
    truncate: bool = False,
) -> Response:
    """``resolver`` checks target names when a proxy is used (the proxy resolves them, so the
    connector's guarded resolver never sees them). ``method`` and ``body`` are sent as given
    (an API page); a redirect turns them into a GET as browsers do, except 307/308.
    ``truncate``: a body over ``max_bytes`` is cut there and kept (robots.txt, RFC 9309 §2.5)
    instead of rejected."""
    if isinstance(transport, aiohttp.ClientSession):
        transport = PlainTransport(transport)
    started = time.monotonic()
    try:
        async with asyncio.timeout(timeout):
            response = await _follow(
                transport,
                url,
                headers,
                allow,
                max_bytes,
                max_redirects,
                accept_types,
                proxy,
                resolver,
                method,
                body,
                truncate,
            )
    except TimeoutError:
        response = Response("timeout", url, error=f"no complete response within {timeout:g} s")
    except UnsafeURL as exc:
        response = Response("unsafe_url", url, error=str(exc))
    except (aiohttp.ClientError, OSError, ValueError, TransportError) as exc:
        unsafe = unsafe_cause(exc)
        if unsafe is not None:
            response = Response("unsafe_url", url, error=str(unsafe))
        else:
            response = Response("network_error", url, error=f"{type(exc).__name__}: {exc}")
    response.elapsed_ms = (time.monotonic() - started) * 1000
    return response


async def _follow(
    transport: Transport,
    url: str,
    headers: dict[str, str],
    allow: Allowlist,
    max_bytes: int,
    max_redirects: int,
    accept_types: list[str] | None,
    proxy: Proxy | None,
    resolver: GuardedResolver | None,
    method: str = "GET",
    body: bytes | None = None,
    truncate: bool = False,
) -> Response:
    target = URL(url, encoded=True)
    for _hop in range(max_redirects + 1):
        check_target(target, allow)
        if proxy is not None and resolver is not None:
            await resolver.check_name(target.raw_host or "", target.port or 0)
        async with transport.open(method, target, headers, body, proxy) as resp:
            if resp.status in REDIRECTS and resp.headers.get("Location"):
                target = target.join(URL(resp.headers["Location"]))
                if resp.status not in (307, 308) and method != "GET":
                    method, body = "GET", None  # RFC 9110 §15.4: what every client does
                    headers = {k: v for k, v in headers.items() if k.lower() != "content-type"}
                continue
            return await _read(resp, str(target), max_bytes, accept_types, truncate)
    return Response("rejected", str(target), error=f"more than {max_redirects} redirects")


def accepts(accept_types: list[str], content_type: str) -> bool:
    """Whether ``content_type`` is one of ``accept_types`` (``image/*`` matches any image)."""
    major = content_type.split("/", 1)[0] + "/*"
    return content_type in accept_types or major in accept_types


async def _read(
    resp: Answer,
    url: str,
    max_bytes: int,
    accept_types: list[str] | None,
    truncate: bool = False,
) -> Response:
    out = Response(
        classify_status(resp.status),
        url,
        status=resp.status,
        headers=resp.headers,
        retry_after=parse_retry_after(resp.headers.get("Retry-After")),
    )
    if out.outcome != "ok":
        return out
    if accept_types and out.content_type and not accepts(accept_types, out.content_type):
        out.outcome, out.error = "rejected", f"content type {out.content_type} not accepted"
        return out
    declared = resp.content_length
    if declared is not None and declared > max_bytes and not truncate:
        out.outcome, out.error = "rejected", f"body of {declared} bytes exceeds {max_bytes}"
        return out
    # Counted after decompression, so a gzip (br, zstd) bomb stops at the cap too. Each chunk
    # is copied once, into one buffer that becomes the body: never a list of chunks and their
    # join in memory at the same time (the body was held twice).
    body = bytearray()
    inflater = Inflater() if resp.gzip else None
    async for chunk in resp.chunks():
        if inflater is not None:
            chunk = inflater.feed(chunk, max_bytes - len(body) + 1)
        if len(body) + len(chunk) > max_bytes:
            if truncate:
                body += chunk[: max_bytes - len(body)]
                out.body = body
                return out
            out.outcome, out.error = "rejected", f"body exceeds {max_bytes} bytes"
            return out
        body += chunk
    if inflater is not None:
        out.gzip = inflater.finish()
    out.body = body
    return out
