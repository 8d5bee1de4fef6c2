"""KV records that two services share.

``<ns>_proxies``: the scheduler owns the proxy registry and its health (Postgres) and writes the
active list, with credentials, as one document under ``ACTIVE_KEY``; fetchers watch that key.
"""

from __future__ import annotations

import msgspec
from yarl import URL

ACTIVE_KEY = "active"  # the one key of the bucket: the whole active list, written at once


class ProxyEntry(msgspec.Struct, frozen=True):
    """One proxy as the scheduler publishes it (``url`` may hold credentials)."""

    id: int
    url: str


class ActiveProxies(msgspec.Struct, frozen=True):
    proxies: list[ProxyEntry] = []
    at: float = 0.0


encode_active = msgspec.json.Encoder().encode
decode_active = msgspec.json.Decoder(ActiveProxies).decode


def mask_url(url: str) -> str:
    """A proxy URL fit for logs and listings: ``http://user:***@host:port``."""
    try:
        parsed = URL(url)
    except ValueError:
        return "<invalid url>"
    if parsed.password is not None:
        parsed = parsed.with_password("***")
    return str(parsed)
