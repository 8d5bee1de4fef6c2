"""The scheduler's store: the one place that runs SQL on the tables the scheduler owns.

Every statement is a named query of ``services/scheduler/queries.sql`` (procrastinate's
``sql/queries.sql`` read by its ``JobManager`` is the model). One module per concern::

    store.sources    source definitions
    store.jobs       job lifecycle, counters, operator actions, triggers, job read models
    store.job_history the dashboard's job history, a job's progress over time, top errors
    store.frontier   admitting entries, stored copies, stale recovery
    store.dispatch   claiming domains and entries for dispatch
    store.results    attempts, payload rows, URL memory, entry and domain updates
    store.domains    domains as operators see and steer them
    store.schedules  schedules and claiming their runs
    store.proxies    the proxy registry and its health
    store.payloads   payload metadata

Functions take a connection (``Conn``: a pool's too), so a caller can hold a transaction over
several of them. What readers show as it is comes back as a read model of ``schemas.read``;
what the scheduler's logic interprets comes back as rows or plain values.
"""

from __future__ import annotations

from services.scheduler.store import (
    dispatch,
    domains,
    frontier,
    job_history,
    jobs,
    payloads,
    proxies,
    results,
    schedules,
    sources,
)
from services.scheduler.store.queries import Conn, Q


async def ping(conn: Conn) -> bool:
    """The database answers."""
    return await conn.fetchval(Q.ping) == 1


__all__ = [
    "Conn",
    "dispatch",
    "domains",
    "frontier",
    "job_history",
    "jobs",
    "payloads",
    "ping",
    "proxies",
    "results",
    "schedules",
    "sources",
]
