"""The frontier: admitting URLs into a job (canonical, deduplicated, ranked) and the domains
they belong to."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime

import asyncpg
import msgspec

from schemas.messages import ApiRequest
from schemas.source import Source
from services.scheduler.priority import base_priority
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


_ADMIT = """
INSERT INTO entries (job_id, url, domain, kind, depth, keyword, priority, rank, traceparent,
                     request, request_key, state, last_outcome, pagination_hops)
SELECT $1, u.url, u.domain, u.kind, u.depth, u.keyword, u.priority,
       u.priority - 10 * floor(coalesce($8::float8, extract(epoch FROM now())) / 60) / 60, $9,
       u.request::jsonb, u.request_key,
       CASE WHEN u.unchanged THEN 'done' ELSE 'pending' END,
       CASE WHEN u.unchanged THEN 'not_modified' END, u.hops
FROM unnest($2::text[], $3::text[], $4::text[], $5::int[], $6::text[], $7::int[], $10::text[],
            $11::text[], $12::boolean[], $13::int[])
     AS u(url, domain, kind, depth, keyword, priority, request, request_key, unchanged, hops)
-- A stable lock order: concurrent admits of overlapping URLs cannot deadlock.
ORDER BY u.url, u.request_key
ON CONFLICT (job_id, url, request_key) DO NOTHING
"""

# Both mark the domains as having pending work; a false alarm (every URL was a duplicate)
# is cleared by the next claim that finds the domain dry.
_DOMAINS_SET_POLICY = """
INSERT INTO domains (domain, max_in_flight, min_delay, max_delay, has_pending)
SELECT d, $2, $3, $4, true FROM unnest($1::text[]) AS d ORDER BY d
ON CONFLICT (domain) DO UPDATE
SET max_in_flight = EXCLUDED.max_in_flight, min_delay = EXCLUDED.min_delay,
    max_delay = EXCLUDED.max_delay, has_pending = true, updated_at = now()
"""

_DOMAINS_ENSURE = """
INSERT INTO domains (domain, max_in_flight, min_delay, max_delay, has_pending)
SELECT d, $2, $3, $4, true FROM unnest($1::text[]) AS d ORDER BY d
ON CONFLICT (domain) DO UPDATE SET has_pending = true WHERE NOT domains.has_pending
"""


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
        if canon is None or (depth > self.max_depth and not api and not image):
            return None
        if hops > self.max_pagination and not api:
            return None
        # Shops serve images from CDN hosts: an image is exempt from the allowed domains (the
        # fetcher's SSRF guard, robots.txt and the image host's own pacing still apply).
        if self.allowed and not image and host_of(canon).lower() not in self.allowed:
            return None
        if any(p.search(canon) for p in self.deny):
            return None
        return canon

    async def admit(
        self,
        conn: asyncpg.Connection,
        job_id: int,
        candidates: list[Candidate],
        *,
        boost: int = 0,
        set_policy: bool = False,
        now: float | None = None,
        traceparent: str | None = None,
    ) -> int:
        """Insert new entries (duplicates within the job are ignored). Returns how many.

        ``now`` (epoch seconds) is the enqueue time for aging; the database clock by default.
        """
        rows: dict[tuple[str, str], tuple[str, str, int, str | None, int, str | None, int]] = {}
        for c in candidates:
            canon = self.accept(
                c.url,
                c.depth,
                api=c.request is not None,
                hops=c.pagination_hops,
                image=c.kind == "image",
            )
            key = (canon or "", request_key(c.request))
            if canon and key not in rows:
                rows[key] = (
                    host_of(canon),
                    c.kind,
                    c.depth,
                    c.keyword,
                    base_priority(c.kind, boost),
                    msgspec.json.encode(c.request).decode() if c.request else None,
                    c.pagination_hops,
                )
        if not rows:
            return 0
        domains = sorted({r[0] for r in rows.values()})
        lo, hi, n = self.source.pacing.resolved()
        await conn.execute(
            _DOMAINS_SET_POLICY if set_policy else _DOMAINS_ENSURE, domains, n, lo, hi
        )
        keys = list(rows)
        unchanged = await self._unchanged(conn, candidates)
        status = await conn.execute(
            _ADMIT,
            job_id,
            [k[0] for k in keys],
            [rows[k][0] for k in keys],
            [rows[k][1] for k in keys],
            [rows[k][2] for k in keys],
            [rows[k][3] for k in keys],
            [rows[k][4] for k in keys],
            now,
            traceparent if traceparent is not None else current_traceparent(),
            [rows[k][5] for k in keys],
            [k[1] for k in keys],
            [k[0] in unchanged for k in keys],
            [rows[k][6] for k in keys],
        )
        return int(status.rsplit(" ", 1)[-1])

    async def _unchanged(self, conn: asyncpg.Connection, candidates: list[Candidate]) -> set[str]:
        """URLs a sitemap says have not changed since our stored copy: they enter the job done
        (``not_modified``), and the refresher counts their products as seen."""
        dated = {}
        for c in candidates:
            when = _lastmod(c.lastmod) if c.lastmod else None
            canon = canonicalize(c.url) if when else None
            if canon:
                dated[canon] = when
        if not dated:
            return set()
        rows = await conn.fetch(
            "SELECT url, updated_at FROM url_state WHERE source = $1 AND url = ANY($2::text[]) "
            "AND payload_ref IS NOT NULL",
            self.source.name,
            list(dated),
        )
        return {r["url"] for r in rows if r["updated_at"] >= dated[r["url"]]}


async def image_candidates(
    conn: asyncpg.Connection, source: Source, images: list[str], depth: int
) -> list[Candidate]:
    """The products' primary images this source has no stored copy of yet: an image is
    fetched once, and its content-addressed payload serves every later job."""
    if not source.images or not images:
        return []
    canon = {c for c in map(canonicalize, images) if c}
    missing = canon - set(await stored_copies(conn, source.name, sorted(canon)))
    return [Candidate(url, "image", depth) for url in sorted(missing)]


def _lastmod(value: str) -> datetime | None:
    """A W3C datetime (``2024-06-01``, ``2024-06-01T10:00:00+00:00``, ``…Z``), as UTC."""
    try:
        when = datetime.fromisoformat(value.strip())
    except ValueError:
        return None
    return when if when.tzinfo else when.replace(tzinfo=UTC)


async def stored_copies(conn: asyncpg.Connection, source: str, urls: list[str]) -> dict[str, str]:
    """Canonical URL → payload ref of the URLs the source has a stored copy of (url_state)."""
    rows = await conn.fetch(
        "SELECT url, payload_ref FROM url_state WHERE source = $1 AND url = ANY($2::text[]) "
        "AND payload_ref IS NOT NULL",
        source,
        urls,
    )
    return {r["url"]: r["payload_ref"] for r in rows}
