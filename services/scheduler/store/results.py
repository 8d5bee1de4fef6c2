"""What batches of fetch and parse results write: the attempts (history and idempotency keys),
payload metadata, the URLs' memory across jobs, the entries' new states and the domains' pace.

One statement per table per batch, each taking one array per column: a batch of results costs
a handful of round trips, not a handful per result.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import asyncpg

from schemas.messages import FetchResult
from services.scheduler.store.queries import Conn, Q


class DomainPace(NamedTuple):
    """A domain's new pace after a batch's results: ``results`` slots freed, and the next
    release not before ``delay`` seconds from now."""

    domain: str
    results: int
    backoff: float
    crawl_delay: float | None
    delay: float


class EntryFetched(NamedTuple):
    """An entry's state after its fetch result; ``retry_in`` seconds until its next attempt."""

    result: FetchResult
    state: str
    retry_in: float | None


class EntryParsed(NamedTuple):
    """An entry's parse result is in (``closes``: the fetch result too, so the entry is done;
    ``failed``: the page's result could not be published, so the entry fails)."""

    entry_id: int
    products: int
    error: str | None
    closes: bool
    failed: bool = False


async def insert_attempts(conn: Conn, results: Sequence[FetchResult]) -> set[str]:
    """Record the attempts; returns the ids inserted (the others were recorded already: a
    redelivered result). ``results`` holds each attempt id once."""
    rows = await conn.fetch(
        Q.insert_attempts,
        [r.attempt.id for r in results],
        [r.attempt.entry_id for r in results],
        [r.attempt.job_id for r in results],
        [r.attempt.url for r in results],
        [r.outcome for r in results],
        [r.status for r in results],
        [r.error for r in results],
        [r.started_at or None for r in results],
        [r.elapsed_ms for r in results],
        [r.payload_ref for r in results],
        [r.proxy for r in results],
        [r.fingerprint for r in results],
        [r.retry_after for r in results],
    )
    return {row["attempt_id"] for row in rows}


async def lock_entries_for_fetch(conn: Conn, entry_ids: list[int]) -> dict[int, asyncpg.Record]:
    """id → (state, attempts, domain, parsed) of each entry, locked for this transaction, and
    what a result claims about it: (job_id, url) and its job's source."""
    rows = await conn.fetch(Q.lock_entries_for_fetch, entry_ids)
    return {row["id"]: row for row in rows}


async def lock_entries_for_parse(conn: Conn, entry_ids: list[int]) -> dict[int, asyncpg.Record]:
    """id → (state, attempts, parsed, pagination_hops) of each entry, locked for this
    transaction, and (priority, requested_by, job_status, source) of its job, with (job_id,
    url)."""
    rows = await conn.fetch(Q.lock_entries_for_parse, entry_ids)
    return {row["id"]: row for row in rows}


async def lock_domains_pace(conn: Conn, domains: list[str]) -> dict[str, asyncpg.Record]:
    """domain → (min_delay, max_delay, backoff, crawl_delay), locked."""
    rows = await conn.fetch(Q.lock_domains_pace, domains)
    return {row["domain"]: row for row in rows}


async def pace_domains(conn: Conn, paces: Sequence[DomainPace]) -> None:
    """Free the domains' in-flight slots and set when each may go next."""
    await conn.execute(
        Q.pace_domains,
        [p.domain for p in paces],
        [p.results for p in paces],
        [p.backoff for p in paces],
        [p.crawl_delay for p in paces],
        [p.delay for p in paces],
    )


async def record_payloads(
    conn: Conn, stored: Sequence[FetchResult], remembered: Sequence[FetchResult]
) -> None:
    """Record the stored payloads of results that have one (for the payload API), and keep
    the ``remembered`` URLs' validators and payloads for the source's next jobs (of several
    results for one URL, the last one's)."""
    assert all(r.payload_ref for r in stored)
    refs = [r.payload_ref or "" for r in stored]
    last = list({(r.attempt.source, r.attempt.url): r for r in remembered}.values())
    await conn.execute(
        Q.record_payloads,
        refs,
        [r.attempt.url for r in stored],
        [r.attempt.job_id for r in stored],
        [r.attempt.id for r in stored],
        [r.status for r in stored],
        [r.content_type for r in stored],
        [r.size for r in stored],
        [ref.split(":", 1)[1] for ref in refs],  # the content address is the body's SHA-256
        [r.started_at or None for r in stored],
        [r.attempt.source for r in last],
        [r.attempt.url for r in last],
        [r.etag for r in last],
        [r.last_modified for r in last],
        [r.payload_ref for r in last],
        [r.content_type for r in last],
    )


async def set_entries_fetched(conn: Conn, entries: Sequence[EntryFetched]) -> None:
    """The entries' states after their fetch results (each entry once)."""
    await conn.execute(
        Q.set_entries_fetched,
        [e.result.attempt.entry_id for e in entries],
        [e.state for e in entries],
        [e.result.outcome for e in entries],
        [e.result.status for e in entries],
        [e.retry_in for e in entries],
        [e.result.etag for e in entries],
        [e.result.last_modified for e in entries],
    )


async def set_entries_parsed(conn: Conn, entries: Sequence[EntryParsed]) -> None:
    """The entries' parse results are in (each entry once)."""
    await conn.execute(
        Q.set_entries_parsed,
        [e.entry_id for e in entries],
        [e.products for e in entries],
        [e.error for e in entries],
        [e.closes for e in entries],
        [e.failed for e in entries],
    )
