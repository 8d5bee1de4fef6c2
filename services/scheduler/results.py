"""What the scheduler does with fetch results and parse results.

Every effect is keyed by the attempt id, so a redelivered result changes nothing: the attempt
row is inserted first and a conflict means "already applied". A result for an attempt that is
no longer the entry's current one (stale recovery re-dispatched it) is recorded as history only.
"""

from __future__ import annotations

import logging
import random
from dataclasses import dataclass

import asyncpg

from schemas.messages import FetchResult, ParseResult
from services.scheduler.frontier import Admission, Candidate, image_candidates
from services.scheduler.jobs import JobSources
from services.scheduler.priority import job_boost
from services.scheduler.proxies import record_proxy_outcome
from services.scheduler.retry import retry_delay
from shared.api_template import request_key

log = logging.getLogger("trawl.scheduler.results")

# Outcomes that slow a whole domain down (host-level back-off, separate from one URL's retry).
_SLOWDOWN = {"blocked", "server_error", "timeout"}
_MAX_BACKOFF = 16.0
SLOW_RESPONSE_MS = 10_000.0


@dataclass(frozen=True)
class Applied:
    job_id: int
    terminal: bool  # the entry left the open states
    state: str | None = None  # the entry's new state; None for a stale result


def _attempt_no(attempt_id: str) -> int:
    return int(attempt_id.rsplit(".", 1)[1])


async def apply_fetch_result(
    conn: asyncpg.Connection, result: FetchResult, job_sources: JobSources
) -> Applied | None:
    async with conn.transaction():
        inserted = await conn.fetchval(
            """INSERT INTO attempts (attempt_id, entry_id, job_id, url, outcome, status, error,
                   started_at, elapsed_ms, payload_ref, proxy, fingerprint, retry_after)
               VALUES ($1, $2, $3, $4, $5, $6, $7, to_timestamp($8), $9, $10, $11, $12, $13)
               ON CONFLICT (attempt_id) DO NOTHING RETURNING 1""",
            result.attempt_id,
            result.entry_id,
            result.job_id,
            result.url,
            result.outcome,
            result.status,
            result.error,
            result.started_at or None,
            result.elapsed_ms,
            result.payload_ref,
            result.proxy,
            result.fingerprint,
            result.retry_after,
        )
        if not inserted:
            return None  # a redelivery: already applied
        await record_proxy_outcome(conn, result)
        entry = await conn.fetchrow(
            "SELECT state, attempts, domain, parsed FROM entries WHERE id = $1 FOR UPDATE",
            result.entry_id,
        )
        if entry is None:
            return None
        await _pace_domain(conn, entry["domain"], result)
        if result.payload_ref:
            await conn.execute(
                """INSERT INTO payloads (ref, url, job_id, attempt_id, status, content_type, size,
                       sha256, fetched_at)
                   VALUES ($1, $2, $3, $4, $5, $6, $7, $8, to_timestamp($9))
                   ON CONFLICT DO NOTHING""",
                result.payload_ref,
                result.url,
                result.job_id,
                result.attempt_id,
                result.status,
                result.content_type,
                result.size,
                result.payload_ref.split(":", 1)[1],
                result.started_at or None,
            )
        # url_state is the URL's memory across jobs; API pages sharing a URL (POST bodies)
        # would overwrite each other's, so they keep none (and send no validators).
        if result.outcome == "ok" and result.payload_ref and not request_key(result.request):
            await conn.execute(
                """INSERT INTO url_state (source, url, etag, last_modified, payload_ref,
                       content_type)
                   VALUES ($1, $2, $3, $4, $5, $6)
                   ON CONFLICT (source, url) DO UPDATE SET etag = EXCLUDED.etag,
                       last_modified = EXCLUDED.last_modified, payload_ref = EXCLUDED.payload_ref,
                       content_type = EXCLUDED.content_type, updated_at = now()""",
                result.source,
                result.url,
                result.etag,
                result.last_modified,
                result.payload_ref,
                result.content_type,
            )
        current = entry["attempts"] == _attempt_no(result.attempt_id)
        if not current or entry["state"] != "dispatched":
            return Applied(result.job_id, terminal=False)  # stale: history only

        source, _ = await job_sources.get(conn, result.job_id)
        if result.outcome in ("ok", "not_modified"):
            # Closed now if the parse result overtook this fetch result, else awaiting parse.
            state, not_before = ("done" if entry["parsed"] else "fetched"), None
        else:
            delay = retry_delay(
                result.outcome, entry["attempts"], source.retry, retry_after=result.retry_after
            )
            if delay is None:
                state, not_before = ("failed" if result.outcome in _RETRYABLE else "done"), None
            else:
                state, not_before = "waiting", delay
        await conn.execute(
            """UPDATE entries SET state = $2, last_outcome = $3, last_status = $4,
                   not_before = CASE WHEN $5::float8 IS NULL THEN NULL
                                     ELSE now() + make_interval(secs => $5::float8) END,
                   etag = coalesce($6, etag), last_modified = coalesce($7, last_modified),
                   updated_at = now()
               WHERE id = $1""",
            result.entry_id,
            state,
            result.outcome,
            result.status,
            not_before,
            result.etag,
            result.last_modified,
        )
        return Applied(result.job_id, terminal=state in ("done", "failed"), state=state)


