"""What the scheduler does with fetch results and parse results.

Every effect is keyed by the attempt id, so a redelivered result changes nothing: the attempt
row is inserted first and a conflict means "already applied". A result for an attempt that is
no longer the entry's current one (stale recovery re-dispatched it) is recorded as history only.

A result's content is not trusted (anyone with publish rights could send one): what it claims
(its entry, job, source, URL and attempt number) must match an attempt the scheduler really
dispatched, or it is ``Poison`` and dead-lettered with the mismatch as reason.
"""

from __future__ import annotations

import logging
import random
from dataclasses import dataclass

import asyncpg

from schemas.messages import Attempt, FetchResult, ParseResult
from services.scheduler import store
from services.scheduler.frontier import Admission, Candidate, image_candidates
from services.scheduler.jobs import JobSources
from services.scheduler.priority import job_boost
from services.scheduler.proxies import record_proxy_outcome
from services.scheduler.retry import capped_wait, retry_delay
from services.scheduler.seen import JobLinks, SeenLinks
from services.scheduler.store import Conn
from shared.api_template import request_key
from shared.errors import Poison

log = logging.getLogger("trawl.scheduler.results")

# Outcomes that slow a whole domain down (host-level back-off, separate from one URL's retry).
_SLOWDOWN = {"blocked", "server_error", "timeout"}
_MAX_BACKOFF = 16.0
SLOW_RESPONSE_MS = 10_000.0


@dataclass(frozen=True)
class Applied:
    job_id: int
    terminal: bool  # the entry left the open states
    state: str | None = None  # the entry's new state; None for a stale result


async def apply_fetch_result(
    conn: Conn, result: FetchResult, job_sources: JobSources
) -> Applied | None:
    attempt = result.attempt
    async with conn.transaction():
        entry = await store.results.lock_entry_for_fetch(conn, attempt.entry_id)
        check_claim(entry, attempt)
        assert entry is not None
        if not await store.results.insert_attempt(conn, result):
            return None  # a redelivery: already applied
        await record_proxy_outcome(conn, result)
        source, _ = await job_sources.get(conn, attempt.job_id)
        cap = source.pacing.max_retry_after
        retry_after = capped_wait(result.retry_after, cap)
        await _pace_domain(
            conn, entry["domain"], result, retry_after, capped_wait(result.crawl_delay, cap)
        )
        if result.payload_ref:
            await store.results.insert_payload(conn, result)
        # url_state is the URL's memory across jobs; API pages sharing a URL (POST bodies)
        # would overwrite each other's, so they keep none (and send no validators).
        if result.outcome == "ok" and result.payload_ref and not request_key(attempt.request):
            await store.results.remember_url(conn, result)
        current = entry["attempts"] == attempt.number
        if not current or entry["state"] != "dispatched":
            return Applied(attempt.job_id, terminal=False)  # stale: history only

        retry_in: float | None = None
        if result.outcome in ("ok", "not_modified"):
            # Closed now if the parse result overtook this fetch result, else awaiting parse.
            state = "done" if entry["parsed"] else "fetched"
        else:
            retry_in = retry_delay(
                result.outcome, entry["attempts"], source.retry, retry_after=retry_after
            )
            if retry_in is None:
                state = "failed" if result.outcome in _RETRYABLE else "done"
            else:
                state = "waiting"
        await store.results.set_entry_fetched(conn, result, state, retry_in)
        return Applied(attempt.job_id, terminal=state in ("done", "failed"), state=state)


_RETRYABLE = {"blocked", "server_error", "timeout", "network_error", "no_proxy", "unpublishable"}


def check_claim(entry: asyncpg.Record | None, attempt: Attempt) -> None:
    """Raise ``Poison`` unless ``attempt`` is one the scheduler dispatched: its entry exists,
    in its job, of its source, at its URL, and its number is among the entry's attempts."""
    if attempt.replay is not None:
        raise Poison("forged result: replays are applied in-process, never published")
    if entry is None:
        raise Poison(f"forged or orphan result: no entry {attempt.entry_id}")
    claimed = (attempt.job_id, attempt.source, attempt.url)
    actual = (entry["job_id"], entry["source"], entry["url"])
    if claimed != actual:
        raise Poison(
            f"forged result: entry {attempt.entry_id} is (job, source, url) {actual}, not {claimed}"
        )
    if not 1 <= attempt.number <= entry["attempts"]:
        raise Poison(
            f"forged result: attempt {attempt.number} of entry {attempt.entry_id} was never "
            f"dispatched ({entry['attempts']} so far)"
        )


