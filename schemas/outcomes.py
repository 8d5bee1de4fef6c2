"""The one outcome taxonomy of a fetch, and how an HTTP status maps onto it.

The fetcher classifies what it saw; the scheduler decides from the same names what is retried.
"""

from __future__ import annotations

from typing import Literal

Outcome = Literal[
    "ok",
    "not_modified",
    "gone",
    "rejected",
    "blocked",
    "server_error",
    "timeout",
    "network_error",
    "robots_disallowed",
    "unsafe_url",
    "no_proxy",
    # The reply made a result that cannot be encoded or published even made safe (the
    # fetcher's own verdict, ``error`` says why): the entry fails, never retried.
    "unpublishable",
]
OUTCOMES: tuple[str, ...] = Outcome.__args__  # type: ignore[attr-defined]
RETRYABLE_OUTCOMES = frozenset({"blocked", "server_error", "timeout", "network_error", "no_proxy"})


def classify_status(status: int) -> str:
    """The outcome of an HTTP status (before content checks)."""
    if status == 304:
        return "not_modified"
    if 200 <= status < 300:
        return "ok"
    if status in (404, 410):
        return "gone"
    if status in (403, 429):
        return "blocked"
    if 500 <= status < 600:
        return "server_error"
    return "rejected"
