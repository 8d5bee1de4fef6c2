"""A hostile HTTP server for the fetcher: one raw-socket reply per path, each an answer a broken
or malicious site could give (issue 17's corpus). Raw bytes, because a well-behaved server
library cannot send a malformed header, a lying Content-Length or a drip.

Only listens on loopback. ``HostileServer.hits`` counts the requests per path.
"""

from __future__ import annotations

import asyncio
import contextlib
import gzip
from collections import Counter
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

Reply = Callable[["Conn"], Awaitable[None]]

PAGE = b"<html><head><title>t</title></head><body><p>page</p></body></html>"
ROBOTS_HEAD = b"User-agent: *\nDisallow: /robots-blocked\n"


@dataclass
class Conn:
    """The request a reply answers, and the socket to answer on."""

    path: str
    hit: int  # 1 for the first request to this path
    writer: asyncio.StreamWriter
    server: HostileServer

    async def send(self, data: bytes) -> None:
        self.writer.write(data)
        await self.writer.drain()

    async def respond(
        self, status: str, headers: Sequence[tuple[str, str]] = (), body: bytes = b""
    ) -> None:
        head = [f"HTTP/1.1 {status}"]
        names = {k.lower() for k, _ in headers}
        if "content-length" not in names and "transfer-encoding" not in names:
            head.append(f"Content-Length: {len(body)}")
        head += [f"{k}: {v}" for k, v in headers]
        head.append("Connection: close")
        await self.send(("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + body)


def text(body: bytes) -> Reply:
    """A 200 text/plain reply (a robots.txt)."""

    async def reply(c: Conn) -> None:
        await c.respond("200 OK", [("Content-Type", "text/plain")], body)

    return reply


def html(body: bytes = PAGE) -> Reply:
    """A plain 200 page (the control, or a page of links)."""

    async def reply(c: Conn) -> None:
        await c.respond("200 OK", [("Content-Type", "text/html")], body)

    return reply


def _status_then_ok(status: str, headers: list[tuple[str, str]]) -> Reply:
    """``status`` with ``headers`` on the first request, a page after (a retry succeeds)."""

    async def reply(c: Conn) -> None:
        if c.hit == 1:
            await c.respond(status, [("Content-Type", "text/html"), *headers], b"busy")
        else:
            await html()(c)

    return reply


def _raw(data: bytes) -> Reply:
    async def reply(c: Conn) -> None:
        await c.send(data)

    return reply


def _redirect(location: str) -> Reply:
    async def reply(c: Conn) -> None:
        target = location.format(port=c.server.port, trap=c.server.trap_port, hit=c.hit)
        await c.respond("302 Found", [("Location", target)])

    return reply


async def _drip(c: Conn) -> None:
    """Headers at once, then one byte of body every 0.2 s: only a total timeout ends it."""
    await c.send(b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: 100000\r\n\r\n")
    for _ in range(600):
        await c.send(b"x")
        await asyncio.sleep(0.2)


async def _slow_headers(c: Conn) -> None:
    """Slowloris in reverse: one header line every 0.2 s, never the blank line."""
    await c.send(b"HTTP/1.1 200 OK\r\n")
    for i in range(600):
        await c.send(f"X-Drip-{i}: y\r\n".encode())
        await asyncio.sleep(0.2)


async def _silent(c: Conn) -> None:
    """Accepts, reads the request, never answers."""
    await asyncio.sleep(120)


async def _chunked_forever(c: Conn) -> None:
    """A chunked body with no end, as fast as the client reads it (over any size cap)."""
    await c.send(
        b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nTransfer-Encoding: chunked\r\n\r\n"
    )
    chunk = b"<p>" + b"x" * 65536 + b"</p>"
    for _ in range(2000):  # 130 MB at most
        await c.send(f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n")


_BOMB: bytes | None = None


def _gzip_bomb() -> bytes:
    global _BOMB
    if _BOMB is None:
        _BOMB = gzip.compress(b"\0" * (64 * 1024 * 1024), compresslevel=9)  # 64 MB → ~64 KB
    return _BOMB


async def _bomb(c: Conn) -> None:
    await c.respond(
        "200 OK", [("Content-Type", "text/html"), ("Content-Encoding", "gzip")], _gzip_bomb()
    )


async def _giant_robots(c: Conn) -> None:
    """10 MB of robots.txt, its one rule first (RFC 9309: the first 500 KiB count)."""
    await c.send(
        b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nTransfer-Encoding: chunked\r\n\r\n"
    )
    line = b"# " + b"-" * 97 + b"\n"
    block = ROBOTS_HEAD + line * 2600
    for _ in range(40):  # 40 × 260 KB
        await c.send(f"{len(block):x}\r\n".encode() + block + b"\r\n")
        block = line * 2600
    await c.send(b"0\r\n\r\n")


def corpus() -> dict[str, Reply]:
    """Path → hostile reply. Every one must end its entry (done or failed), none stay open."""
    return {
        # Retry-After: huge, beyond a timestamp, far dates, negative and odd.
        "/retry-after-huge": _status_then_ok(
            "503 Service Unavailable", [("Retry-After", "9999999999")]
        ),
        "/retry-after-1e20": _status_then_ok(
            "429 Too Many Requests", [("Retry-After", "100000000000000000000")]
        ),
        "/retry-after-400-digits": _status_then_ok("503 Busy", [("Retry-After", "9" * 400)]),
        "/retry-after-year-9999": _status_then_ok(
            "503 Busy", [("Retry-After", "Fri, 31 Dec 9999 23:59:59 GMT")]
        ),
        "/retry-after-negative": _status_then_ok("503 Busy", [("Retry-After", "-5")]),
        "/retry-after-superscript": _status_then_ok("429 Slow", [("Retry-After", "¹²³")]),
        "/retry-after-garbage": _status_then_ok("503 Busy", [("Retry-After", "soon, maybe")]),
        # Sizes and decompression.
        "/gzip-bomb": _bomb,
        "/endless-chunked": _chunked_forever,
        "/declared-huge": _raw(
            b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: 1000000000000\r\n\r\n"
            + PAGE
        ),
        "/short-body": _raw(
            b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: 5000\r\n\r\n" + PAGE
        ),
        "/bad-chunk": _raw(
            b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nTransfer-Encoding: chunked\r\n\r\n"
            b"zz\r\nnot a chunk\r\n"
        ),
        # Slow.
        "/slow-drip": _drip,
        "/slow-headers": _slow_headers,
        "/silent": _silent,
        # Loops and hostile redirects.
        "/redirect-loop": _redirect("/redirect-loop"),
        "/redirect-chain": _redirect("/redirect-chain-{hit}"),
        "/redirect-bad-location": _redirect("http://[::1"),
        "/redirect-file": _redirect("file:///etc/passwd"),
        "/redirect-ipv4-compatible": _redirect("http://[::127.0.0.1]:{trap}/"),
        "/redirect-nat64": _redirect("http://[64:ff9b::7f00:1]:{trap}/"),
        "/redirect-metadata": _redirect("http://169.254.169.254/latest/meta-data/"),
        "/redirect-credentials": _redirect("http://user:pw@127.0.0.2:{port}/"),
        # Malformed heads.
        "/header-no-colon": _raw(b"HTTP/1.1 200 OK\r\nContent-Type text/html\r\n\r\n" + PAGE),
        "/header-huge": _raw(b"HTTP/1.1 200 OK\r\nX-Big: " + b"a" * 100_000 + b"\r\n\r\n" + PAGE),
        "/header-flood": _raw(
            b"HTTP/1.1 200 OK\r\n"
            + b"".join(b"X-H%d: v\r\n" % i for i in range(20_000))
            + b"\r\n"
            + PAGE
        ),
        "/header-nul": _raw(b"HTTP/1.1 200 OK\r\nX-A: a\0b\r\nContent-Length: 4\r\n\r\nabcd"),
        "/length-and-chunked": _raw(
            b"HTTP/1.1 200 OK\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n"
            b"4\r\nabcd\r\n0\r\n\r\n"
        ),
        "/length-negative": _raw(b"HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n" + PAGE),
        "/status-garbage": _raw(b"HTTP/1.1 abc WHAT\r\n\r\n"),
        "/status-999": _raw(b"HTTP/1.1 999 Odd\r\nContent-Length: 2\r\n\r\nok"),
        "/not-http": _raw(b"\x16\x03\x01\x00\xa5\x01\x00\x00\xa1\x03\x03garbage"),
        "/empty-reply": _raw(b""),
        "/continue-then-ok": _raw(
            b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Type: text/html\r\n"
            b"Content-Length: %d\r\n\r\n" % len(PAGE) + PAGE
        ),
        # robots.txt of 10 MB: its rule still holds.
        "/robots-blocked/page": html(),
        # A page that is fine: the control.
        "/fine": html(),
    }


class HostileServer:
    """Serves ``corpus()`` on ``host``; ``/robots.txt`` is the 10 MB one. ``trap_port``: a
    listener that counts connections (redirects aim forbidden forms of 127.0.0.1 at it)."""

    def __init__(self, host: str = "127.0.0.2") -> None:
        self.host = host
        self.port = 0
        self.trap_port = 0
        self.trapped = 0
        self.hits: Counter[str] = Counter()
        self.replies = corpus()
        self.robots: Reply = _giant_robots  # replace to serve another robots.txt
        self._server: asyncio.Server | None = None
        self._trap: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    @property
    def base(self) -> str:
        return f"http://{self.host}:{self.port}"

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            path = head.split(b" ", 2)[1].decode("latin-1").split("?")[0]
            self.hits[path] += 1
            if path == "/robots.txt":
                reply: Reply = self.robots
            elif path.startswith("/redirect-chain"):
                reply = self.replies["/redirect-chain"]
            else:
                reply = self.replies.get(path, _raw(b"HTTP/1.1 404 Not Found\r\n\r\n"))
            await reply(Conn(path, self.hits[path], writer, self))
        except (OSError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, IndexError):
            pass  # the client gave up: that is the point of most replies
        finally:
            self._tasks.discard(task)
            with contextlib.suppress(Exception):
                writer.close()

    async def __aenter__(self) -> HostileServer:
        _gzip_bomb()  # built before the clock of any fetch starts

        def trapped(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            self.trapped += 1
            writer.close()

        self._trap = await asyncio.start_server(trapped, "127.0.0.1", 0)
        self.trap_port = self._trap.sockets[0].getsockname()[1]
        self._server = await asyncio.start_server(self._serve, self.host, 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *exc: object) -> None:
        for server in (self._server, self._trap):
            if server is not None:
                server.close()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        for server in (self._server, self._trap):
            if server is not None:
                await server.wait_closed()