_RETRYABLE = {"blocked", "server_error", "timeout", "network_error", "no_proxy"}


async def _pace_domain(conn: asyncpg.Connection, domain: str, result: FetchResult) -> None:
    """Free the in-flight slot and set when the domain may go next."""
    row = await conn.fetchrow(
        "SELECT min_delay, max_delay, backoff, crawl_delay FROM domains WHERE domain = $1 "
        "FOR UPDATE",
        domain,
    )
    if row is None:
        return
    backoff = row["backoff"]
    if (
        result.outcome in _SLOWDOWN
        or (result.status in (429, 503))
        or (result.elapsed_ms > SLOW_RESPONSE_MS)
    ):
        backoff = min(_MAX_BACKOFF, backoff * 2)
    elif result.outcome in ("ok", "not_modified"):
        backoff = max(1.0, backoff * 0.9)
    crawl_delay = result.crawl_delay if result.crawl_delay is not None else row["crawl_delay"]
    delay = random.uniform(row["min_delay"], row["max_delay"]) * backoff
    delay = max(delay, crawl_delay or 0.0, result.retry_after or 0.0)
    await conn.execute(
        """UPDATE domains SET in_flight = greatest(0, in_flight - 1), backoff = $2,
               crawl_delay = $3,
               next_allowed_at = greatest(next_allowed_at, now() + make_interval(secs => $4)),
               updated_at = now()
           WHERE domain = $1""",
        domain,
        backoff,
        crawl_delay,
        delay,
    )


async def apply_parse_result(
    conn: asyncpg.Connection, result: ParseResult, job_sources: JobSources
) -> tuple[Applied | None, int]:
    """Admit the discovered links and close the entry, or, when the fetch result is not in
    yet, mark it parsed so that the fetch result closes it. Returns (applied, links admitted).
    """
    async with conn.transaction():
        entry = await conn.fetchrow(
            "SELECT state, attempts, parsed, pagination_hops FROM entries WHERE id = $1 FOR UPDATE",
            result.entry_id,
        )
        if entry is None or entry["attempts"] != _attempt_no(result.attempt_id):
            return None, 0
        if entry["parsed"] or entry["state"] not in ("dispatched", "fetched"):
            return None, 0  # a redelivery: already applied
        source, allowed = await job_sources.get(conn, result.job_id)
        job = await conn.fetchrow(
            "SELECT priority, requested_by, status FROM jobs WHERE id = $1", result.job_id
        )
        admitted = 0
        if job["status"] == "running" and (result.links or result.sightings()):
            admission = Admission(source, allowed)
            boost = job_boost(job["priority"], job["requested_by"])
            hops = entry["pagination_hops"]
            # The next page of a listing is as deep as the page that links it: otherwise a
            # category's later pages, and the products only they list, fall off max_depth
            # depending on which page's links happened to be parsed first.
            candidates = [
                Candidate(
                    link.url,
                    link.kind,
                    result.depth if link.kind == "pagination" else result.depth + 1,
                    result.keyword,
                    link.request,
                    link.lastmod,
                    pagination_hops=hops + 1 if link.kind == "pagination" else 0,
                )
                for link in result.links
            ]
            images = [p.image for p in result.sightings() if p.image]
            candidates += await image_candidates(conn, source, images, result.depth + 1)
            admitted = await admission.admit(conn, result.job_id, candidates, boost=boost)
        closes = entry["state"] == "fetched"
        await conn.execute(
            """UPDATE entries SET state = CASE WHEN $4 THEN 'done' ELSE state END, parsed = true,
                   has_product = $2 > 0, product_count = $2, parse_error = $3, updated_at = now()
               WHERE id = $1""",
            result.entry_id,
            len(result.sightings()),  # an API page lists many: the refresher waits for all
            result.error,
            closes,
        )
        return Applied(result.job_id, terminal=closes), admitted
