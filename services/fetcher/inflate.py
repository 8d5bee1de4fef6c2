"""A gzip response body inflated here, and kept as sent when it can be stored as is.

The payload store keeps gzip. A server that sends gzip has done that work already: storing its
member as sent saves compressing the page again (gzip level 3 cost about 0.16 ms of a 45 KB
page, the fetcher's largest own cost). The member is still inflated here, as it arrives, so the
body is read as the transport's decoder read it: counted against the size cap (a gzip bomb stops
there), content-addressed by the SHA-256 of what it decodes to, and a broken member is the
request's error, as before.

The transport's decoder read the first member and ignored what followed it; so does this one.
The wire's bytes are kept only when they are exactly one whole member: ``gzip.decompress``,
which every reader of the store uses, then reads the same body out.
"""

from __future__ import annotations

import zlib

GZIP = 16 + zlib.MAX_WBITS  # zlib's window bits for a gzip wrapper (header and trailer checked)


class BadGzip(ValueError):
    """The gzip body is corrupt or cut short: the request's network error, as the transport's
    own decoder made it."""


class Inflater:
    """Feed the wire's chunks in order; each call gives the body bytes they decode to."""

    __slots__ = ("_d", "_over", "_wire")

    def __init__(self) -> None:
        self._d = zlib.decompressobj(GZIP)
        self._wire = bytearray()
        self._over = False  # bytes came after the member's end: not storable as sent

    def feed(self, chunk: bytes | memoryview, limit: int) -> bytes:
        """At most ``limit`` bytes of body: a caller asking one more than its room sees a body
        over its cap without inflating the rest (a bomb's output never exists), and feeds no
        more."""
        if self._d.eof:
            self._over = self._over or len(chunk) > 0
            return b""
        self._wire += chunk
        try:
            out = self._d.decompress(chunk, max(1, limit))
        except zlib.error as exc:
            raise BadGzip(f"gzip body: {exc}") from exc
        if self._d.unused_data:
            self._over = True
        return out

    def finish(self) -> bytes | None:
        """At the body's end: the member as sent when it can be stored as is; ``None`` when the
        body was empty or had bytes after the member. A member cut short is an error."""
        if not self._wire:
            return None  # an empty body (a HEAD, a 204): nothing to decode, as before
        if not self._d.eof:
            raise BadGzip("gzip body cut short")
        return None if self._over else bytes(self._wire)
