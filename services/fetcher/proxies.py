"""Proxies in the fetcher: the active list from the KV bucket, one proxy per session.

The scheduler owns the registry and its health (Postgres) and publishes the active proxies,
with their credentials, as one JSON document under ``ACTIVE_KEY`` in ``<ns>_proxies``. The
fetcher has no database: it watches that key and keeps the list in memory.

Choice: a session (``<job>:<domain>``) starts at a stable hash of its key, so every replica
picks the same proxy for it, and each retry (``generation = attempt - 1``) moves one step
round-robin. A block (403/429) is retried with the next attempt, hence through the next proxy
and with the next browser identity.

Each proxy of the list passes ``check_proxy`` first (``ProxyRules`` from the settings): one at
a metadata address, on a private network the deployment did not list, or on a port of our own
services is dropped with a warning, whoever put it in the registry.

Credentials stay in this module: ``Proxy.url`` has them stripped, ``Proxy.headers`` carries
them to aiohttp, and only ``Proxy.id`` leaves the fetcher (``FetchResult.proxy``, logs).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
from collections.abc import Awaitable, Collection
from dataclasses import dataclass
from typing import TypeVar

import aiohttp
import msgspec
import nats.errors
from nats.js.errors import BucketNotFoundError, KeyNotFoundError
from nats.js.kv import KeyValue
from yarl import URL

from schemas.records import ACTIVE_KEY, ActiveProxies, ProxyEntry, decode_active
from shared.errors import TrawlError
from shared.guard import ProxyRules, UnsafeURL, check_proxy

log = logging.getLogger("trawl.fetcher.proxies")

T = TypeVar("T")

RECHECK = 5.0  # seconds of watch silence after which the key is re-read (a broken watcher)


@dataclass(frozen=True, slots=True)
class Proxy:
    id: str
    url: URL  # without credentials
    headers: dict[str, str] | None  # Proxy-Authorization, when the URL had credentials
    secrets: tuple[str, ...] = ()

    @classmethod
    def from_entry(cls, entry: ProxyEntry) -> Proxy:
        url = URL(entry.url)
        if url.user is None:
            return cls(id=str(entry.id), url=url, headers=None)
        user, password = url.user, url.password or ""
        auth = aiohttp.encode_basic_auth(user, password)
        secrets = tuple(s for s in (password, user, auth) if s)
        return cls(str(entry.id), url.with_user(None), {"Proxy-Authorization": auth}, secrets)

    def __repr__(self) -> str:  # the dataclass repr would show the credentials
        return f"Proxy(id={self.id!r}, url={str(self.url)!r})"

    def redact(self, text: str | None) -> str | None:
        """``text`` with this proxy's credentials masked (error strings from aiohttp)."""
        if text is None:
            return text
        for secret in self.secrets:
            text = text.replace(secret, "***")
        return text


def pick(proxies: list[Proxy], session: str, generation: int) -> Proxy | None:
    """The proxy of ``session`` at ``generation``: stable start, one step per retry."""
    if not proxies:
        return None
    start = int.from_bytes(hashlib.blake2b(session.encode(), digest_size=4).digest(), "big")
    return proxies[(start + generation) % len(proxies)]


def pick_avoiding(
    proxies: list[Proxy], session: str, generation: int, avoid: Collection[str]
) -> Proxy | None:
    """The proxy of ``session`` at ``generation``, or the next one not in ``avoid`` (a verify
    job's re-check goes through another proxy than the fetch that saw the change, when there
    is another)."""
    first = pick(proxies, session, generation)
    if first is None or not avoid:
        return first
    for step in range(len(proxies)):
        other = pick(proxies, session, generation + step)
        if other is not None and other.id not in avoid:
            return other
    return first


