"""robots.txt records as the fetchers keep them in the ``<ns>_robots`` KV bucket, and the one
answer to "may these agents fetch this URL" that every reader of a record gives.

The fetcher writes the records (services/fetcher/robots.py: who fetches, when, and what a
failed fetch leaves); the scheduler reads them to settle, at admission, the links a known
robots.txt disallows (services/scheduler/robots.py). Both parse and judge a record here, so
the two can never disagree on what a record says.

Agents: we identify ourselves to robots.txt by a product token (``trawl``), whatever browser
identity the request carries; Protego picks the most specific group for it and falls back to
``*``. When a source brings its own crawler UA (``user_agent``), its group is honoured as well:
a URL is allowed only if both agree, and the longer crawl-delay wins.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

import msgspec
from nats.js.errors import KeyNotFoundError
from protego import Protego
from yarl import URL

if TYPE_CHECKING:
    from nats.js.kv import KeyValue

log = logging.getLogger(__name__)

TOKEN = "trawl"  # the product token we answer to in robots.txt groups
_HOST_KEY_SAFE = re.compile(r"[a-z0-9-]+(\.[a-z0-9-]+)*")


class RobotsVerdict(msgspec.Struct, frozen=True):
    allowed: bool
    crawl_delay: float | None


class RobotsRecord(msgspec.Struct, frozen=True):
    """What one origin's key holds in KV."""

    status: int | None  # None: unreachable
    body: bytes  # base64 in JSON
    fetched_at: float  # unix time of the fetch that produced body/status
    expires_at: float  # unix time after which a replica re-fetches


encode_record = msgspec.json.Encoder().encode
_decode = msgspec.json.Decoder(RobotsRecord).decode


def is_failure(status: int | None) -> bool:
    """Statuses that mean "assume complete disallow for now" (RFC 9309 §2.3.1.4)."""
    return status is None or status >= 500 or status == 429 or status < 200


def agents(user_agent: str | None, token: str = TOKEN) -> tuple[str, ...]:
    """The agents whose groups a URL must satisfy: our token, and the source's own crawler UA
    when it has one."""
    return (token,) if not user_agent else (token, user_agent)


def robots_key(url: URL) -> str:
    """The KV key of a URL's origin, e.g. ``https_shop.example_443``.

    KV keys allow only ``[-/_=.a-zA-Z0-9]``: plain hostnames pass as they are, anything else
    (IPv6 literals, underscores) is escaped as ``=XX`` per character. ``_`` separates the parts
    and is always escaped inside the host, so distinct origins never share a key.
    """
    host = (url.raw_host or "").rstrip(".").lower()
    if not _HOST_KEY_SAFE.fullmatch(host):
        host = "".join(
            c if (c.isalnum() and c.isascii()) or c == "-" else f"={ord(c):02X}" for c in host
        )
    return f"{url.scheme}_{host}_{url.port}"


def robots_url_of(url: str) -> URL:
    """``url`` parsed, when robots.txt applies to it (an http(s) URL with a host); else
    ``ValueError``."""
    parsed = URL(url)
    if parsed.scheme not in ("http", "https") or not parsed.raw_host:
        raise ValueError(f"robots.txt applies to http(s) URLs, not {url!r}")
    return parsed


@dataclass(slots=True)
class RobotsPolicy:
    """A parsed record: ``rules`` for a 2xx robots.txt, else a blanket ``allow_all`` (other
    4xx: no robots.txt; a failure: disallow all for now)."""

    revision: int
    expires_at: float
    checked_at: float
    rules: Protego | None
    allow_all: bool

    def allows(self, url: str, agents: tuple[str, ...]) -> bool:
        """Whether every one of ``agents`` may fetch ``url``."""
        if self.rules is None:
            return self.allow_all
        return all(self.rules.can_fetch(url, agent) for agent in agents)

    def verdict(self, url: str, agents: tuple[str, ...]) -> RobotsVerdict:
        if self.rules is None:
            return RobotsVerdict(allowed=self.allow_all, crawl_delay=None)
        allowed = self.allows(url, agents)
        delays = [d for agent in agents if (d := self._delay(agent)) is not None]
        return RobotsVerdict(allowed=allowed, crawl_delay=max(delays) if delays else None)

    def _delay(self, agent: str) -> float | None:
        assert self.rules is not None
        delay = self.rules.crawl_delay(agent)
        # Our group may set rules but no delay; the `*` group's delay still applies to us.
        return self.rules.crawl_delay("*") if delay is None else delay


def parse_record(record: RobotsRecord, revision: int, now: float) -> RobotsPolicy:
    status = record.status
    if status is not None and 200 <= status < 300:
        rules = Protego.parse(record.body.decode("utf-8", errors="replace"))
        return RobotsPolicy(revision, record.expires_at, now, rules, allow_all=True)
    return RobotsPolicy(revision, record.expires_at, now, None, allow_all=not is_failure(status))


async def read_record(kv: KeyValue, key: str) -> tuple[RobotsRecord, int] | None:
    """The record stored under ``key`` and its revision; None when there is none (or it cannot
    be read: a record we cannot decode is as good as none)."""
    try:
        entry = await kv.get(key)
    except KeyNotFoundError:
        return None
    if entry.value is None:
        return None
    try:
        return _decode(entry.value), entry.revision or 0
    except msgspec.DecodeError:
        log.warning("robots record unreadable", extra={"action": "robots_bad_record", "key": key})
        return None
