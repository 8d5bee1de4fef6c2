"""Jobs: creation, counters, completion, final events, operator actions, and the read models
(``JobOut``, its entries, failures, stats)."""

from __future__ import annotations

from typing import Any

import asyncpg

from schemas.read import EntryOut, FailureOut, JobOut, JobStats, Page
from services.scheduler.store.queries import Conn, Q, affected

# An entry in one of these states keeps its job running.
OPEN_STATES = ("pending", "waiting", "dispatched", "fetched")


# -- lifecycle ---------------------------------------------------------------------------------
async def insert(
    conn: Conn,
    *,
    source: str,
    kind: str,
    priority: int | None,
    keywords: list[str],
    requested_by: str | None,
    definition: dict[str, Any],
    partial: bool,
) -> int:
    job_id = await conn.fetchval(
        Q.insert_job, source, kind, priority, keywords, requested_by, definition, partial
    )
    assert job_id is not None
    return int(job_id)


async def running_of_source(conn: Conn, source: str, *, lock: bool = False) -> int | None:
    """The source's running job; ``lock`` holds its row until the transaction ends."""
    query = Q.lock_running_job_of_source if lock else Q.running_job_of_source
    return await conn.fetchval(query, source)


async def widen(conn: Conn, job_id: int) -> None:
    await conn.execute(Q.widen_job, job_id)


async def definition(conn: Conn, job_id: int) -> dict[str, Any] | None:
    """The source definition the job was started with."""
    return await conn.fetchval(Q.job_definition, job_id)


async def verify_avoid(conn: Conn, job_id: int) -> tuple[list[str], list[str]] | None:
    """A verify job's (identities, proxies) to avoid: those of the fetches that saw its
    candidates' changes; None for a job of another kind."""
    row = await conn.fetchrow(Q.verify_avoid, job_id)
    return None if row is None else (list(row["identities"]), list(row["proxies"]))


async def status(conn: Conn, job_id: int) -> str | None:
    return await conn.fetchval(Q.job_status, job_id)


async def source_of(conn: Conn, job_id: int) -> str | None:
    return await conn.fetchval(Q.job_source, job_id)


async def head(conn: Conn, job_id: int) -> asyncpg.Record | None:
    """(source, kind, status) of a job."""
    return await conn.fetchrow(Q.job_head, job_id)


async def counters(conn: Conn, job_id: int) -> dict[str, int]:
    """Entries by state and by last outcome, products found, parse errors, open entries, and
    per keyword ``kw:<keyword>:pages|products``."""
    out: dict[str, int] = {"total": 0, "products": 0, "parse_errors": 0}
    for r in await conn.fetch(Q.entry_counts, job_id):
        out["total"] += r["n"]
        out["products"] += r["p"]
        out["parse_errors"] += r["e"]
        out[r["state"]] = out.get(r["state"], 0) + r["n"]
        if r["last_outcome"]:
            key = f"outcome_{r['last_outcome']}"
            out[key] = out.get(key, 0) + r["n"]
    out["open"] = sum(out.get(s, 0) for s in OPEN_STATES)
    for r in await conn.fetch(Q.keyword_counts, job_id):
        out[f"kw:{r['keyword']}:pages"] = r["n"]
        out[f"kw:{r['keyword']}:products"] = r["p"]
    return out


async def complete_if_done(conn: Conn, job_id: int) -> bool:
    """Mark the job completed when nothing of it is open. True if this call completed it."""
    return await conn.fetchrow(Q.complete_job, job_id) is not None


async def mark_event_published(conn: Conn, job_id: int, final_counters: dict[str, int]) -> None:
    await conn.execute(Q.mark_event_published, job_id, final_counters)


async def running_ids(conn: Conn) -> list[int]:
    return [r["id"] for r in await conn.fetch(Q.running_job_ids)]


async def unpublished_final(conn: Conn) -> list[tuple[int, str]]:
    """(job id, status) of finished jobs whose final event was never published."""
    return [(r["id"], r["status"]) for r in await conn.fetch(Q.unpublished_final_jobs)]


# -- operator actions --------------------------------------------------------------------------
async def cancel(conn: Conn, job_id: int) -> int:
    """Cancel the job and its work not yet dispatched; returns the entries cancelled."""
    n = affected(await conn.execute(Q.cancel_open_entries, job_id))
    await conn.execute(Q.cancel_job, job_id)
    return n


