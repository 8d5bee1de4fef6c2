"""Consecutive misses: after a job completes and all its products are applied, products it saw
reset, products on pages that failed transiently stay as they are, and the rest count a miss.
At the source's threshold a product is marked ``out_of_stock`` with ``delisted_at``. A job with
too many failures counts nothing: one bad crawl must not empty a catalog. Nor does a partial
job (its trigger's own seeds or keywords), nor one whose API listing stopped at a guard."""

from __future__ import annotations

from dataclasses import dataclass

import asyncpg

from schemas.source import Source


@dataclass(frozen=True)
class MissReport:
    counted: bool
    reason: str | None = None
    seen: int = 0
    missed: int = 0
    delisted: int = 0


# Pages whose fetch ended in failure (retries exhausted on a transient outcome).
_FAILED_URLS = """SELECT url FROM entries WHERE job_id = $1 AND state = 'failed'"""

_SEEN_KEYS = """
SELECT product_key AS key FROM applied_results WHERE job_id = $1 AND product_key IS NOT NULL
UNION
SELECT p.key FROM products p JOIN applied_results a
  ON a.job_id = $1 AND a.not_modified_url IS NOT NULL AND p.url = a.not_modified_url
WHERE p.source = $2
UNION
-- pages a sitemap's lastmod showed unchanged: admitted done, never fetched
SELECT p.key FROM products p JOIN entries e
  ON e.job_id = $1 AND e.state = 'done' AND e.last_outcome = 'not_modified' AND e.url = p.url
WHERE p.source = $2
"""


async def failure_rate(conn: asyncpg.Connection, job_id: int) -> float:
    """Of the job's pages: an image that cannot be fetched says nothing about the catalog."""
    row = await conn.fetchrow(
        """SELECT count(*) AS total, count(*) FILTER (WHERE state = 'failed') AS failed
           FROM entries WHERE job_id = $1 AND kind <> 'image'""",
        job_id,
    )
    return (row["failed"] / row["total"]) if row["total"] else 0.0


async def count_misses(
    conn: asyncpg.Connection, job_id: int, source_name: str, source: Source
) -> MissReport:
    """Run inside a transaction; idempotent per job through ``miss_counts``."""
    first = await conn.fetchval(
        "INSERT INTO miss_counts (job_id, source, counted) VALUES ($1, $2, false) "
        "ON CONFLICT DO NOTHING RETURNING 1",
        job_id,
        source_name,
    )
    if not first:
        return MissReport(counted=False, reason="already counted")
    # Seen is seen, even in a crawl too broken to count misses. The per-sighting upsert skips
    # unchanged rows, so this is also where their last-seen mark is set.
    seen = [r["key"] for r in await conn.fetch(_SEEN_KEYS, job_id, source_name)]
    await conn.execute(
        """UPDATE products SET consecutive_misses = 0, delisted_at = NULL, last_seen_at = now(),
               last_seen_job = greatest(last_seen_job, $3)
           WHERE source = $1 AND key = ANY($2::text[])""",
        source_name,
        seen,
        job_id,
    )
    reason = await _reason_not_to_count(conn, job_id, source)
    if reason is not None:
        await conn.execute("UPDATE miss_counts SET reason = $2 WHERE job_id = $1", job_id, reason)
        return MissReport(counted=False, reason=reason, seen=len(seen))
    failed_urls = [r["url"] for r in await conn.fetch(_FAILED_URLS, job_id)]
    missed = await conn.fetch(
        """UPDATE products SET consecutive_misses = consecutive_misses + 1, updated_at = now()
           WHERE source = $1 AND NOT (key = ANY($2::text[]))
             AND NOT (coalesce(url, '') = ANY($3::text[]))
             AND first_seen_at < (SELECT created_at FROM jobs WHERE id = $4)
           RETURNING key""",
        source_name,
        seen,
        failed_urls,
        job_id,
    )
    # The delisting is a stock change: it gets a snapshot unless the product already was
    # out of stock.
    delisted = await conn.fetch(
        """WITH d AS (
               SELECT key, availability AS before FROM products
               WHERE source = $1 AND consecutive_misses >= $2 AND delisted_at IS NULL
               FOR UPDATE)
           UPDATE products p SET availability = 'out_of_stock', delisted_at = now(),
               updated_at = now()
           FROM d WHERE p.source = $1 AND p.key = d.key
           RETURNING p.key, p.price, p.sale_price, p.currency, d.before""",
        source_name,
        source.refresh.miss_threshold,
    )
    changed = [r for r in delisted if r["before"] != "out_of_stock"]
    if changed:
        await conn.executemany(
            """INSERT INTO snapshots (source, key, job_id, price, sale_price, currency,
                   availability) VALUES ($1, $2, $3, $4, $5, $6, 'out_of_stock')""",
            [
                (source_name, r["key"], job_id, r["price"], r["sale_price"], r["currency"])
                for r in changed
            ],
        )
    report = MissReport(counted=True, seen=len(seen), missed=len(missed), delisted=len(delisted))
    await conn.execute(
        "UPDATE miss_counts SET counted = true, seen = $2, missed = $3, delisted = $4 "
        "WHERE job_id = $1",
        job_id,
        report.seen,
        report.missed,
        report.delisted,
    )
    return report


async def _reason_not_to_count(conn: asyncpg.Connection, job_id: int, source: Source) -> str | None:
    """Why this job's end says nothing about the products it did not see, if it does not."""
    rate = await failure_rate(conn, job_id)
    if rate > source.refresh.max_failure_rate:
        return f"failure rate {rate:.0%} over {source.refresh.max_failure_rate:.0%}"
    if await conn.fetchval("SELECT partial FROM jobs WHERE id = $1", job_id):
        # Its trigger named its own seeds or keywords: the rest of the catalog was not asked for.
        return "a partial crawl: its trigger named its own seeds or keywords"
    stopped = await conn.fetchval(
        "SELECT 1 FROM entries WHERE job_id = $1 AND parse_error LIKE 'pagination guard%' LIMIT 1",
        job_id,
    )
    if stopped:
        # The listing ended early: products past the guard were never asked for.
        return "an API listing stopped at a pagination guard"
    return None
