"""The frontier: admitting URLs into a job (canonical, deduplicated, ranked) and the domains
they belong to."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime

import msgspec

from schemas.messages import ApiRequest
from schemas.source import Source
from services.scheduler import store
from services.scheduler.priority import base_priority
from services.scheduler.robots import RobotsAtAdmission
from services.scheduler.seen import JobLinks
from services.scheduler.store import Conn
from services.scheduler.store.frontier import NewEntry
from shared.api_template import request_key
from shared.telemetry import current_traceparent
from shared.urls import canonicalize, host_of


@dataclass(frozen=True)
class Candidate:
    url: str
    kind: str
    depth: int = 0
    keyword: str | None = None
    request: ApiRequest | None = None  # an API page: what to send (several may share a URL)
    lastmod: str | None = None  # from a sitemap: not fetched when our copy is at least as new
    pagination_hops: int = 0  # consecutive pagination links that led here (see max_pagination)
    referrer: str | None = None  # the page the link was found on: the fetch's Referer


class Admission:
    """Filters and admits candidates for one job under its source's rules."""

    def __init__(self, source: Source, allowed_domains: list[str]) -> None:
        self.source = source
        self.allowed = {d.lower() for d in allowed_domains}
        self.deny = [re.compile(p) for p in source.links.deny]
        self.max_depth = source.links.max_depth
        self.max_pagination = source.links.max_pagination

    def accept(
        self, url: str, depth: int, *, api: bool = False, hops: int = 0, image: bool = False
    ) -> str | None:
        """The canonical URL when it may enter the job, else None. API pages are exempt from
        ``max_depth`` (a listing is as deep as it has pages; ``max_pages`` bounds it); a run of
        pagination links is bounded by ``max_pagination`` instead."""
        canon = canonicalize(url)
        if canon is None or not self.admits(canon, depth, api=api, hops=hops, image=image):
            return None
        return canon

    def admits(
        self, canon: str, depth: int, *, api: bool = False, hops: int = 0, image: bool = False
    ) -> bool:
        """Whether a canonical URL may enter the job (see ``accept``)."""
        if depth > self.max_depth and not api and not image:
            return False
        if hops > self.max_pagination and not api:
            return False
        # Shops serve images from CDN hosts: an image is exempt from the allowed domains (the
        # fetcher's SSRF guard, robots.txt and the image host's own pacing still apply).
        if self.allowed and not image and host_of(canon).lower() not in self.allowed:
            return False
        return not any(p.search(canon) for p in self.deny)

    async def admit(
        self,
        conn: Conn,
        job_id: int,
        candidates: list[Candidate],
        *,
        boost: int = 0,
        set_policy: bool = False,
        now: float | None = None,
        traceparent: str | None = None,
        seen: JobLinks | None = None,
        robots: RobotsAtAdmission | None = None,
    ) -> int:
        """Insert new entries (duplicates within the job are ignored). Returns how many.

        ``now`` (epoch seconds) is the enqueue time for aging; the database clock by default.
        ``seen``: the links this replica knows are in the job already are not sent to Postgres;
        the ones sent are staged on it (remembered once the caller's transaction commits).
        ``robots``: the new entries a known robots.txt disallows are admitted settled (done,
        ``robots_disallowed``), never dispatched (services/scheduler/robots.py).
        """
        entries: dict[tuple[str, str], NewEntry] = {}
        for c in candidates:
            canon = canonicalize(c.url)
            if canon is None:
                continue
            key = (canon, request_key(c.request))
            # A link already in the job (this batch, or known to be there) would change
            # nothing, whether or not its source's rules admit it: skip the checks too.
            if key in entries or (seen is not None and seen.known(key)):
                continue
            api, image = c.request is not None, c.kind == "image"
            if self.admits(canon, c.depth, api=api, hops=c.pagination_hops, image=image):
                entries[key] = NewEntry(
                    url=canon,
                    request_key=key[1],
                    domain=host_of(canon),
                    kind=c.kind,
                    depth=c.depth,
                    keyword=c.keyword,
                    priority=base_priority(c.kind, boost),
                    request=msgspec.json.encode(c.request).decode() if c.request else None,
                    pagination_hops=c.pagination_hops,
                    outcome=None,
                    referrer=c.referrer,
                )
        if not entries:
            return 0
        pace = self.source.pacing.resolved()
        if set_policy:
            domains = sorted({e.domain for e in entries.values()})
            await store.frontier.set_domains_policy(conn, domains, pace)
        unchanged = await self._unchanged(conn, candidates)
        settled = [
            e._replace(outcome=await self._settled(e.url, e.url in unchanged, robots))
            for e in entries.values()
        ]
        admitted = await store.frontier.admit(
            conn,
            job_id,
            settled,
            pace=pace,
            now=now,
            traceparent=traceparent if traceparent is not None else current_traceparent(),
        )
        if seen is not None:
            seen.stage(entries)  # inserted now or there already: in the job either way
        if robots is not None:
            robots.settled += admitted.disallowed
        return admitted.entries

    async def _settled(
        self, url: str, unchanged: bool, robots: RobotsAtAdmission | None
    ) -> str | None:
        """The outcome a new entry enters done with, or None: it is pending work. A sitemap's
        unchanged URL stays ``not_modified`` (its products count as seen), as before."""
        if unchanged:
            return "not_modified"
        if (
            robots is not None
            and self.source.robots == "obey"
            and await robots.disallows(url, self.source.user_agent)
        ):
            return "robots_disallowed"
        return None

    async def _unchanged(self, conn: Conn, candidates: list[Candidate]) -> set[str]:
        """URLs a sitemap says have not changed since our stored copy: they enter the job done
        (``not_modified``), and the refresher counts their products as seen."""
        dated: dict[str, datetime] = {}
        for c in candidates:
            when = _lastmod(c.lastmod) if c.lastmod else None
            canon = canonicalize(c.url) if when else None
            if canon and when:
                dated[canon] = when
        if not dated:
            return set()
        copies = await store.frontier.stored_copies(conn, self.source.name, list(dated))
        return {url for url, copy in copies.items() if copy.updated_at >= dated[url]}


async def image_candidates(
    conn: Conn, source: Source, images: list[str], depth: int, referrer: str | None = None
) -> list[Candidate]:
    """The products' primary images this source has no stored copy of yet: an image is
    fetched once, and its content-addressed payload serves every later job."""
    if not source.images or not images:
        return []
    canon = {c for c in map(canonicalize, images) if c}
    stored = await store.frontier.stored_copies(conn, source.name, sorted(canon))
    return [
        Candidate(url, "image", depth, referrer=referrer) for url in sorted(canon - set(stored))
    ]


def _lastmod(value: str) -> datetime | None:
    """A W3C datetime (``2024-06-01``, ``2024-06-01T10:00:00+00:00``, ``…Z``), as UTC."""
    try:
        when = datetime.fromisoformat(value.strip())
    except ValueError:
        return None
    return when if when.tzinfo else when.replace(tzinfo=UTC)
