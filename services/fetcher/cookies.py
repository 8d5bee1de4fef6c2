"""A browser session's cookies in the KV store, so the session keeps them on any replica.

The key is a hash of the session's key (policy, job, domain, identity, proxy): a new identity
after a block is a new visitor and starts without cookies, as in the session itself. The value
is the jar as Set-Cookie lines with the URL each belongs to; the bucket's TTL drops sessions
nobody continues. Cookie values never leave the fetcher otherwise: not in logs, not in
messages.
"""

from __future__ import annotations

import hashlib
import logging

import msgspec
import nats.errors
from nats.js import JetStreamContext
from nats.js.errors import BucketNotFoundError, KeyNotFoundError
from nats.js.kv import KeyValue

from services.fetcher.browser import BrowserSession

log = logging.getLogger("trawl.fetcher.cookies")

_encode = msgspec.json.Encoder().encode
_decode = msgspec.json.Decoder(list[tuple[str, str]]).decode


def cookie_key(session_key: tuple[str, ...]) -> str:
    return hashlib.sha256("\x1f".join(session_key).encode()).hexdigest()


class CookieStore:
    """``kv`` None: the bucket is missing (a namespace provisioned before it existed), so
    cookies stay on this replica until the next provisioning creates it."""

    def __init__(self, kv: KeyValue | None) -> None:
        self.kv = kv

    @classmethod
    async def open(cls, js: JetStreamContext, bucket: str) -> CookieStore:
        try:
            return cls(await js.key_value(bucket))
        except BucketNotFoundError:
            log.warning("no cookie bucket: cookies stay on this replica")
            return cls(None)

    async def restore(self, session: BrowserSession) -> None:
        """Fill a new session's jar with what another replica (or an earlier run) saved."""
        if self.kv is None:
            return
        try:
            entry = await self.kv.get(cookie_key(session.key))
        except KeyNotFoundError:
            return
        except (nats.errors.Error, OSError) as exc:
            # Without them the session is a first visit: worse, not wrong.
            log.warning("cookies not restored: %s", type(exc).__name__)
            return
        try:
            saved = _decode(entry.value or b"[]")
        except msgspec.DecodeError:
            return
        for url, line in saved:
            session.jar.add(line, url)

    async def save(self, session: BrowserSession) -> None:
        lines = session.cookie_lines()
        if self.kv is None:
            return
        try:
            await self.kv.put(cookie_key(session.key), _encode(lines))
        except (nats.errors.Error, OSError) as exc:
            log.warning("cookies not saved: %s", type(exc).__name__)