async def reset_failed_entries(conn: Conn, job_id: int) -> int:
    """Failed entries become pending with a fresh set of retries, and their domains are marked
    as having pending work; returns how many entries."""
    rows = await conn.fetch(Q.reset_failed_entries, job_id)
    await conn.execute(Q.mark_domains_pending, sorted({r["domain"] for r in rows}))
    return len(rows)


async def reopen(conn: Conn, job_id: int) -> None:
    await conn.execute(Q.reopen_job, job_id)


async def boost(conn: Conn, job_id: int, amount: int) -> int:
    """Raise the priority of the job's waiting work; returns the entries boosted."""
    return affected(await conn.execute(Q.boost_entries, job_id, amount))


async def set_paused(conn: Conn, job_id: int, paused: bool) -> None:
    await conn.execute(Q.set_job_paused, job_id, paused)


# -- triggers ----------------------------------------------------------------------------------
async def claim_trigger(conn: Conn, digest: str) -> bool:
    """True for the first sight of a trigger (its digest), False for a repeat."""
    return bool(await conn.fetchval(Q.claim_trigger, digest))


async def trigger_job(conn: Conn, digest: str) -> int | None:
    return await conn.fetchval(Q.trigger_job, digest)


async def set_trigger_job(conn: Conn, digest: str, job_id: int) -> None:
    await conn.execute(Q.set_trigger_job, digest, job_id)


async def known_product_urls(conn: Conn, source: str) -> list[str]:
    """The URLs of the products the source has (the refresher's table)."""
    return [r["url"] for r in await conn.fetch(Q.known_product_urls, source)]


# -- read models -------------------------------------------------------------------------------
async def _out(conn: Conn, row: asyncpg.Record, *, live: bool) -> JobOut:
    # Finished jobs carry their final counters; running ones are counted live.
    live = live or row["status"] == "running" or not row["counters"]
    rate = await conn.fetchval(Q.job_rate, row["id"])
    return JobOut(
        id=row["id"],
        source=row["source"],
        kind=row["kind"],
        status=row["status"],
        paused=row["paused"],
        priority=row["priority"],
        requested_by=row["requested_by"],
        created_at=row["created_at"],
        finished_at=row["finished_at"],
        counters=await counters(conn, row["id"]) if live else dict(row["counters"]),
        rate_per_min=float(rate or 0),
    )


async def get(conn: Conn, job_id: int, *, live: bool = False) -> JobOut | None:
    """One job; ``live`` counts a finished job's entries now instead of showing its final
    counters."""
    row = await conn.fetchrow(Q.get_job, job_id)
    return None if row is None else await _out(conn, row, live=live)


async def exists(conn: Conn, job_id: int) -> bool:
    return bool(await conn.fetchval(Q.job_exists, job_id))


async def page(
    conn: Conn,
    *,
    status: str | None = None,
    source: str | None = None,
    kind: str | None = None,
    limit: int = 50,
    offset: int = 0,
) -> Page[JobOut]:
    """Jobs, newest first, each filter applied when given."""
    total = await conn.fetchval(Q.count_jobs, status, source, kind)
    rows = await conn.fetch(Q.list_jobs, status, source, kind, limit, offset)
    items = [await _out(conn, r, live=False) for r in rows]
    return Page(items=items, total=total or 0, limit=limit, offset=offset)


async def entries(
    conn: Conn,
    job_id: int,
    *,
    state: str | None = None,
    url: str | None = None,
    limit: int = 50,
    offset: int = 0,
) -> Page[EntryOut]:
    """A job's frontier entries in admission order, each filter applied when given."""
    total = await conn.fetchval(Q.count_entries, job_id, state, url)
    rows = await conn.fetch(Q.list_entries, job_id, state, url, limit, offset)
    items = [EntryOut(**dict(r)) for r in rows]
    return Page(items=items, total=total or 0, limit=limit, offset=offset)


async def recent_failures(conn: Conn, *, limit: int = 50, offset: int = 0) -> list[FailureOut]:
    rows = await conn.fetch(Q.recent_failures, limit, offset)
    return [FailureOut(**dict(r)) for r in rows]


async def stats(conn: Conn) -> JobStats:
    jobs = await conn.fetch(Q.jobs_by_status)
    entries_ = await conn.fetch(Q.running_entries_by_state)
    outcomes = await conn.fetch(Q.outcomes_last_hour)
    return JobStats(
        jobs={r["status"]: r["n"] for r in jobs},
        entries={r["state"]: r["n"] for r in entries_},
        outcomes_last_hour={r["outcome"]: r["n"] for r in outcomes},
    )
