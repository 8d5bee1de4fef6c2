"""Dispatch: release due work per domain, respecting pacing, and publish it on ``<ns>.fetch``.

One cycle runs in one transaction: claim domains that may go now (``SKIP LOCKED``, so any number
of scheduler replicas share the work), pick each domain's best entries by rank, mark them
dispatched, publish the work and await the acks, then commit. A crash before the commit leaves
the entries pending; their re-dispatch reuses the same attempt id, which JetStream's duplicate
window absorbs.
"""

from __future__ import annotations

import logging
import time

import asyncpg
import msgspec
from nats.js import JetStreamContext

from schemas.messages import FetchPolicy, FetchWork
from schemas.source import Source
from services.scheduler.jobs import JobSources
from shared.api_template import decode_request
from shared.bus import publish_many
from shared.metrics import Metrics
from shared.names import Names
from shared.telemetry import producer_span

SITEMAP_TYPES = [
    "application/xml",
    "text/xml",
    "application/gzip",
    "application/x-gzip",
    "application/octet-stream",
    "text/plain",
]

# What an API page may answer with (a GraphQL server may use its own JSON media type).
IMAGE_TYPES = ["image/*"]
API_TYPES = [
    "application/json",
    "application/graphql-response+json",
    "application/vnd.api+json",
    "application/ld+json",
    "text/json",
]

# Entries that continue the trace of the trigger that admitted them.
SEED_KINDS = frozenset({"seed", "search", "sitemap"})

log = logging.getLogger("trawl.scheduler.dispatch")

_PROMOTE = """
WITH promoted AS (
    UPDATE entries SET state = 'pending', updated_at = now()
    WHERE id IN (SELECT id FROM entries WHERE state = 'waiting' AND not_before <= now()
                 ORDER BY not_before LIMIT 5000 FOR UPDATE SKIP LOCKED)
    RETURNING domain
)
UPDATE domains SET has_pending = true
WHERE domain IN (SELECT DISTINCT domain FROM promoted) AND NOT has_pending
"""

CLAIM_DOMAINS = """
SELECT domain, max_in_flight - in_flight AS slots, min_delay, max_delay, backoff, crawl_delay,
       extract(epoch FROM now() - next_allowed_at)::float8 AS late
FROM domains d
WHERE has_pending AND NOT paused AND in_flight < max_in_flight AND next_allowed_at <= now()
ORDER BY next_allowed_at  -- the domains_ready index; dispatch moves a domain to the back
LIMIT $1
FOR UPDATE SKIP LOCKED
"""

# Each claimed domain's best pending entries, locked (the dispatch index serves it).
PICK_ENTRIES = """
SELECT e.id, e.since
FROM unnest($1::text[], $2::int[]) AS d(domain, slots)
CROSS JOIN LATERAL (
    SELECT e.id, coalesce(e.not_before, e.updated_at) AS since FROM entries e
    WHERE e.domain = d.domain AND e.state = 'pending'
    ORDER BY e.rank DESC, e.tiebreak
    LIMIT d.slots
    FOR UPDATE SKIP LOCKED
) e
"""

_CLAIM_ENTRIES = f"""
WITH picked AS ({PICK_ENTRIES})
UPDATE entries e
SET state = 'dispatched', attempts = e.attempts + 1, dispatched_at = now(), parsed = false,
    updated_at = now()
FROM picked, jobs j
WHERE e.id = picked.id AND j.id = e.job_id AND j.status = 'running' AND NOT j.paused
RETURNING e.id, e.job_id, j.source, e.url, e.domain, e.kind, e.depth, e.keyword, e.attempts,
          e.traceparent, e.request, e.request_key,
          extract(epoch FROM now() - picked.since)::float8 AS waited
"""

_MARK_DOMAINS = """
UPDATE domains d
SET in_flight = d.in_flight + u.n,
    -- With a delay, consecutive releases are spaced too (not only completions).
    next_allowed_at = CASE WHEN d.max_delay > 0
        THEN now() + make_interval(secs => greatest(coalesce(d.crawl_delay, 0),
             (d.min_delay + random() * (d.max_delay - d.min_delay)) * d.backoff))
        ELSE now() END,  -- unpaced: may go again at once, after the domains waiting longer
    updated_at = now()
FROM unnest($1::text[], $2::int[]) AS u(domain, n)
WHERE d.domain = u.domain
"""

# A domain that ran dry (fewer entries than slots) is re-checked in the same transaction.
_DRY = """
UPDATE domains d SET has_pending = EXISTS (
    SELECT 1 FROM entries e WHERE e.domain = d.domain AND e.state = 'pending')
WHERE d.domain = ANY($1::text[])
"""

_NEXT_DUE = """
SELECT extract(epoch FROM least(
    (SELECT min(next_allowed_at) FROM domains
     WHERE has_pending AND NOT paused AND in_flight < max_in_flight),
    (SELECT min(not_before) FROM entries WHERE state = 'waiting')) - now())
"""


def fetch_policy(source: Source) -> FetchPolicy:
    allow = source.allow_private
    _, _, max_in_flight = source.pacing.resolved()
    return FetchPolicy(
        robots=source.robots == "obey",
        allow_private=["*"] if allow is True else list(allow or []),
        locale=source.locale,
        user_agent=source.user_agent,
        proxies=source.proxies,
        max_in_flight=max_in_flight,
        timeout=source.timeout,
        max_bytes=source.max_bytes,
    )


