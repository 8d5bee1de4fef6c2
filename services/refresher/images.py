"""Point products at their stored primary image once a job has settled.

The scheduler admits each product image the source has no copy of as an ``image`` entry; the
fetcher stores it content-addressed and the scheduler records the stored copy of the URL like
any page's (the ``frontier_stored_copies`` view). When the job completes (so every image entry
is done), the products the job saw get the payload reference of their image URL. A product
whose image URL has no stored copy (the fetch failed, or images are off for the source) points
at nothing rather than at an older image.
"""

from __future__ import annotations

from services.refresher import store
from shared.urls import canonicalize


async def link_images(conn: store.Conn, job_id: int, source: str) -> int:
    """Set ``image_ref`` of the job's products; returns how many rows changed."""
    # Most image URLs are stored exactly as the product names them (already canonical).
    changed = await store.link_images_by_url(conn, source, job_id)
    unmatched = await store.unmatched_images(conn, source, job_id)
    if not unmatched:
        return changed
    canon = {key: canonicalize(image) for key, image in unmatched.items()}
    stored = await store.stored_copies(conn, source, sorted({u for u in canon.values() if u}))
    keys = sorted(canon)
    refs = [stored.get(url) if (url := canon[k]) else None for k in keys]
    return changed + await store.set_image_refs(conn, source, keys, refs)
