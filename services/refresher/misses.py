"""Consecutive misses: after a job completes and all its products are applied, products it saw
reset, products on pages that failed transiently stay as they are, and the rest count a miss.
At the source's threshold a product is marked ``out_of_stock`` with ``delisted_at``. A job with
too many failures counts nothing: one bad crawl must not empty a catalog. Nor does a partial
job (its trigger's own seeds or keywords), nor one whose API listing stopped at a guard."""

from __future__ import annotations

from dataclasses import dataclass

from schemas.messages import ProductChange
from schemas.source import Source
from services.refresher import changes, store, verification


@dataclass(frozen=True)
class MissReport:
    counted: bool
    reason: str | None = None
    seen: int = 0
    missed: int = 0
    delisted: int = 0
    events: tuple[ProductChange, ...] = ()  # recorded, to publish after the commit
    candidates: int = 0  # delistings held for verification
    rechecks: tuple[store.Recheck, ...] = ()  # the verify job to ask for after the commit


async def failure_rate(conn: store.Conn, job_id: int) -> float:
    """Of the job's pages: an image that cannot be fetched says nothing about the catalog."""
    failed, total = await store.job_page_failures(conn, job_id)
    return (failed / total) if total else 0.0


async def count_misses(conn: store.Conn, job: store.FrontierJob, source: Source) -> MissReport:
    """Run inside a transaction; idempotent per job through ``miss_counts``."""
    if not await store.claim_miss_count(conn, job.job_id, job.source):
        return MissReport(counted=False, reason="already counted")
    # Seen is seen, even in a crawl too broken to count misses. The per-sighting upsert skips
    # unchanged rows, so this is also where their last-seen mark is set.
    seen = await store.seen_keys(conn, job.job_id, job.source)
    await store.mark_seen(conn, job.source, seen, job.job_id)
    reason = await _reason_not_to_count(conn, job, source)
    if reason is not None:
        await store.record_not_counted(conn, job.job_id, reason)
        return MissReport(counted=False, reason=reason, seen=len(seen))
    # Seen, not seen (a miss) or unknown: a product shown only on pages that say nothing
    # (failed, parsed without confidence, product pages without a product) keeps its count.
    unknown = await store.unknown_urls(conn, job.job_id)
    missed = await store.count_missed(conn, job.source, seen, unknown, job.job_id)
    threshold = source.refresh.miss_threshold
    # A delisting to verify first is a candidate: the product stays as it is (not delisted)
    # until a verify job finds its page gone (verification.py). One without a page to
    # re-fetch cannot be verified, and is delisted as before.
    policy = source.verification()
    due = await store.due_for_delisting(conn, job.source, threshold) if policy else []
    held = [d for d in due if policy is not None and policy.delisted and d.url]
    delisted = await store.delist_products(conn, job.source, threshold, held=[d.key for d in held])
    # The delisting is a stock change: it gets a snapshot unless the product already was
    # out of stock.
    changed = [d for d in delisted if d.before != "out_of_stock"]
    if changed:
        await store.snapshot_delisted(conn, job.source, job.job_id, changed)
    trigger = verification.trigger_id(job.source, job.job_id, "delisted")
    candidates = [
        verification.as_candidate(changes.delisting(job.source, job.job_id, d), trigger, d.url)
        for d in held
    ]
    rows = [changes.delisting(job.source, job.job_id, d).row() for d in delisted]
    events = await store.insert_events(conn, rows)
    pending = len(await store.insert_events(conn, [c.row() for c in candidates]))
    report = MissReport(
        counted=True,
        seen=len(seen),
        missed=len(missed),
        delisted=len(delisted),
        events=tuple(events),
        candidates=pending,
        rechecks=tuple(await store.candidate_rechecks(conn, [trigger])) if pending else (),
    )
    await store.record_counted(conn, job.job_id, report.seen, report.missed, report.delisted)
    return report


async def _reason_not_to_count(
    conn: store.Conn, job: store.FrontierJob, source: Source
) -> str | None:
    """Why this job's end says nothing about the products it did not see, if it does not."""
    rate = await failure_rate(conn, job.job_id)
    if rate > source.refresh.max_failure_rate:
        return f"failure rate {rate:.0%} over {source.refresh.max_failure_rate:.0%}"
    if job.partial:
        # Its trigger named its own seeds or keywords: the rest of the catalog was not asked for.
        return "a partial crawl: its trigger named its own seeds or keywords"
    if await store.stopped_at_pagination_guard(conn, job.job_id):
        # The listing ended early: products past the guard were never asked for.
        return "an API listing stopped at a pagination guard"
    return None
