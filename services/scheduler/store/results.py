"""What fetch and parse results write: the attempt (history and idempotency key), payload
metadata, the URL's memory across jobs, the entry's new state and the domain's pace."""

from __future__ import annotations

import asyncpg

from schemas.messages import FetchResult
from services.scheduler.store.queries import Conn, Q


async def insert_attempt(conn: Conn, result: FetchResult) -> bool:
    """Record the attempt; False when it was recorded already (a redelivered result)."""
    inserted = await conn.fetchval(
        Q.insert_attempt,
        result.attempt.id,
        result.attempt.entry_id,
        result.attempt.job_id,
        result.attempt.url,
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
    return bool(inserted)


async def lock_entry_for_fetch(conn: Conn, entry_id: int) -> asyncpg.Record | None:
    """(state, attempts, domain, parsed) of the entry, locked for this transaction, and what a
    result claims about it: (job_id, url) and its job's source."""
    return await conn.fetchrow(Q.lock_entry_for_fetch, entry_id)


async def lock_entry_for_parse(conn: Conn, entry_id: int) -> asyncpg.Record | None:
    """(state, attempts, parsed, pagination_hops) of the entry, locked for this transaction,
    and (priority, requested_by, job_status, source) of its job, with (job_id, url)."""
    return await conn.fetchrow(Q.lock_entry_for_parse, entry_id)


async def lock_domain_pace(conn: Conn, domain: str) -> asyncpg.Record | None:
    """(min_delay, max_delay, backoff, crawl_delay) of the domain, locked."""
    return await conn.fetchrow(Q.lock_domain_pace, domain)


async def pace_domain(
    conn: Conn, domain: str, *, backoff: float, crawl_delay: float | None, delay: float
) -> None:
    """Free one in-flight slot of the domain; it may go again ``delay`` seconds from now."""
    await conn.execute(Q.pace_domain, domain, backoff, crawl_delay, delay)


async def insert_payload(conn: Conn, result: FetchResult) -> None:
    """Record the stored payload of a result that has one (for the payload API)."""
    assert result.payload_ref is not None
    await conn.execute(
        Q.insert_payload,
        result.payload_ref,
        result.attempt.url,
        result.attempt.job_id,
        result.attempt.id,
        result.status,
        result.content_type,
        result.size,
        result.payload_ref.split(":", 1)[1],  # the content address is the body's SHA-256
        result.started_at or None,
    )


async def remember_url(conn: Conn, result: FetchResult) -> None:
    """Keep the URL's validators and payload for the source's next jobs."""
    await conn.execute(
        Q.remember_url,
        result.attempt.source,
        result.attempt.url,
        result.etag,
        result.last_modified,
        result.payload_ref,
        result.content_type,
    )


async def set_entry_fetched(
    conn: Conn, result: FetchResult, state: str, retry_in: float | None
) -> None:
    """The entry's state after its fetch result; ``retry_in`` seconds until its next attempt."""
    await conn.execute(
        Q.set_entry_fetched,
        result.attempt.entry_id,
        state,
        result.outcome,
        result.status,
        retry_in,
        result.etag,
        result.last_modified,
    )


async def set_entry_parsed(
    conn: Conn,
    entry_id: int,
    *,
    products: int,
    error: str | None,
    closes: bool,
    failed: bool = False,
) -> None:
    """The parse result is in (``closes``: the fetch result too, so the entry is done;
    ``failed``: the page's result could not be published, so the entry fails)."""
    await conn.execute(Q.set_entry_parsed, entry_id, products, error, closes, failed)
