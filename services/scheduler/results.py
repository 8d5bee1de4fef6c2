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

from schemas.messages import Attempt, FetchResult, Link, ParseResult
from services.scheduler import store
from services.scheduler.frontier import Admission, Candidate, image_candidates
from services.scheduler.jobs import JobSources
from services.scheduler.priority import job_boost
from services.scheduler.proxies import record_proxy_outcome
from services.scheduler.retry import capped_wait, retry_delay
from services.scheduler.robots import RobotsAtAdmission
from services.scheduler.seen import JobLinks, SeenLinks
from services.scheduler.store import Conn
from shared.api_template import request_key
from shared.errors import Poison
from shared.urls import canonicalize

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
    """One fetch result (see ``apply_fetch_results``)."""
    return (await apply_fetch_results(conn, [result], job_sources))[0]


async def apply_fetch_results(
    conn: Conn, results: list[FetchResult], job_sources: JobSources
) -> list[Applied | None]:
    """Apply a batch of fetch results in one transaction, a handful of statements in all:
    what each did (None: a redelivery, already applied), in the order given. A result that
    is not a claim the scheduler backs raises ``Poison`` for the whole batch (the caller
    applies its results one by one to find the culprit)."""
    async with conn.transaction():
        entries = await store.results.lock_entries_for_fetch(
            conn, sorted({r.attempt.entry_id for r in results})
        )
        for r in results:
            check_claim(entries.get(r.attempt.entry_id), r.attempt)
        # A result twice in one batch (a redelivery) is applied once.
        first = {r.attempt.id: i for i, r in reversed(list(enumerate(results)))}
        unique = [r for i, r in enumerate(results) if first[r.attempt.id] == i]
        inserted = await store.results.insert_attempts(conn, unique)
        fresh = [r for r in unique if r.attempt.id in inserted]
        applied: dict[str, Applied] = {}
        if fresh:
            for r in fresh:
                await record_proxy_outcome(conn, r)
            domains = [(entries[r.attempt.entry_id]["domain"], r) for r in fresh]
            await _pace_domains(conn, domains, job_sources)
            stored = [r for r in fresh if r.payload_ref]
            if stored:
                # url_state is the URL's memory across jobs; API pages sharing a URL (POST
                # bodies) would overwrite each other's, so they keep none (and send no
                # validators).
                remembered = [
                    r for r in stored if r.outcome == "ok" and not request_key(r.attempt.request)
                ]
                await store.results.record_payloads(conn, stored, remembered)
            changes: list[store.results.EntryFetched] = []
            for r in fresh:
                entry = entries[r.attempt.entry_id]
                change = await _entry_fetched(conn, entry, r, job_sources)
                if change is None:  # stale: history only
                    applied[r.attempt.id] = Applied(r.attempt.job_id, terminal=False)
                    continue
                changes.append(change)
                terminal = change.state in ("done", "failed")
                applied[r.attempt.id] = Applied(r.attempt.job_id, terminal, change.state)
            if changes:
                await store.results.set_entries_fetched(conn, changes)
    return [
        applied.get(r.attempt.id) if first[r.attempt.id] == i else None
        for i, r in enumerate(results)
    ]


async def _entry_fetched(
    conn: Conn, entry: asyncpg.Record, result: FetchResult, job_sources: JobSources
) -> store.results.EntryFetched | None:
    """The entry's new state after ``result``, or None when the result is stale (stale
    recovery re-dispatched the entry since)."""
    attempt = result.attempt
    if entry["attempts"] != attempt.number or entry["state"] != "dispatched":
        return None
    source, _ = await job_sources.get(conn, attempt.job_id)
    retry_in: float | None = None
    if result.outcome in ("ok", "not_modified"):
        # Closed now if the parse result overtook this fetch result, else awaiting parse.
        state = "done" if entry["parsed"] else "fetched"
    else:
        retry_after = capped_wait(result.retry_after, source.pacing.max_retry_after)
        retry_in = retry_delay(
            result.outcome, entry["attempts"], source.retry, retry_after=retry_after
        )
        if retry_in is None:
            state = "failed" if result.outcome in _RETRYABLE else "done"
        else:
            state = "waiting"
    return store.results.EntryFetched(result, state, retry_in)


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


async def _pace_domains(
    conn: Conn, results: list[tuple[str, FetchResult]], job_sources: JobSources
) -> None:
    """Free the results' in-flight slots and set when each domain may go next: as if the
    results came one by one, in order (the back-off factor moves with each; the domain waits
    for the longest of their delays). ``Retry-After`` and ``Crawl-delay`` are the server's,
    capped by the result's source."""
    rows = await store.results.lock_domains_pace(conn, sorted({d for d, _ in results}))
    paces: dict[str, store.results.DomainPace] = {}
    for domain, result in results:
        row = rows.get(domain)
        if row is None:
            continue
        pace = paces.get(domain) or store.results.DomainPace(
            domain, 0, row["backoff"], row["crawl_delay"], 0.0
        )
        source, _ = await job_sources.get(conn, result.attempt.job_id)
        cap = source.pacing.max_retry_after
        retry_after = capped_wait(result.retry_after, cap)
        crawl_delay = capped_wait(result.crawl_delay, cap)
        backoff = pace.backoff
        if (
            result.outcome in _SLOWDOWN
            or (result.status in (429, 503))
            or (result.elapsed_ms > SLOW_RESPONSE_MS)
        ):
            backoff = min(_MAX_BACKOFF, backoff * 2)
        elif result.outcome in ("ok", "not_modified"):
            backoff = max(1.0, backoff * 0.9)
        crawl_delay = crawl_delay if crawl_delay is not None else pace.crawl_delay
        delay = random.uniform(row["min_delay"], row["max_delay"]) * backoff
        delay = max(delay, crawl_delay or 0.0, retry_after or 0.0)
        paces[domain] = store.results.DomainPace(
            domain, pace.results + 1, backoff, crawl_delay, max(pace.delay, delay)
        )
    if paces:
        await store.results.pace_domains(conn, list(paces.values()))


