"""The frontier's entries: admission into a job, what a source has stored already, and the
sweeps that keep entries and their domains' flags honest."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import NamedTuple

from services.scheduler.store.queries import Conn, Q, affected


class NewEntry(NamedTuple):
    """One canonical URL (or API page) to admit into a job."""

    url: str
    request_key: str  # '' for a plain GET; else a hash of the request (several share a URL)
    domain: str
    kind: str
    depth: int
    keyword: str | None
    priority: int
    request: str | None  # the ApiRequest as JSON
    pagination_hops: int
    # Settled at admission, entering done with this outcome: ``not_modified`` (a sitemap says
    # our stored copy is current) or ``robots_disallowed`` (a known robots.txt disallows it).
    outcome: str | None
    referrer: str | None = None  # the page that linked it (sent as Referer); None for seeds


class Admitted(NamedTuple):
    entries: int  # inserted (the others were in the job already)
    disallowed: int  # of which settled as robots_disallowed


ROBOTS_ERROR = "disallowed by robots.txt (known when the link was admitted: never dispatched)"


class StoredCopy(NamedTuple):
    payload_ref: str
    updated_at: datetime


async def set_domains_policy(
    conn: Conn, domains: list[str], pace: tuple[float, float, int]
) -> None:
    """A job's start: register the domains with the pace ``(min_delay, max_delay,
    max_in_flight)``, overwriting a known domain's, and mark them as having pending work."""
    lo, hi, n = pace
    await conn.execute(Q.set_domains_policy, domains, n, lo, hi)


async def admit(
    conn: Conn,
    job_id: int,
    entries: Sequence[NewEntry],
    *,
    pace: tuple[float, float, int],
    now: float | None,
    traceparent: str | None,
) -> Admitted:
    """Insert new entries (duplicates within the job are ignored); returns how many, and how
    many of them a known robots.txt settled (each with its history row). Their domains are
    registered with the pace ``(min_delay, max_delay, max_in_flight)`` on first sight (a known
    domain keeps its own), and those of the entries left pending are marked as having pending
    work (an entry settled at admission is no work).

    ``now`` (epoch seconds) is the enqueue time for aging; the database clock when None.
    """
    lo, hi, n = pace
    row = await conn.fetchrow(
        Q.admit_entries,
        job_id,
        [e.url for e in entries],
        [e.domain for e in entries],
        [e.kind for e in entries],
        [e.depth for e in entries],
        [e.keyword for e in entries],
        [e.priority for e in entries],
        now,
        traceparent,
        [e.request for e in entries],
        [e.request_key for e in entries],
        [e.outcome for e in entries],
        [e.pagination_hops for e in entries],
        n,
        lo,
        hi,
        [e.referrer for e in entries],
        ROBOTS_ERROR,
    )
    assert row is not None
    return Admitted(row["admitted"], row["settled"])


async def stored_copies(conn: Conn, source: str, urls: list[str]) -> dict[str, StoredCopy]:
    """Canonical URL → the stored copy the source has of it (url_state)."""
    rows = await conn.fetch(Q.stored_copies, source, urls)
    return {r["url"]: StoredCopy(r["payload_ref"], r["updated_at"]) for r in rows}


async def recover_stale(conn: Conn, visibility_timeout: float) -> tuple[int, int]:
    """Entries dispatched or fetched longer than the visibility timeout ago go back to pending,
    or fail once past their job's retry budget; their domains' in-flight counts are recomputed.
    Returns (entries sent back, entries failed)."""
    rows = await conn.fetch(Q.recover_stale_entries, visibility_timeout)
    if rows:
        await conn.execute(Q.recount_in_flight, sorted({r["domain"] for r in rows}))
    failed = sum(r["state"] == "failed" for r in rows)
    return len(rows) - failed, failed


async def recheck_has_pending(conn: Conn) -> int:
    """Flag every domain that has pending entries but lost its flag; returns how many."""
    return affected(await conn.execute(Q.recheck_has_pending))
