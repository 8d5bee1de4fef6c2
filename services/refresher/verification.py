"""Verify before alerting: a candidate change is re-fetched with a fresh identity before its
event is emitted.

A candidate is an ``out_of_stock``, a ``delisted`` or a price change of at least the source's
``verify.price_change`` (30 % by default), seen by a crawl job of a source that verifies. It is
recorded as a ``product_events`` row in the state ``pending`` (never published), and the
product row keeps its last verified price and stock (``hold``): the next sighting then compares
with what was verified, so a change the re-check could not settle is seen again, and a
cancelled one leaves nothing to undo. After the commit the refresher asks the scheduler for a
``verify`` job (a trigger with the candidates' pages as seeds and an idempotent id): a job of
its own, partial (it counts no misses), with its own sessions, so a new identity, proxy and
cookie jar, and paced, robots-checked and SSRF-guarded like any job.

The verify job's sightings are applied like any other. A change of the kind a pending candidate
claims confirms it: the candidate becomes the event (its job, its key: one event, however many
sightings) with the re-check's after, and is published. At the verify job's completion the rest
is settled: a product the re-check saw (without the claimed change) cancels its candidate; a
delisting whose page came back gone, or fetched and read without the product, is confirmed (and
only then is the product delisted); anything else (blocked, failed, parsed without confidence,
not fetched) is unknown, never a change.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace

import msgspec
import nats.errors
from nats.aio.client import Client

from schemas.messages import ProductChange, Trigger, TriggerReply
from schemas.source import Verify
from services.refresher import store
from services.refresher.changes import Change
from shared.bus import encode
from shared.lru import LRU
from shared.names import Names
from shared.sources import source_from_dict
from shared.urls import canonicalize

log = logging.getLogger("trawl.refresher.verification")

# A verify job's entries go before the crawl's waiting work on the same domains: the trigger's
# priority is relative to the seeds' 60, so its product entries rank 40 + 40 = 80, above any
# crawl entry (seeds 60, a user's 70) until those have waited hours (aging).
VERIFY_PRIORITY = 100
# How long the refresher waits for the scheduler's answer to a verify trigger; unanswered, the
# sweep asks again (the trigger's id makes that the same job).
REQUEST_TIMEOUT = 5.0
# Candidates whose re-check no scheduler took within this long are unknown.
GIVE_UP_AFTER = 3600.0
# What a re-fetch that says the product is gone looks like: the page answered 404/410, or it
# was fetched and read (with confidence) without the product.
_GONE = "gone"
_READ = "ok"

_reply = msgspec.json.Decoder(TriggerReply)


@dataclass(frozen=True)
class JobPolicy:
    """How a job's changes are treated: a verify job's confirm candidates; a crawl job's are
    held as candidates when its source verifies them."""

    verifying: bool = False
    verify: Verify | None = None

    def holds(self, change: Change) -> bool:
        """Whether ``change`` is a candidate to verify before its event."""
        v = self.verify
        if self.verifying or v is None:
            return False
        if change.kind == "out_of_stock":
            return v.out_of_stock
        if change.kind == "price_changed":
            return change.percent is not None and abs(change.percent) >= v.price_threshold()
        return False


def policy_of(job: store.FrontierJob) -> JobPolicy:
    if job.kind == "verify":
        return JobPolicy(verifying=True)
    return JobPolicy(verify=source_from_dict(job.definition).verification())


class Policies:
    """Job id → its policy, read from the frontier's jobs once per job (a job's kind and the
    source it runs with never change)."""

    def __init__(self, capacity: int = 4096) -> None:
        self._cache: LRU[int, JobPolicy] = LRU(capacity)

    async def of(self, conn: store.Conn, job_ids: Iterable[int]) -> dict[int, JobPolicy]:
        out: dict[int, JobPolicy] = {}
        for job_id in set(job_ids):
            policy = self._cache.get(job_id)
            if policy is None:
                job = await store.job(conn, job_id)
                policy = JobPolicy() if job is None else policy_of(job)
                self._cache.put(job_id, policy)
            out[job_id] = policy
        return out


def trigger_id(source: str, job_id: int, tag: str) -> str:
    """The verify trigger's id: the same candidates always ask with the same id, so a request
    repeated (by the sweep, by a redelivery) is the same job."""
    return f"verify-{source}-{job_id}-{tag}"


def as_candidate(change: Change, trigger: str, page: str | None) -> Change:
    """``change`` recorded as a pending candidate whose re-check ``trigger`` asks for, by
    re-fetching ``page``."""
    return replace(change, verification="pending", verify_trigger=trigger, verify_url=page)


async def request(
    nc: Client, names: Names, conn: store.Conn, rechecks: Sequence[store.Recheck]
) -> int:
    """Ask the scheduler for each re-check (after the commit that recorded the candidates) and
    record the verify job it answers with. Unanswered (no scheduler up, a timeout): the sweep
    asks again; the trigger is in the trigger stream meanwhile, so it may run anyway. Refused
    (an error answer: no usable page, the source deleted): its candidates are unknown at once
    (asking again would only dead-letter the stream's copy again). Returns how many were."""
    refused = 0
    for r in rechecks:
        trigger = Trigger(
            source=r.source,
            id=r.trigger_id,
            kind="verify",
            seeds=list(r.urls),
            priority=VERIFY_PRIORITY,
            requested_by="verify",
        )
        try:
            msg = await nc.request(names.trigger, encode(trigger), timeout=REQUEST_TIMEOUT)
            reply = _reply.decode(msg.data)
        except (nats.errors.NoRespondersError, nats.errors.TimeoutError, msgspec.DecodeError):
            log.warning(
                "verify trigger not answered",
                extra={"action": "verify_unanswered", "trigger": r.trigger_id},
            )
            continue
        if reply.job_id is None:
            refused += await store.refused_recheck(conn, r.trigger_id)
            log.warning(
                "verify trigger refused",
                extra={"action": "verify_refused", "trigger": r.trigger_id, "error": reply.error},
            )
            continue
        await store.link_verify_job(conn, r.trigger_id, reply.job_id)
        log.info(
            "verification asked",
            extra={
                "action": "verify_requested",
                "trigger": r.trigger_id,
                "job_id": reply.job_id,
                "pages": len(r.urls),
            },
        )
    return refused


@dataclass(frozen=True)
class Resolution:
    """What a verify job's completion settled."""

    confirmed: int = 0
    cancelled: int = 0
    unknown: int = 0
    events: tuple[ProductChange, ...] = ()  # confirmed delistings, to publish after the commit


def _read_without(page: store.CheckedPage | None) -> bool:
    """The re-fetch says the product is gone: 404/410, or read with confidence without it."""
    if page is None or page.state != "done":
        return False
    return page.last_outcome == _GONE or (page.last_outcome == _READ and not page.unsure)


async def resolve(conn: store.Conn, job_id: int, source: str) -> Resolution:
    """Settle the verify job's pending candidates (run it in the transaction that counts the
    job's misses: the candidates are locked, so one completion settles them, once). The ones
    its sightings confirmed are settled already."""
    pending = await store.pending_checks(conn, job_id)
    if not pending:
        return Resolution()
    seen = set(await store.seen_keys(conn, job_id, source))
    pages = {canonicalize(p.url) or p.url: p for p in await store.verify_pages(conn, job_id)}
    confirm, cancel, unknown = [], [], []
    for c in pending:
        page = pages.get(canonicalize(c.verify_url or "") or "")
        if c.row_key in seen:
            cancel.append(c)  # seen, without the change claimed: the candidate was wrong
        elif c.kind == "delisted" and _read_without(page):
            confirm.append(c)
        else:
            unknown.append(c)  # blocked, failed, unsure, not fetched: says nothing
    events: list[ProductChange] = []
    if confirm:
        delisted = await store.delist_keys(conn, source, [c.row_key for c in confirm])
        changed = [d for d in delisted if d.before != "out_of_stock"]
        if changed:
            await store.snapshot_delisted(conn, source, job_id, changed)
        # A product another job saw meanwhile (its misses reset) is not delisted after all.
        done = {d.key for d in delisted}
        cancel += [c for c in confirm if c.row_key not in done]
        confirm = [c for c in confirm if c.row_key in done]
        events = await store.confirm_checks(conn, [c.id for c in confirm], job_id)
    await store.settle_checks(conn, [c.id for c in cancel], "cancelled")
    await store.settle_checks(conn, [c.id for c in unknown], "unknown")
    return Resolution(len(confirm), len(cancel), len(unknown), tuple(events))
