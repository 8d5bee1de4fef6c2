"""Links a known robots.txt disallows are settled at admission, never dispatched.

On a shop, a good share of a page's new links are facets, sorts and filters that robots.txt
disallows. Each used to cost what a page costs, less the request and the parse: a dispatch, a
fetch-work message, the fetcher's robots check and its result, and the result's statements.
The scheduler now reads the record the fetchers keep for the link's origin in the
``<ns>_robots`` bucket and, when it disallows the link, admits the entry straight into what a
fetcher's ``robots_disallowed`` result would have left (docs/architecture.md, "robots.txt at
admission").

The fetcher stays the authority: the scheduler only short-cuts with a record that exists, has
not expired and is a 2xx robots.txt (rules), judged by shared/robots.py for the same agents as
the fetcher's. No record, an expired one, a failure's "disallow all for now", an unreadable
bucket, a read slower than ``timeout``: "unknown", and the link is admitted as before, for the
fetcher to decide.

Records are cached per origin (bounded, least recently used out), re-read at most every
``recheck`` seconds (by revision: an unchanged record is not parsed again), and never trusted
past their expiry. One read per origin at a time; a slow or failed read is "unknown" until the
next ``recheck``, so an outage costs one wait per origin per interval, not one per link.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from shared.lru import LRU
from shared.robots import RobotsPolicy, agents, parse_record, read_record, robots_key, robots_url_of

if TYPE_CHECKING:
    from nats.js.kv import KeyValue

log = logging.getLogger("trawl.scheduler.robots")

OpenBucket = Callable[[], Awaitable["KeyValue"]]


@dataclass(slots=True)
class _Known:
    """What the bucket held for an origin when last read: a 2xx record's policy, or None."""

    policy: RobotsPolicy | None
    revision: int | None
    read_at: float


class KnownRobots:
    """The records the fetchers keep, as far as this scheduler replica has read them."""

    def __init__(
        self,
        open_bucket: OpenBucket,
        *,
        recheck: float = 5.0,
        timeout: float = 1.0,
        capacity: int = 4096,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._open_bucket = open_bucket
        self._bucket: KeyValue | None = None
        self._recheck = recheck
        self._timeout = timeout
        self._clock = clock  # wall time: records carry the fetchers' unix expiry
        self._known: LRU[str, _Known] = LRU(capacity)
        self._reading: dict[str, asyncio.Task[_Known]] = {}

    def batch(self) -> RobotsAtAdmission:
        """A view for one transaction of admissions: it counts the entries it settled."""
        return RobotsAtAdmission(self)

    async def disallows(self, url: str, user_agent: str | None) -> bool:
        """True only when the origin's known, unexpired 2xx robots.txt disallows ``url`` for
        our token (and ``user_agent``, the source's crawler UA, when it has one)."""
        try:
            parsed = robots_url_of(url)
        except ValueError:
            return False  # not ours to judge: the fetcher reports such a URL
        known = await self._read(robots_key(parsed))
        policy = known.policy if known is not None else None
        if policy is None or policy.rules is None or self._clock() >= policy.expires_at:
            return False
        try:
            return not policy.allows(url, agents(user_agent))
        except ValueError:  # a URL the rules cannot judge: the fetcher's to report
            return False

    async def _read(self, key: str) -> _Known | None:
        known = self._known.get(key)
        if known is not None and self._clock() < known.read_at + self._recheck:
            return known
        task = self._reading.get(key)
        if task is None:
            task = asyncio.create_task(self._load(key, known), name=f"robots-read:{key}")
            self._reading[key] = task
            task.add_done_callback(lambda _: self._reading.pop(key, None))
        try:
            # Admission waits inside its transaction: bounded, and a late read still lands in
            # the cache for the next link.
            return await asyncio.wait_for(asyncio.shield(task), self._timeout)
        except TimeoutError:
            return None

    async def _load(self, key: str, known: _Known | None) -> _Known:
        now = self._clock()
        try:
            if self._bucket is None:
                self._bucket = await self._open_bucket()
            stored = await read_record(self._bucket, key)
        except Exception as exc:  # NATS down, no bucket, a bad reply: "unknown", never a crash
            log.warning(
                "robots record unavailable: %s",
                exc,
                extra={"action": "robots_read_failed", "key": key},
            )
            stored = None
        if stored is None:
            fresh = _Known(None, None, now)
        elif known is not None and known.revision == stored[1]:
            fresh = _Known(known.policy, known.revision, now)  # unchanged: keep the parse
        else:
            record, revision = stored
            status = record.status
            # Only a 2xx robots.txt's rules settle anything; other records leave it to the
            # fetcher (a failure's "disallow all for now" above all: it is re-fetched soon).
            ok = status is not None and 200 <= status < 300
            fresh = _Known(parse_record(record, revision, now) if ok else None, revision, now)
        self._known.put(key, fresh)
        return fresh


class RobotsAtAdmission:
    """One transaction's use of ``KnownRobots``: its decisions, and how many entries it settled
    (read once the transaction has committed, for the metric)."""

    def __init__(self, known: KnownRobots) -> None:
        self.known = known
        self.settled = 0

    async def disallows(self, url: str, user_agent: str | None) -> bool:
        return await self.known.disallows(url, user_agent)
