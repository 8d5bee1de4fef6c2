"""Retry policy: which outcomes retry, and when (jittered exponential backoff)."""

from __future__ import annotations

import math
import random

from schemas.outcomes import RETRYABLE_OUTCOMES
from schemas.source import RetryPolicy


def retry_delay(
    outcome: str,
    attempts: int,
    policy: RetryPolicy,
    *,
    retry_after: float | None = None,
    rng: random.Random | None = None,
) -> float | None:
    """Seconds until the next attempt, or None when the entry has failed for good.

    ``attempts`` counts the attempts made so far (1 after the first fetch). The n-th retry waits
    ``min(cap, base * factor^(n-1)) ± jitter``; ``blocked`` starts from the long cool-down base.
    A larger ``Retry-After`` wins.
    """
    if outcome not in RETRYABLE_OUTCOMES:
        return None
    retry_no = attempts  # the retry about to be scheduled (1-based)
    if retry_no > policy.max_retries:
        return None
    base = policy.blocked_base_delay if outcome == "blocked" else policy.base_delay
    delay = min(policy.cap, base * policy.factor ** (retry_no - 1))
    if policy.jitter:
        delay *= 1 + (rng or random).uniform(-policy.jitter, policy.jitter)
    if retry_after is not None and retry_after > delay:
        delay = retry_after
    return max(0.0, delay)


def capped_wait(seconds: float | None, cap: float) -> float | None:
    """A wait a server asks for (``Retry-After``, robots.txt ``Crawl-delay``), as far as we
    obey it: at most ``cap`` (the source's ``pacing.max_retry_after``).

    The value is the server's to choose: ``9999999999`` would park the domain for centuries and
    ``10^20`` overflow the timestamp (issue 17). Infinity is the cap; NaN is ignored.
    """
    if seconds is None or math.isnan(seconds):
        return None
    return min(max(0.0, seconds), cap)