async def _pace_domain(
    conn: Conn,
    domain: str,
    result: FetchResult,
    retry_after: float | None,
    crawl_delay: float | None,
) -> None:
    """Free the in-flight slot and set when the domain may go next (``retry_after`` and
    ``crawl_delay``: the server's, already capped by the source)."""
    row = await store.results.lock_domain_pace(conn, domain)
    if row is None:
        return
    backoff = row["backoff"]
    if (
        result.outcome in _SLOWDOWN
        or (result.status in (429, 503))
        or (result.elapsed_ms > SLOW_RESPONSE_MS)
    ):
        backoff = min(_MAX_BACKOFF, backoff * 2)
    elif result.outcome in ("ok", "not_modified"):
        backoff = max(1.0, backoff * 0.9)
    crawl_delay = crawl_delay if crawl_delay is not None else row["crawl_delay"]
    delay = random.uniform(row["min_delay"], row["max_delay"]) * backoff
    delay = max(delay, crawl_delay or 0.0, retry_after or 0.0)
    await store.results.pace_domain(
        conn, domain, backoff=backoff, crawl_delay=crawl_delay, delay=delay
    )


async def apply_parse_result(
    conn: Conn, result: ParseResult, job_sources: JobSources, seen: SeenLinks | None = None
) -> tuple[Applied | None, int]:
    """Admit the discovered links and close the entry, or, when the fetch result is not in
    yet, mark it parsed so that the fetch result closes it. Returns (applied, links admitted).

    ``seen``: the links this replica knows are in the job already skip the admission query;
    the links sent to it are remembered once the transaction has committed (not when it is
    nested in a caller's transaction, which may still roll back).
    """
    links = seen.job(result.attempt.job_id) if seen is not None else None
    async with conn.transaction():
        applied = await _apply_parse_result(conn, result, job_sources, links)
    if links is not None and not conn.is_in_transaction():
        links.commit()
    return applied


async def _apply_parse_result(
    conn: Conn, result: ParseResult, job_sources: JobSources, seen: JobLinks | None
) -> tuple[Applied | None, int]:
    attempt = result.attempt
    entry = await store.results.lock_entry_for_parse(conn, attempt.entry_id)
    check_claim(entry, attempt)
    assert entry is not None
    if entry["attempts"] != attempt.number:
        return None, 0  # superseded by a later attempt: history
    if entry["parsed"] or entry["state"] not in ("dispatched", "fetched"):
        return None, 0  # a redelivery: already applied
    source, allowed = await job_sources.get(conn, attempt.job_id)
    admitted = 0
    if result.failed:
        # The parser could not publish the page's result (docs/architecture.md "Message
        # fate"): nothing to admit, and the entry fails with the reason, whatever comes next.
        await store.results.set_entry_parsed(
            conn, attempt.entry_id, products=0, error=result.error, closes=True, failed=True
        )
        return Applied(attempt.job_id, terminal=True, state="failed"), 0
    if entry["job_status"] == "running" and (result.links or result.sightings()):
        admission = Admission(source, allowed)
        boost = job_boost(entry["priority"], entry["requested_by"])
        hops = entry["pagination_hops"]
        # The next page of a listing is as deep as the page that links it: otherwise a
        # category's later pages, and the products only they list, fall off max_depth
        # depending on which page's links happened to be parsed first.
        candidates = [
            Candidate(
                link.url,
                link.kind,
                attempt.depth if link.kind == "pagination" else attempt.depth + 1,
                attempt.keyword,
                link.request,
                link.lastmod,
                pagination_hops=hops + 1 if link.kind == "pagination" else 0,
                referrer=attempt.url,
            )
            for link in result.links
        ]
        images = [p.image for p in result.sightings() if p.image]
        candidates += await image_candidates(
            conn, source, images, attempt.depth + 1, referrer=attempt.url
        )
        admitted = await admission.admit(conn, attempt.job_id, candidates, boost=boost, seen=seen)
    closes = entry["state"] == "fetched"
    await store.results.set_entry_parsed(
        conn,
        attempt.entry_id,
        # An API page lists many; the refresher waits for them all. An unsure sighting is
        # not applied (Product.confident), so it is not counted either.
        products=sum(p.confident for p in result.sightings()),
        error=result.error,
        closes=closes,
    )
    return Applied(attempt.job_id, terminal=closes), admitted
