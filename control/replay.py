"""Replay a job: re-parse its stored payloads with the job's source definition and re-apply the
products, without any HTTP request (after a parser fix, or for a new field).

The pages are the job's entries that were fetched (``ok``) or re-validated (``not_modified``);
each is parsed from the newest payload of its URL stored by that job or an earlier job of the
source (a 304 stores nothing new). API pages that share a URL (POST bodies) are told apart by
their request: each is parsed from the payload its own attempt stored, with its request, so
the JSON mapping and variant expansion apply exactly as in the live crawl.

The results go through the refresher's own batch apply in replay mode: products and snapshots
are corrected, while misses, delisting and last-seen stay as the live crawls left them, and a
product a newer job has seen since is left alone.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from dataclasses import asdict, dataclass

import asyncpg

from schemas.messages import Attempt, ParseResult
from services.parser.formats import parse_payload
from services.refresher import store as refresher
from services.refresher.products import apply_results
from services.refresher.verification import Policies
from shared.api_template import decode_request
from shared.errors import TrawlError
from shared.payloads import PayloadNotFound, PayloadStore
from shared.sources import source_from_dict

log = logging.getLogger("trawl.refresher.replay")

CHUNK = 500  # results per transaction
FETCHES = 32  # payload reads in flight


class ReplayError(TrawlError):
    """The job cannot be replayed."""


@dataclass(frozen=True)
class ReplayReport:
    job_id: int
    source: str
    replay_id: str
    pages: int
    products: int
    missing_payloads: int
    upserts: int
    snapshots: int

    def to_dict(self) -> dict:
        return asdict(self)


async def replay_job(pool: asyncpg.Pool, store: PayloadStore, job_id: int) -> ReplayReport:
    async with pool.acquire() as conn:
        job = await refresher.job(conn, job_id)
        if job is None:
            raise ReplayError(f"job {job_id} not found")
        if job.status == "running":
            raise ReplayError(f"job {job_id} is still running")
        pages = await refresher.replay_pages(conn, job_id, job.source)
    source = source_from_dict(job.definition)
    replay_id = uuid.uuid4().hex[:12]
    slots = asyncio.Semaphore(FETCHES)
    missing = 0

    async def parse_one(page: refresher.ReplayPage) -> ParseResult | None:
        nonlocal missing
        async with slots:
            try:
                body = await store.get(page.ref)
            except PayloadNotFound:
                missing += 1
                return None
        request = decode_request(page.request)
        parsed = parse_payload(
            body,
            page.url,
            content_type=page.content_type,
            source=source,
            kind=page.kind,
            request=request,
            keyword=page.keyword,
        )
        await asyncio.sleep(0)  # parsing is CPU-bound: let the reads progress
        attempt = Attempt(
            entry_id=page.entry_id,
            job_id=job_id,
            source=job.source,
            url=page.url,
            kind=page.kind,
            depth=page.depth,
            keyword=page.keyword,
            request=request,
            # A replay's own id: the refresher's idempotency table takes it as a new result,
            # and the scheduler (which only heeds an entry's current attempt) never sees it.
            replay=replay_id,
        )
        return ParseResult(
            attempt=attempt,
            payload_ref=page.ref,
            product=parsed.product,
            products=parsed.products,
        )

    parsed = [r for r in await asyncio.gather(*(parse_one(p) for p in pages)) if r is not None]
    results = [r for r in parsed if r.sightings()]
    upserts = snapshots = 0
    # A sighting that would be a candidate keeps the row's verified price and stock, as live.
    policies = Policies()
    async with pool.acquire() as conn:
        for i in range(0, len(results), CHUNK):
            done = await apply_results(conn, results[i : i + CHUNK], replay=True, policies=policies)
            upserts += done.upserts
            snapshots += done.snapshots
    report = ReplayReport(
        job_id=job_id,
        source=job.source,
        replay_id=replay_id,
        pages=len(pages),
        products=sum(len(r.sightings()) for r in results),
        missing_payloads=missing,
        upserts=upserts,
        snapshots=snapshots,
    )
    log.info("job replayed", extra={"action": "job_replayed", **report.to_dict()})
    return report