async def apply_parse_result(
    conn: Conn,
    result: ParseResult,
    job_sources: JobSources,
    seen: SeenLinks | None = None,
    robots: RobotsAtAdmission | None = None,
) -> tuple[Applied | None, int]:
    """One parse result (see ``apply_parse_results``): (applied, links admitted)."""
    return (await apply_parse_results(conn, [result], job_sources, seen, robots=robots))[0]


async def apply_parse_results(
    conn: Conn,
    results: list[ParseResult],
    job_sources: JobSources,
    seen: SeenLinks | None = None,
    traceparents: list[str | None] | None = None,
    robots: RobotsAtAdmission | None = None,
) -> list[tuple[Applied | None, int]]:
    """Admit each result's discovered links and close its entry, or, when the fetch result is
    not in yet, mark it parsed so that the fetch result closes it; one transaction for the
    batch. Returns (applied, links admitted) per result, in the order given (None: a
    redelivery or a superseded attempt). A result the scheduler does not back raises
    ``Poison`` for the whole batch.

    ``seen``: the links this replica knows are in the job already skip the admission query;
    the links sent to it are remembered once the transaction has committed (not when it is
    nested in a caller's transaction, which may still roll back). ``traceparents``: the
    trace each result's new entries continue (the current one by default). ``robots``: links
    a known robots.txt disallows are admitted settled, never dispatched (robots.py).
    """
    views: dict[int, JobLinks] = {}
    async with conn.transaction():
        entries = await store.results.lock_entries_for_parse(
            conn, sorted({r.attempt.entry_id for r in results})
        )
        for r in results:
            check_claim(entries.get(r.attempt.entry_id), r.attempt)
        done: set[int] = set()  # entries this batch has applied a result to
        changes: list[store.results.EntryParsed] = []
        out: list[tuple[Applied | None, int]] = []
        for i, r in enumerate(results):
            entry = entries[r.attempt.entry_id]
            if entry["attempts"] != r.attempt.number:
                out.append((None, 0))  # superseded by a later attempt: history
                continue
            if (
                entry["parsed"]
                or entry["state"] not in ("dispatched", "fetched")
                or entry["id"] in done
            ):
                out.append((None, 0))  # a redelivery: already applied
                continue
            done.add(entry["id"])
            links = None
            if seen is not None:
                links = views.setdefault(r.attempt.job_id, seen.job(r.attempt.job_id))
            traceparent = traceparents[i] if traceparents is not None else None
            change, admitted = await _parse_result(
                conn, entry, r, job_sources, links, traceparent, robots
            )
            changes.append(change)
            terminal = change.closes or change.failed
            state = "failed" if change.failed else None
            out.append((Applied(r.attempt.job_id, terminal=terminal, state=state), admitted))
        if changes:
            await store.results.set_entries_parsed(conn, changes)
    if not conn.is_in_transaction():
        for view in views.values():
            view.commit()
    return out


async def _parse_result(
    conn: Conn,
    entry: asyncpg.Record,
    result: ParseResult,
    job_sources: JobSources,
    seen: JobLinks | None,
    traceparent: str | None,
    robots: RobotsAtAdmission | None = None,
) -> tuple[store.results.EntryParsed, int]:
    """Admit one result's links; the entry's change, and how many links were admitted."""
    attempt = result.attempt
    if result.failed:
        # The parser could not publish the page's result (docs/architecture.md "Message
        # fate"): nothing to admit, and the entry fails with the reason, whatever comes next.
        return store.results.EntryParsed(
            attempt.entry_id, products=0, error=result.error, closes=True, failed=True
        ), 0
    admitted = 0
    if entry["job_status"] == "running" and (result.links or result.sightings()):
        source, allowed = await job_sources.get(conn, attempt.job_id)
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
            for link in _unknown_links(result.links, seen)
        ]
        images = [p.image for p in result.sightings() if p.image]
        candidates += await image_candidates(
            conn, source, images, attempt.depth + 1, referrer=attempt.url
        )
        admitted = await admission.admit(
            conn,
            attempt.job_id,
            candidates,
            boost=boost,
            seen=seen,
            traceparent=traceparent,
            robots=robots,
        )
    return store.results.EntryParsed(
        attempt.entry_id,
        # An API page lists many; the refresher waits for them all. An unsure sighting is
        # not applied (Product.confident), so it is not counted either.
        products=sum(p.confident for p in result.sightings()),
        error=result.error,
        closes=entry["state"] == "fetched",
    ), admitted


def _unknown_links(links: list[Link], seen: JobLinks | None) -> list[Link]:
    """The links not known to be in the job: most of a page's links are (navigation, facets,
    related products), and skipping them here saves a ``Candidate`` each."""
    if seen is None:
        return links
    unknown = []
    for link in links:
        canon = canonicalize(link.url)
        if canon is not None and not seen.known((canon, request_key(link.request))):
            unknown.append(link)
    return unknown
