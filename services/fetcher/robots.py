"""robots.txt: fetched once per origin for all fetcher replicas, cached in a NATS KV bucket.

Three layers, cheapest first:

1. an in-process LRU of parsed Protego objects, trusted until the record expires and
   re-validated against KV (by revision, no re-parse) every ``recheck`` seconds;
2. the KV bucket the replicas share: one record per origin (status, body, fetch time, expiry);
3. the origin itself, fetched by exactly one task per process (a shared task per origin) and,
   across replicas, by the holder of a short ``kv.create`` lease. A replica that loses the lease
   polls the record with short intervals until the lease's deadline, then fetches itself, so a
   crashed holder costs at most ``lease_wait`` seconds.

Status handling follows RFC 9309 §2.3: 2xx → the rules; other 4xx (404, 401, 403…) → allow
all; 5xx, 429 (as Google does: it means "slow down", not "no robots.txt") and unreachable →
disallow all for ``error_ttl``, re-fetched after that. A 3xx left over means the fetcher gave up
following redirects: treated as unavailable (allow), as the RFC permits. When a re-fetch fails
but an earlier good copy exists, that copy stays in force (§2.4: a cached copy may be used while
robots.txt is unreachable).

What a record says (its parse, and the verdict for our agents: the token ``trawl`` and the
source's own crawler UA) is shared/robots.py's, which the scheduler reads records with too.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from contextlib import suppress
from typing import TYPE_CHECKING

import nats.errors
from nats.js.errors import KeyNotFoundError, KeyWrongLastSequenceError
from yarl import URL

from shared.lru import LRU
from shared.robots import (
    TOKEN,
    RobotsPolicy,
    RobotsRecord,
    RobotsVerdict,
    agents,
    encode_record,
    is_failure,
    parse_record,
    read_record,
    robots_key,
    robots_url_of,
)

if TYPE_CHECKING:
    from nats.js.kv import KeyValue

__all__ = ["FetchRobots", "RobotsCache", "RobotsVerdict", "is_failure", "robots_key"]

log = logging.getLogger(__name__)

FetchRobots = Callable[[str], Awaitable[tuple[int | None, bytes]]]

MAX_BODY = 500 * 1024  # RFC 9309 §2.5: parse at least 500 KiB; the rest is ignored
_POLL_FIRST, _POLL_MAX = 0.02, 0.25


class RobotsCache:
    """robots.txt verdicts for URLs, shared by every replica through the KV bucket ``kv``.

    ``fetch_robots(robots_url)`` returns ``(status, body)``, or ``(None, b"")`` when the origin
    is unreachable; it should follow redirects (RFC 9309 asks for at least five) and pass the
    SSRF guard like any other request. ``clock`` is wall time, shared across processes.
    """

    def __init__(
        self,
        kv: KeyValue,
        fetch_robots: FetchRobots,
        *,
        ttl: float = 3600.0,
        user_agent_token: str = TOKEN,
        error_ttl: float = 600.0,
        lease_wait: float = 5.0,
        recheck: float = 60.0,
        max_parsed: int = 1024,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._kv = kv
        self._fetch_robots = fetch_robots
        self._ttl = ttl
        self._token = user_agent_token
        self._error_ttl = error_ttl
        self._lease_wait = lease_wait
        self._recheck = recheck
        self._clock = clock
        self._parsed: LRU[str, RobotsPolicy] = LRU(max_parsed)
        self._loading: dict[str, asyncio.Task[RobotsPolicy]] = {}

    async def check(self, url: str, user_agent: str | None = None) -> RobotsVerdict:
        policy = await self._policy(robots_url_of(url))
        return policy.verdict(url, agents(user_agent, self._token))

    # -- the in-process layer ---------------------------------------------------------------
    async def _policy(self, url: URL) -> RobotsPolicy:
        key = robots_key(url)
        now = self._clock()
        policy = self._parsed.get(key)
        if (
            policy is not None
            and now < policy.expires_at
            and now < policy.checked_at + self._recheck
        ):
            return policy
        # One load per origin per process; the shield keeps one caller's cancellation from
        # cancelling the load the others are waiting for.
        task = self._loading.get(key)
        if task is None:
            task = asyncio.create_task(self._load(url, key, policy), name=f"robots-load:{key}")
            self._loading[key] = task
            task.add_done_callback(lambda t: self._loaded(key, t))
        return await asyncio.shield(task)

    def _loaded(self, key: str, task: asyncio.Task[RobotsPolicy]) -> None:
        self._loading.pop(key, None)
        if task.cancelled() or task.exception() is not None:
            return
        self._parsed.put(key, task.result())

    # -- the shared layer -------------------------------------------------------------------
    async def _load(self, url: URL, key: str, known: RobotsPolicy | None) -> RobotsPolicy:
        stored = await self._get(key)
        now = self._clock()
        if stored is not None and now < stored[0].expires_at:
            record, revision = stored
            if known is not None and known.revision == revision:
                known.checked_at = now  # unchanged in KV: keep the parsed object
                return known
            return self._parse(record, revision)
        record, revision = await self._refresh(url, key, stale=stored)
        return self._parse(record, revision)

    async def _get(self, key: str) -> tuple[RobotsRecord, int] | None:
        return await read_record(self._kv, key)

    async def _refresh(
        self, url: URL, key: str, stale: tuple[RobotsRecord, int] | None
    ) -> tuple[RobotsRecord, int]:
        lease_key = f"lease.{key}"
        stale_revision = stale[1] if stale else None
        lease, deadline = await self._take_lease(lease_key)
        if lease is None:
            # Another replica is fetching: wait for its record until the lease's deadline, then
            # fetch ourselves (the holder is late or gone).
            fresh = await self._await_record(key, stale_revision, deadline=deadline)
            if fresh is not None:
                return fresh
        try:
            if lease is not None:
                # The previous holder may have written the record between our miss and our lease.
                current = await self._get(key)
                if current is not None and current[1] != stale_revision:
                    return current
            record = await self._fetch(url, previous=stale[0] if stale else None)
            revision = await self._kv.put(key, encode_record(record))
            return record, revision
        finally:
            if lease is not None:
                # Release; a stale revision means someone took the lease over, which is fine.
                with suppress(nats.errors.Error):
                    await self._kv.delete(lease_key, last=lease)

    async def _take_lease(self, lease_key: str) -> tuple[int | None, float]:
        """(our lease revision, or None when another replica holds it; its wall-clock deadline)."""
        now = self._clock()
        deadline = now + self._lease_wait
        stamp = repr(now).encode()
        try:
            return await self._kv.create(lease_key, stamp), deadline
        except KeyWrongLastSequenceError:
            pass
        try:
            entry = await self._kv.get(lease_key)
        except KeyNotFoundError:  # released in between: try once more
            try:
                return await self._kv.create(lease_key, stamp), deadline
            except KeyWrongLastSequenceError:
                return None, deadline
        try:
            theirs = float(entry.value or b"0") + self._lease_wait
        except ValueError:
            theirs = 0.0
        if theirs > now:
            return None, min(theirs, deadline)
        # An abandoned lease (its holder died): take it over with a CAS on its revision.
        try:
            return await self._kv.update(lease_key, stamp, last=entry.revision), deadline
        except KeyWrongLastSequenceError:
            return None, deadline

    async def _await_record(
        self, key: str, stale_revision: int | None, *, deadline: float
    ) -> tuple[RobotsRecord, int] | None:
        interval = _POLL_FIRST
        while True:
            stored = await self._get(key)
            if stored is not None and stored[1] != stale_revision:
                return stored
            remaining = deadline - self._clock()
            if remaining <= 0:
                return None
            await asyncio.sleep(min(interval, remaining))
            interval = min(interval * 2, _POLL_MAX)

    async def _fetch(self, url: URL, previous: RobotsRecord | None) -> RobotsRecord:
        robots_url = str(url.origin().with_path("/robots.txt"))
        try:
            status, body = await self._fetch_robots(robots_url)
        except Exception:  # a broken fetch is an unreachable robots.txt: disallow for now
            log.warning(
                "robots.txt fetch failed",
                exc_info=True,
                extra={"action": "robots_fetch_failed", "url": robots_url},
            )
            status, body = None, b""
        now = self._clock()
        log.info(
            "robots.txt fetched",
            extra={"action": "robots_fetched", "url": robots_url, "status": status},
        )
        if is_failure(status):
            if previous is not None and not is_failure(previous.status):
                # Keep obeying the last good copy while the origin is failing (§2.4).
                return RobotsRecord(
                    previous.status, previous.body, previous.fetched_at, now + self._error_ttl
                )
            return RobotsRecord(status, b"", now, now + self._error_ttl)
        assert status is not None  # is_failure(None) above
        kept = body[:MAX_BODY] if 200 <= status < 300 else b""  # a 4xx body is an error page
        return RobotsRecord(status, kept, now, now + self._ttl)

    def _parse(self, record: RobotsRecord, revision: int) -> RobotsPolicy:
        return parse_record(record, revision, self._clock())
