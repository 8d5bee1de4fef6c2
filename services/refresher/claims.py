"""What a message claims, checked against the database before anything is applied.

Anyone with publish rights on NATS could send a parse result or a job event; its content is a
claim. A parse result is applied only if it names an attempt the scheduler dispatched: an entry
of the claimed job with the claimed id and URL, of the claimed source, with an attempt number
among the entry's attempts (one past them is retried, as its dispatch may not be visible yet:
``NOT_YET_DELAY``; a forged one is dead-lettered after ``max_deliver``). A ``completed`` event
is honoured only for a job that exists, is completed, and is of the claimed source and kind;
what it waits for is read from the frontier, not from the event's counters. A refuted claim is
``Poison``: dead-lettered with the mismatch as its reason (docs/architecture.md "Message
fate").
"""

from __future__ import annotations

from collections.abc import Sequence

from schemas.messages import Attempt, JobEvent
from services.refresher import store
from services.refresher.store import FrontierJob
from shared.errors import Poison, Retry

# An attempt past the entry's count may be one whose dispatch has not committed yet: the
# scheduler publishes the work inside the dispatch transaction, and a fast page's result can
# come back before the commit is visible here. It is retried; only a forged one never appears.
NOT_YET_DELAY = 2.0


async def unclaimed(conn: store.Conn, attempts: Sequence[Attempt]) -> None:
    """Raise ``Poison`` if the frontier refutes one of ``attempts``, ``Retry`` if one is not
    dispatched yet (as far as this connection can see); the reasons name each."""
    known = await store.claimed_attempts(conn, [(a.entry_id, a.job_id, a.url) for a in attempts])
    forged: list[str] = []
    not_yet: list[str] = []
    for a, k in zip(attempts, known, strict=True):
        if a.replay is not None:
            forged.append("forged parse result: replays are applied in-process, never published")
        elif k.attempts is None:
            forged.append(
                f"forged parse result: no entry {a.entry_id} of job {a.job_id} at {a.url}"
            )
        elif k.source != a.source:
            forged.append(
                f"forged parse result: job {a.job_id} is of {k.source!r}, not {a.source!r}"
            )
        elif a.number < 1:
            forged.append(f"forged parse result: attempt {a.number} of entry {a.entry_id}")
        elif a.number > k.attempts:
            not_yet.append(
                f"attempt {a.number} of entry {a.entry_id} not dispatched ({k.attempts} so far)"
            )
    if forged:
        raise Poison("; ".join(forged))
    if not_yet:
        raise Retry("; ".join(not_yet), delay=NOT_YET_DELAY)


def check_completed(event: JobEvent, job: FrontierJob | None) -> FrontierJob:
    """The job a ``completed`` event names, if the frontier agrees; else ``Poison``."""
    if job is None:
        raise Poison(f"forged job event: no job {event.job_id}")
    claimed = (event.source, event.kind, "completed")
    actual = (job.source, job.kind, job.status)
    if claimed != actual:
        raise Poison(
            f"forged job event: job {event.job_id} is (source, kind, status) {actual}, "
            f"not {claimed}"
        )
    return job
