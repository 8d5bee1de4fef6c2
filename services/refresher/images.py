"""Point products at their stored primary image once a job has settled.

The scheduler admits each product image the source has no copy of as an ``image`` entry; the
fetcher stores it content-addressed and the scheduler records it in ``url_state`` like any
page. When the job completes (so every image entry is done), the products the job saw get the
payload reference of their image URL. A product whose image URL has no stored copy (the fetch
failed, or images are off for the source) points at nothing rather than at an older image.
"""

from __future__ import annotations

import asyncpg

from shared.urls import canonicalize

# Most image URLs are stored exactly as the product names them (already canonical).
_BY_EXACT_URL = """
UPDATE products p SET image_ref = u.payload_ref
FROM url_state u
WHERE p.source = $1 AND p.last_seen_job = $2 AND u.source = p.source AND u.url = p.image
  AND u.payload_ref IS NOT NULL AND p.image_ref IS DISTINCT FROM u.payload_ref
"""

_UNMATCHED = """
SELECT p.key, p.image FROM products p
WHERE p.source = $1 AND p.last_seen_job = $2 AND p.image IS NOT NULL
  AND NOT EXISTS (SELECT 1 FROM url_state u
                  WHERE u.source = p.source AND u.url = p.image AND u.payload_ref IS NOT NULL)
"""

_SET = """
UPDATE products p SET image_ref = v.ref
FROM unnest($2::text[], $3::text[]) AS v(key, ref)
WHERE p.source = $1 AND p.key = v.key AND p.image_ref IS DISTINCT FROM v.ref
"""


async def link_images(conn: asyncpg.Connection, job_id: int, source: str) -> int:
    """Set ``image_ref`` of the job's products; returns how many rows changed."""
    changed = int((await conn.execute(_BY_EXACT_URL, source, job_id)).rsplit(" ", 1)[-1])
    rows = await conn.fetch(_UNMATCHED, source, job_id)
    if not rows:
        return changed
    canon = {r["key"]: canonicalize(r["image"]) for r in rows}
    stored = await stored_copies(conn, source, sorted({u for u in canon.values() if u}))
    keys = sorted(canon)
    refs = [stored.get(canon[k]) if canon[k] else None for k in keys]
    status = await conn.execute(_SET, source, keys, refs)
    return changed + int(status.rsplit(" ", 1)[-1])


async def stored_copies(conn: asyncpg.Connection, source: str, urls: list[str]) -> dict[str, str]:
    """Canonical URL → payload ref of the URLs the source has a stored copy of (url_state)."""
    rows = await conn.fetch(
        "SELECT url, payload_ref FROM url_state WHERE source = $1 AND url = ANY($2::text[]) "
        "AND payload_ref IS NOT NULL",
        source,
        urls,
    )
    return {r["url"]: r["payload_ref"] for r in rows}
