"""What a message claims, checked against the database before anything is applied.

Anyone with publish rights on NATS could send a parse result or a job event; its content is a
claim. A parse result is applied only if it names an attempt the scheduler dispatched: an entry
of the claimed job with the claimed id and URL, of the claimed source, with an attempt number
among the entry's attempts. A ``completed`` event is honoured only for a job that exists, is
completed, and is of the claimed source and kind; what it waits for is read from the frontier,
not from the event's counters. A failed claim is ``Poison``: dead-lettered with the mismatch as
its reason (docs/architecture.md "Message fate").
"""

from __future__ import annotations

from collections.abc import Sequence

from schemas.messages import Attempt, JobEvent
from services.refresher import store
from services.refresher.store import FrontierJob
from shared.errors import Poison


async def unclaimed(conn: store.Conn, attempts: Sequence[Attempt]) -> dict[int, str]:
    """The positions of ``attempts`` the frontier does not back, each with its reason."""
    known = await store.claimed_attempts(conn, [(a.entry_id, a.job_id, a.url) for a in attempts])
    bad: dict[int, str] = {}
    for i, (a, k) in enumerate(zip(attempts, known, strict=True)):
        if a.replay is not None:
            bad[i] = "forged parse result: replays are applied in-process, never published"
        elif k.attempts is None:
            bad[i] = f"forged parse result: no entry {a.entry_id} of job {a.job_id} at {a.url}"
        elif k.source != a.source:
            bad[i] = f"forged parse result: job {a.job_id} is of {k.source!r}, not {a.source!r}"
        elif not 1 <= a.number <= k.attempts:
            bad[i] = (
                f"forged parse result: attempt {a.number} of entry {a.entry_id} was never "
                f"dispatched ({k.attempts} so far)"
            )
    return bad


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
