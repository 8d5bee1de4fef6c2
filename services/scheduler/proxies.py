"""The proxy registry (Postgres, owned by the scheduler) and its health.

Fetchers have no database: every change to the active set is published to the KV bucket
``<ns>_proxies`` (see ``services/fetcher/proxies.py``), by the CRUD functions here and by the
scheduler's sweep. Health comes from fetch results, which carry the proxy id only.

What counts against a proxy: a block (403/429 seen through it), a network error or timeout
(the proxy or the path through it is down), and the gateway statuses a proxy itself answers
with (407 auth required, 502, 504). Anything else got a real answer from the site: a success.
After ``MAX_CONSECUTIVE_FAILURES`` in a row the proxy is deactivated until ``enable``.
"""

from __future__ import annotations

import contextlib
import logging
import time
from typing import Any

import asyncpg
import msgspec
from nats.js import JetStreamContext
from nats.js.errors import KeyNotFoundError
from yarl import URL

from schemas.messages import FetchResult
from schemas.read import ProxyOut
from schemas.records import (
    ACTIVE_KEY,
    ActiveProxies,
    ProxyEntry,
    decode_active,
    encode_active,
    mask_url,
)
from services.scheduler import store
from services.scheduler.store import Conn
from shared.errors import TrawlError
from shared.names import Names

log = logging.getLogger("trawl.scheduler.proxies")

MAX_CONSECUTIVE_FAILURES = 5
SCHEMES = ("http", "https")
_FAILURE_OUTCOMES = frozenset({"blocked", "network_error", "timeout"})
_GATEWAY_STATUSES = frozenset({407, 502, 504})


class ProxyError(TrawlError):
    """The proxy request is invalid."""


def validate_url(url: str) -> str:
    try:
        parsed = URL(url.strip())
    except ValueError as exc:
        raise ProxyError(f"not a URL: {mask_url(url)}") from exc
    if parsed.scheme not in SCHEMES or not parsed.host or parsed.port is None:
        raise ProxyError(f"a proxy URL is http(s)://[user:password@]host:port, not {mask_url(url)}")
    return str(parsed)


def is_failure(result: FetchResult) -> bool:
    return result.outcome in _FAILURE_OUTCOMES or result.status in _GATEWAY_STATUSES


def _row(record: asyncpg.Record) -> dict[str, Any]:
    """A registry row as shown to operators: the URL masked."""
    out = dict(record)
    out["url"] = mask_url(out["url"])
    return out


def proxy_out(row: dict[str, Any]) -> ProxyOut:
    """The read model of a (masked) registry row, with its health judged."""
    healthy = row["active"] and row["consecutive_failures"] < MAX_CONSECUTIVE_FAILURES
    return ProxyOut(healthy=healthy, **row)


# -- CRUD -------------------------------------------------------------------------------------
async def add_proxy(
    conn: Conn, js: JetStreamContext | None, names: Names | None, url: str
) -> dict[str, Any]:
    """Register a proxy (or re-activate the same URL); returns its row, URL masked."""
    url = validate_url(url)
    row = await store.proxies.add(conn, url)
    await _published(conn, js, names)
    log.info("proxy added", extra={"action": "proxy_added", "proxy": row["id"]})
    return _row(row)


async def list_proxies(conn: Conn) -> list[dict[str, Any]]:
    return [_row(r) for r in await store.proxies.list_all(conn)]


async def get_proxy(conn: Conn, proxy_id: int) -> dict[str, Any] | None:
    row = await store.proxies.get(conn, proxy_id)
    return None if row is None else _row(row)


async def remove_proxy(
    conn: Conn, js: JetStreamContext | None, names: Names | None, proxy_id: int
) -> bool:
    removed = await store.proxies.remove(conn, proxy_id)
    await _published(conn, js, names)
    return removed


async def enable_proxy(
    conn: Conn, js: JetStreamContext | None, names: Names | None, proxy_id: int
) -> dict[str, Any] | None:
    """Re-activate a proxy and forget its failure streak."""
    row = await store.proxies.set_active(conn, proxy_id, True)
    await _published(conn, js, names)
    return _row(row) if row else None


async def disable_proxy(
    conn: Conn, js: JetStreamContext | None, names: Names | None, proxy_id: int
) -> dict[str, Any] | None:
    """Take a proxy out of rotation until it is enabled again."""
    row = await store.proxies.set_active(conn, proxy_id, False)
    if row is None:
        return None
    await _published(conn, js, names)
    return _row(row)


async def _published(conn: Conn, js: JetStreamContext | None, names: Names | None) -> None:
    if js is not None and names is not None:
        await publish_active_proxies(conn, js, names)


# -- health -----------------------------------------------------------------------------------
async def record_proxy_outcome(conn: Conn, result: FetchResult) -> bool:
    """Count one fetch result against its proxy; True when it just got deactivated.

    Not idempotent by itself: call it inside ``apply_fetch_result``'s transaction, after the
    attempt row was inserted, so a redelivered result is not counted twice.
    """
    if result.proxy is None or not result.proxy.isdigit():
        return False
    if not is_failure(result):
        await store.proxies.succeeded(conn, int(result.proxy))
        return False
    error = result.error or f"{result.outcome} (status {result.status})"
    deactivated = await store.proxies.failed(
        conn, int(result.proxy), error[:500], MAX_CONSECUTIVE_FAILURES
    )
    if deactivated:
        log.warning(
            "proxy deactivated after %d consecutive failures",
            MAX_CONSECUTIVE_FAILURES,
            extra={"action": "proxy_deactivated", "proxy": result.proxy},
        )
    return deactivated


async def publish_active_proxies(conn: Conn, js: JetStreamContext, names: Names) -> list[int]:
    """Write the active list (with credentials) for the fetchers; returns the ids written.

    Skips the write when the bucket already holds the same list, so the 2 s sweep costs one
    KV read, not one write.
    """
    entries = [ProxyEntry(id=i, url=url) for i, url in await store.proxies.active(conn)]
    kv = await js.key_value(names.proxies_bucket)
    try:
        current = (await kv.get(ACTIVE_KEY)).value
    except KeyNotFoundError:  # never written, or deleted
        current = None
    if current:
        with contextlib.suppress(msgspec.DecodeError):
            if decode_active(current).proxies == entries:
                return [e.id for e in entries]
    await kv.put(ACTIVE_KEY, encode_active(ActiveProxies(proxies=entries, at=time.time())))
    log.info(
        "active proxies published",
        extra={"action": "proxies_published", "proxies": [e.id for e in entries]},
    )
    return [e.id for e in entries]