async def _url_validators(
    conn: asyncpg.Connection, rows: list[asyncpg.Record]
) -> dict[tuple[str, str], tuple[str | None, str | None, str | None]]:
    """(source, url) → (etag, last_modified, payload_ref) remembered from earlier jobs.

    Only for entries a URL identifies: API pages that share a URL (POST bodies) never send
    validators, since the URL's memory may belong to another page of the listing.
    """
    rows = [r for r in rows if not r["request_key"]]
    found = await conn.fetch(
        """SELECT u.source, u.url, u.etag, u.last_modified, u.payload_ref
           FROM url_state u JOIN unnest($1::text[], $2::text[]) AS w(source, url)
             ON u.source = w.source AND u.url = w.url""",
        [r["source"] for r in rows],
        [r["url"] for r in rows],
    )
    return {
        (f["source"], f["url"]): (f["etag"], f["last_modified"], f["payload_ref"]) for f in found
    }


class Dispatcher:
    def __init__(
        self,
        pool: asyncpg.Pool,
        js: JetStreamContext,
        names: Names,
        job_sources: JobSources,
        *,
        max_domains: int = 200,
        max_per_domain: int = 100,
        work_ttl: float = 3600.0,
        metrics: Metrics | None = None,
    ) -> None:
        self.pool = pool
        self.js = js
        self.names = names
        self.job_sources = job_sources
        self.max_domains = max_domains
        self.metrics = metrics or Metrics.disabled()
        self.max_per_domain = max_per_domain  # bounds one cycle's transaction
        self.work_ttl = work_ttl
        self.dispatched = 0

    async def cycle(self) -> int:
        """Release what is due now; returns how many entries were dispatched."""
        async with self.pool.acquire() as conn:
            await conn.execute(_PROMOTE)
            async with conn.transaction():
                domains = await conn.fetch(CLAIM_DOMAINS, self.max_domains)
                if not domains:
                    return 0
                names = [d["domain"] for d in domains]
                # A paced domain releases one entry per cycle; the delay spaces the next one.
                slots = [d["slots"] if d["max_delay"] <= 0 else 1 for d in domains]
                slots = [min(s, self.max_per_domain) for s in slots]
                rows = await conn.fetch(_CLAIM_ENTRIES, names, slots)
                if not rows:
                    await conn.execute(_DRY, names)
                    return 0
                per_domain: dict[str, int] = {}
                for r in rows:
                    per_domain[r["domain"]] = per_domain.get(r["domain"], 0) + 1
                dry = [d for d, s in zip(names, slots, strict=True) if per_domain.get(d, 0) < s]
                if dry:
                    await conn.execute(_DRY, dry)
                await conn.execute(_MARK_DOMAINS, list(per_domain), list(per_domain.values()))
                validators = await _url_validators(conn, rows)
                now = time.time()
                items = []
                for r in rows:
                    etag, last_modified, previous = validators.get(
                        (r["source"], r["url"]), (None, None, None)
                    )
                    source, _ = await self.job_sources.get(conn, r["job_id"])
                    policy = fetch_policy(source)
                    request = decode_request(r["request"])
                    if r["kind"] == "sitemap":
                        policy = msgspec.structs.replace(policy, accept_types=SITEMAP_TYPES)
                    elif r["kind"] == "image":
                        policy = msgspec.structs.replace(policy, accept_types=IMAGE_TYPES)
                    elif request is not None:
                        policy = msgspec.structs.replace(policy, accept_types=API_TYPES)
                    attempt_id = f"{r['id']}.{r['attempts']}"
                    work = FetchWork(
                        attempt_id=attempt_id,
                        job_id=r["job_id"],
                        entry_id=r["id"],
                        source=r["source"],
                        url=r["url"],
                        domain=r["domain"],
                        kind=r["kind"],
                        depth=r["depth"],
                        attempt=r["attempts"],
                        keyword=r["keyword"],
                        deadline=now + self.work_ttl,
                        etag=etag,
                        last_modified=last_modified,
                        previous_payload_ref=previous,
                        policy=policy,
                        request=request,
                    )
                    with producer_span(
                        self.names.fetch,
                        r["traceparent"],
                        as_parent=r["kind"] in SEED_KINDS,
                        **{"url.full": r["url"], "trawl.job_id": r["job_id"]},
                    ) as headers:
                        items.append((self.names.fetch, work, f"fetch-{attempt_id}", headers))
                await publish_many(self.js, items)
        self.dispatched += len(rows)
        # Lag: from when an entry could have gone (its own due time, and its domain's turn)
        # until it went; waiting imposed by pacing is not lag.
        late = {d["domain"]: d["late"] for d in domains}
        self.metrics.entries_dispatched(
            len(rows), (min(r["waited"], late[r["domain"]]) for r in rows)
        )
        return len(rows)

    async def seconds_until_due(self) -> float | None:
        async with self.pool.acquire() as conn:
            value = await conn.fetchval(_NEXT_DUE)
        return None if value is None else max(0.0, float(value))
