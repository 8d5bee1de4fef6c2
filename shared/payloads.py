"""Raw payload storage: gzip bodies, content-addressed by the SHA-256 of the raw body. The gzip
is ours, or the server's own when it sent one (kept as sent by the fetcher: no second compression).

The JetStream implementation keeps each body as one message on ``<ns>.payload.<sha256>`` in a
stream with ``max_msgs_per_subject=1`` and direct get: NOTES.md §7 measured that 4-5x faster
than the object store per put/get. Bodies whose gzip exceeds one message go to the object store.
References: ``js:<sha256>`` or ``obj:<sha256>``; identical bodies share one reference.
"""

from __future__ import annotations

import asyncio
import gzip
import hashlib
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

import nats.js.errors
from nats.js import JetStreamContext
from nats.js.object_store import ObjectStore

from shared import names as n
from shared.bus import js_publish_retried
from shared.errors import TrawlError
from shared.names import Names
from shared.replies import replies

# Below the server's 1 MiB max_payload with room for headers.
MAX_INLINE = 900 * 1024


# JetStream's error code for "no message found" (as opposed to, say, 10059 "stream not found").
NO_MESSAGE = 10037
# A direct get's status headers: the reply of a miss has no body, only a status.
_NOT_FOUND = "404"


class PayloadNotFound(TrawlError):
    """The payload is not in the store."""


@dataclass(frozen=True)
class StoredPayload:
    ref: str
    sha256: str
    size: int
    stored_size: int


class PayloadStore(Protocol):
    async def put(self, body: bytes | bytearray, packed: bytes | None = None) -> StoredPayload: ...

    async def get(self, ref: str) -> bytes: ...


def inflate(packed: bytes | bytearray) -> bytes:
    """The body of a stored gzip: ``gzip.decompress``, in one zlib call for the one member this
    store holds (ours, or a server's whole member). Anything else (several members, padding,
    damage) goes to ``gzip.decompress``, as before: zlib stops at the first member's end, and
    two members of the same length would pass a length check with half the body."""
    inflater = zlib.decompressobj(31)
    try:
        body = inflater.decompress(packed)
    except zlib.error:
        return gzip.decompress(packed)
    if not inflater.eof or inflater.unused_data:
        return gzip.decompress(packed)
    return body


def compress(body: bytes | bytearray) -> bytes:
    # Level 3: within 6 % of level 5's ratio on HTML for about a third less CPU (measured by
    # bench.fetcher_bench, where compression was the largest single cost per page).
    return gzip.compress(body, compresslevel=3, mtime=0)


class JetStreamPayloadStore:
    def __init__(self, js: JetStreamContext, names: Names) -> None:
        self.js = js
        self.names = names
        self._objects: ObjectStore | None = None

    async def put(self, body: bytes | bytearray, packed: bytes | None = None) -> StoredPayload:
        """``packed``: the body's gzip made already (a server's, which the caller checked
        decodes to exactly ``body``), stored as is; otherwise the body is compressed here.
        Either way the address is the SHA-256 of the body itself."""
        # A bytearray is taken as is (the fetcher reads a body into one): no copy to bytes.
        digest = hashlib.sha256(body).hexdigest()
        if packed is None:
            packed = await _maybe_offload(compress, body)
        if len(packed) <= MAX_INLINE:
            # Acked on the client's one reply subscription (``bus.js_publish``): nats-py's own
            # request draws a random inbox token per publish, a getrandom syscall each page.
            # Retried like every publish: a cluster electing the stream's leader says "no
            # stream" for seconds, and a page fetched is not failed for that.
            await js_publish_retried(
                self.js, self.names.payload(digest), packed, {n.MSG_ID: f"payload-{digest}"}
            )
            ref = f"js:{digest}"
        else:
            store = await self._object_store()
            await store.put(digest, packed)
            ref = f"obj:{digest}"
        return StoredPayload(ref=ref, sha256=digest, size=len(body), stored_size=len(packed))

    async def get(self, ref: str) -> bytes:
        kind, _, digest = ref.partition(":")
        try:
            if kind == "js":
                packed = await self._get_inline(digest)
            elif kind == "obj":
                store = await self._object_store()
                packed = (await store.get(digest)).data or b""
            else:
                raise PayloadNotFound(f"unknown payload reference {ref!r}")
        except nats.js.errors.NotFoundError as exc:
            if exc.err_code != NO_MESSAGE:
                raise  # "stream not found" from a node catching up: the caller tries again
            raise PayloadNotFound(f"payload {ref} not found") from exc
        return await _maybe_offload(inflate, packed)

    async def _get_inline(self, digest: str) -> bytes:
        """A direct get, answered by any replica of the stream; a miss is asked again of the
        stream's leader. On a cluster a replica that is catching up (a node just restarted)
        answers "no message found" for a payload the leader holds: a lost page, unless the
        leader, which has every acknowledged message, confirms the miss."""
        subject = self.names.payload(digest)
        # nats-py's ``get_last_msg(direct=True)``, with the request of ``shared.replies`` and
        # without reading the reply's headers into a message object (its time stamp parsed).
        direct = self.names.payload_direct_get(digest, self.js._prefix)
        msg = await replies(self.js._nc).request(direct, b"", timeout=self.js._timeout)
        status = msg.headers.get(n.STATUS) if msg.headers and not msg.data else None
        if status is None:
            return msg.data
        if status != _NOT_FOUND:
            raise nats.js.errors.APIError.from_msg(msg)
        raw = await self.js.get_last_msg(self.names.payload_stream, subject)
        return raw.data or b""

    async def _object_store(self) -> ObjectStore:
        if self._objects is None:
            self._objects = await self.js.object_store(self.names.large_payload_bucket)
        return self._objects


async def _maybe_offload(
    fn: Callable[[bytes | bytearray], bytes], data: bytes | bytearray
) -> bytes:
    """Run big (de)compressions in a thread so one large page does not stall the loop."""
    if len(data) < 64 * 1024:
        return fn(data)
    return await asyncio.to_thread(fn, data)
