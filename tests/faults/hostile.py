"""A shop whose replies are hostile in ways an HTTP framework would not let us write: raw bytes
on a loopback socket (issue 17, defect 3). Each product page is a valid page with one poison in
it, and ``truth`` says what trawl must make of it."""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass

HUGE = 2 * 1024 * 1024  # a product name this long made a parse result over 1 MB


@dataclass(frozen=True)
class Page:
    headers: list[bytes]  # raw header lines, beside Content-Length and Connection
    body: bytes


def _product(sku: str, name: str, price: str, *, raw_name: str | None = None) -> bytes:
    """A product page with JSON-LD; ``raw_name`` goes into the JSON text as written (escapes
    and all), where json.dumps would have made it valid."""
    ld = json.dumps(
        {
            "@context": "https://schema.org",
            "@type": "Product",
            "sku": sku,
            "name": "NAME",
            "offers": {"@type": "Offer", "price": price, "priceCurrency": "EUR"},
        }
    ).replace('"NAME"', raw_name if raw_name is not None else json.dumps(name))
    return (
        f'<html><head><script type="application/ld+json">{ld}</script></head>'
        f"<body><p>{sku}</p></body></html>"
    ).encode()


HTML = b"Content-Type: text/html; charset=utf-8"

# path → (page, its product's key, the name the product must be stored with)
PAGES: dict[str, tuple[Page, str, str]] = {
    "/p/good": (Page([HTML], _product("GOOD-1", "Good anvil", "10.00")), "GOOD-1", "Good anvil"),
    "/p/charset": (
        Page([b"Content-Type: text/html; charset=utf-\xff\xfe8"], _product("CS-1", "Bolt", "1")),
        "CS-1",
        "Bolt",
    ),
    "/p/last-modified": (
        Page(
            [HTML, b"Last-Modified: Tue, 24 Nov 2026 \xff\xfe:00 GMT", b'ETag: "\xe9t\xe9"'],
            _product("LM-1", "Hammer", "2.00"),
        ),
        "LM-1",
        "Hammer",
    ),
    "/p/surrogate": (  # JSON-LD that only the lenient decoder reads: "\ud800" stays a surrogate
        Page([HTML], _product("SG-1", "", "3.00", raw_name='"Saw \\ud800 blade"')),
        "SG-1",
        "Saw ? blade",
    ),
    "/p/nul": (  # a NUL, which PostgreSQL text cannot hold
        Page([HTML], _product("NUL-1", "", "5.00", raw_name='"Nut\\u0000bolt"')),
        "NUL-1",
        "Nutbolt",
    ),
    "/p/huge-name": (
        Page([HTML], _product("HN-1", "N" * HUGE, "4.00")),
        "HN-1",
        "N" * 4096,  # capped where the result is built (services/parser/service.py MAX_FIELD)
    ),
}


def _index() -> bytes:
    links = "".join(f'<a href="{path}">{path}</a>' for path in PAGES)
    return f"<html><body>{links}</body></html>".encode()


class HostileShop:
    """Serves ``PAGES`` and an index linking to them on ``host``, one raw reply per connection;
    counts the requests per path."""

    def __init__(self, host: str = "127.0.0.2") -> None:
        self.host = host
        self.port = 0
        self.hits: dict[str, int] = {}
        self._server: asyncio.Server | None = None

    @property
    def base(self) -> str:
        return f"http://{self.host}:{self.port}"

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            path = head.split(b" ", 2)[1].decode("latin-1").split("?")[0]
            self.hits[path] = self.hits.get(path, 0) + 1
            if path in PAGES:
                page = PAGES[path][0]
                status = b"200 OK"
            elif path == "/":
                page, status = Page([HTML], _index()), b"200 OK"
            else:
                page, status = Page([HTML], b"<html>not here</html>"), b"404 Not Found"
            lines = [
                b"HTTP/1.1 " + status,
                *page.headers,
                b"Content-Length: " + str(len(page.body)).encode(),
                b"Connection: close",
            ]
            writer.write(b"\r\n".join(lines) + b"\r\n\r\n" + page.body)
            await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    async def __aenter__(self) -> HostileShop:
        self._server = await asyncio.start_server(self._serve, self.host, 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
