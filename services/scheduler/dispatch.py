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
from dataclasses import dataclass

import asyncpg
import msgspec
from nats.js import JetStreamContext

from schemas.messages import Attempt, FetchPolicy, FetchWork, RenderPolicy
from schemas.source import Source
from services.scheduler import store
from services.scheduler.jobs import JobSources, VerifyAvoid
from shared.api_template import decode_request
from shared.bus import send_many
from shared.channels import FETCH_WORK, RENDER_WORK
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

# Kinds a browser never renders: machine-readable documents and images.
UNRENDERED = frozenset({"sitemap", "image"})

# Entries that continue the trace of the trigger that admitted them.
SEED_KINDS = frozenset({"seed", "search", "sitemap"})

log = logging.getLogger("trawl.scheduler.dispatch")


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
        render=render_policy(source),
        client=source.client,
        ca_file=source.tls.ca_file,
    )


def render_policy(source: Source) -> RenderPolicy | None:
    r = source.render_options()
    if r is None:
        return None
    return RenderPolicy(**msgspec.structs.asdict(r))


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
        avoid: VerifyAvoid | None = None,
    ) -> None:
        self.pool = pool
        self.avoid = avoid or VerifyAvoid()
        self.js = js
        self.names = names
        self.job_sources = job_sources
        self.max_domains = max_domains
        self.metrics = metrics or Metrics.disabled()
        self.max_per_domain = max_per_domain  # bounds one cycle's transaction
        self.work_ttl = work_ttl
        self.dispatched = 0

    async def cycle(self, *, promote: bool = True) -> int:
        """Release what is due now; returns how many entries were dispatched. ``promote``:
        first make the retries whose time has come pending again."""
        async with self.pool.acquire() as conn:
            if promote:
                await store.dispatch.promote_waiting(conn)
            async with conn.transaction():
                domains = await store.dispatch.claim_domains(conn, self.max_domains)
                if not domains:
                    return 0
                names = [d["domain"] for d in domains]
                # A paced domain releases one entry per cycle; the delay spaces the next one.
                slots = [d["slots"] if d["max_delay"] <= 0 else 1 for d in domains]
                slots = [min(s, self.max_per_domain) for s in slots]
                rows = await store.dispatch.claim_entries(conn, names, slots)
                if not rows:
                    await store.dispatch.recheck_domains(conn, names)
                    return 0
                per_domain: dict[str, int] = {}
                for r in rows:
                    per_domain[r["domain"]] = per_domain.get(r["domain"], 0) + 1
                dry = [d for d, s in zip(names, slots, strict=True) if per_domain.get(d, 0) < s]
                if dry:
                    await store.dispatch.recheck_domains(conn, dry)
                await store.dispatch.mark_domains_dispatched(conn, per_domain)
                # Only entries a URL identifies send validators: API pages that share a URL
                # (POST bodies) never do, since the URL's memory may be another page's.
                validators = await store.dispatch.url_validators(
                    conn, [(r["source"], r["url"]) for r in rows if not r["request_key"]]
                )
                now = time.time()
                items: list[tuple[FetchWork, str, dict[str, str]]] = []
                rendered: list[tuple[FetchWork, str, dict[str, str]]] = []
                for r in rows:
                    etag, last_modified, previous = validators.get(
                        (r["source"], r["url"]), (None, None, None)
                    )
                    source, _ = await self.job_sources.get(conn, r["job_id"])
                    policy = fetch_policy(source)
                    request = decode_request(r["request"])
                    if policy.render is not None and (r["kind"] in UNRENDERED or request):
                        policy = msgspec.structs.replace(policy, render=None)
                    if policy.render is not None:
                        # The DOM depends on what the page's scripts load, not only on the
                        # document: a 304 for the document says nothing about the prices.
                        etag = last_modified = None
                    recheck = await self.avoid.get(conn, r["job_id"])
                    if recheck is not None:  # a verify job's: a fresh visitor, like nobody before
                        etag = last_modified = None
                        policy = msgspec.structs.replace(
                            policy,
                            avoid_identities=recheck.identities,
                            avoid_proxies=recheck.proxies,
                        )
                    if r["kind"] == "sitemap":
                        policy = msgspec.structs.replace(policy, accept_types=SITEMAP_TYPES)
                    elif r["kind"] == "image":
                        policy = msgspec.structs.replace(policy, accept_types=IMAGE_TYPES)
                    elif request is not None:
                        policy = msgspec.structs.replace(policy, accept_types=API_TYPES)
                    attempt = Attempt(
                        entry_id=r["id"],
                        number=r["attempts"],
                        job_id=r["job_id"],
                        source=r["source"],
                        url=r["url"],
                        kind=r["kind"],
                        depth=r["depth"],
                        keyword=r["keyword"],
                        request=request,
                        previous_payload_ref=previous,
                        referrer=r["referrer"],
                    )
                    work = FetchWork(
                        attempt=attempt,
                        domain=r["domain"],
                        deadline=now + self.work_ttl,
                        etag=etag,
                        last_modified=last_modified,
                        policy=policy,
                    )
                    with producer_span(
                        self.names.fetch,
                        r["traceparent"],
                        as_parent=r["kind"] in SEED_KINDS,
                        **{"url.full": r["url"], "trawl.job_id": r["job_id"]},
                    ) as headers:
                        queue = rendered if policy.render is not None else items
                        queue.append((work, f"fetch-{attempt.id}", headers))
                if items:
                    await send_many(self.js, self.names, FETCH_WORK, items)
                if rendered:
                    await send_many(self.js, self.names, RENDER_WORK, rendered)
        self.dispatched += len(rows)
        # Lag: from when an entry could have gone (its own due time, and its domain's turn)
        # until it went; waiting imposed by pacing is not lag.
        late = {d["domain"]: d["late"] for d in domains}
        self.metrics.entries_dispatched(
            len(rows), (min(r["waited"], late[r["domain"]]) for r in rows)
        )
        return len(rows)

    async def due(self) -> Due:
        """Seconds until a domain may go and until a retry is due (one round trip)."""
        async with self.pool.acquire() as conn:
            return Due(*await store.dispatch.seconds_until_due(conn))


@dataclass(frozen=True)
class Due:
    """Seconds until the earliest domain with pending work may go, and until the earliest
    retry is due; negative when overdue, None when there is none."""

    domains: float | None
    retries: float | None

    @property
    def now(self) -> bool:
        """Something may go now: a cycle is worth its transaction."""
        return any(v is not None and v <= 0 for v in (self.domains, self.retries))

    @property
    def retries_now(self) -> bool:
        return self.retries is not None and self.retries <= 0

    @property
    def wait(self) -> float | None:
        """Seconds until something is due (at least 0), None when nothing is."""
        values = [v for v in (self.domains, self.retries) if v is not None]
        return max(0.0, min(values)) if values else None