class ProxyPool:
    """The active proxies, kept current from the KV bucket by ``run()``."""

    def __init__(self, kv: KeyValue | None = None, rules: ProxyRules | None = None) -> None:
        self._kv = kv
        self.rules = rules or ProxyRules()
        self._refused: set[tuple[int, str]] = set()  # warned about once, not on every refresh
        self._proxies: list[Proxy] = []
        self._revision = 0
        self.ready = asyncio.Event()

    @classmethod
    async def open(
        cls, js: nats.js.JetStreamContext, bucket: str, rules: ProxyRules | None = None
    ) -> ProxyPool:
        pool = cls(await js.key_value(bucket), rules)
        await pool.refresh()
        return pool

    @property
    def proxies(self) -> list[Proxy]:
        return self._proxies

    def pick(self, session: str, generation: int, avoid: Collection[str] = ()) -> Proxy | None:
        return pick_avoiding(self._proxies, session, generation, avoid)

    def set(self, entries: list[ProxyEntry]) -> None:
        before = [p.id for p in self._proxies]
        self._proxies = [
            Proxy.from_entry(e) for e in sorted(entries, key=lambda e: e.id) if self._usable(e)
        ]
        self.ready.set()
        after = [p.id for p in self._proxies]
        if after != before:
            log.info(
                "active proxies changed",
                extra={"action": "proxies_changed", "proxies": after},
            )

    def _usable(self, entry: ProxyEntry) -> bool:
        try:
            check_proxy(entry.url, self.rules)
        except UnsafeURL as exc:
            if (entry.id, entry.url) not in self._refused:
                self._refused.add((entry.id, entry.url))
                log.warning(
                    "proxy refused: %s",
                    exc.reason,
                    extra={
                        "action": "proxy_refused",
                        "proxy": str(entry.id),
                        "reason": exc.reason,
                    },
                )
            return False
        return True

    def _apply(self, value: bytes | None, revision: int | None) -> None:
        if revision is not None and revision < self._revision:
            return
        self._revision = revision or self._revision
        try:
            active = decode_active(value) if value else ActiveProxies()
        except msgspec.DecodeError:
            log.warning("proxy list unreadable", extra={"action": "proxies_bad_record"})
            return
        self.set(active.proxies)

    async def refresh(self) -> None:
        assert self._kv is not None
        try:
            entry = await self._kv.get(ACTIVE_KEY)
        except KeyNotFoundError:
            self._apply(None, None)
            return
        self._apply(entry.value, entry.revision)

    async def run(self, stop: asyncio.Event) -> None:
        """Follow the key until ``stop``; any hiccup falls back to re-reading it."""
        assert self._kv is not None
        while not stop.is_set():
            watcher = None
            try:
                watcher = await self._kv.watch(ACTIVE_KEY)
                while not stop.is_set():
                    try:
                        update = await _until_stop(watcher.updates(timeout=RECHECK), stop)
                    except (TimeoutError, nats.errors.TimeoutError):
                        await self.refresh()
                        continue
                    except _Stopped:
                        return
                    if update is None:  # end of the initial values
                        continue
                    value = None if update.operation in ("DEL", "PURGE") else update.value
                    self._apply(value, update.revision)
            except (nats.errors.Error, BucketNotFoundError, OSError) as exc:
                log.warning("proxy watch failed: %s", exc, extra={"action": "proxies_watch_error"})
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), 1.0)
            finally:
                if watcher is not None:
                    with contextlib.suppress(Exception):
                        await watcher.stop()


class _Stopped(TrawlError):
    """The service is stopping."""


async def _until_stop(aw: Awaitable[T], stop: asyncio.Event) -> T:
    """``aw``'s result, or ``_Stopped`` as soon as ``stop`` is set."""
    task = asyncio.ensure_future(aw)
    stopper = asyncio.ensure_future(stop.wait())
    try:
        await asyncio.wait((task, stopper), return_when=asyncio.FIRST_COMPLETED)
    finally:
        stopper.cancel()
    if not task.done():
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await task
        raise _Stopped
    return task.result()
