"""Priorities and aging.

Effective priority = base + 10 per hour waited (capped at 100). Because every waiting entry ages
at the same rate, ordering by ``base - 10 * enqueued_hours`` is the same as ordering by the
effective priority, so the dispatch index can hold a static rank. The enqueue time is counted in
whole minutes, and a random tiebreak orders entries within a minute: sources, keywords and pages
interleave instead of bursting.
"""

from __future__ import annotations

DEFAULT_PRIORITY: dict[str, int] = {
    "seed": 60,
    "search": 60,
    "sitemap": 55,
    "pagination": 50,
    "product": 40,
    "page": 30,
    "image": 20,  # after every page: images never lead to more work
}
AGING_PER_HOUR = 10.0
USER_BOOST = 10
MAX_PRIORITY = 100


def base_priority(kind: str, boost: int = 0) -> int:
    return max(0, min(MAX_PRIORITY, DEFAULT_PRIORITY.get(kind, 30) + boost))


def rank(priority: int, enqueued_epoch: float) -> float:
    """Static rank: higher dispatches first."""
    minutes = enqueued_epoch // 60
    return priority - AGING_PER_HOUR * minutes / 60.0


def job_boost(priority: int | None, requested_by: str | None) -> int:
    """Boost of a job's entries: an explicit trigger priority is relative to the seeds' 60."""
    if priority is not None:
        return priority - DEFAULT_PRIORITY["seed"]
    # Scheduled runs are routine work; a person asking for a crawl gets the boost.
    if requested_by and not requested_by.startswith("schedule:"):
        return USER_BOOST
    return 0
