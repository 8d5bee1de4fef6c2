"""The scheduler's entry state machine, driven directly against a per-test database.

An entry goes pending → dispatched → fetched → done, or waiting (a retry is due later) →
failed (retries ran out); a parse result may overtake its fetch result, and a result of an
attempt that stale recovery has superseded must change nothing (docs/architecture.md,
"Frontier"). The job and its work come from the scheduler's own functions (``save_source``,
``start_job``, the ``Dispatcher``); every result is built from the work the dispatcher really
published, and applied the way the scheduler's handlers apply it.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import asyncpg
import msgspec
import pytest
from nats.js import JetStreamContext

from schemas.messages import FetchResult, FetchWork, Link, ParseResult, Trigger
from schemas.outcomes import Outcome
from services.scheduler import store
from services.scheduler.catalog import save_source
from services.scheduler.dispatch import Dispatcher
from services.scheduler.jobs import JobSources, try_complete
from services.scheduler.results import (
    Applied,
    apply_fetch_result,
    apply_fetch_results,
    apply_parse_result,
    apply_parse_results,
)
from services.scheduler.seen import SeenLinks
from services.scheduler.triggers import start_job
from shared import names as n
from shared.db import connect
from shared.errors import Poison
from shared.names import Names
from shared.provision import provision
from shared.sources import source_from_dict
from tests.support.stack import eventually

# -- raw SQL, kept in one place: what the assertions read, and the scheduler's stale recovery ---


@dataclass(frozen=True)
class Snapshot:
    """Everything a result may change: the job's entries, the attempt history, the job's status
    and the domain's in-flight count."""

    entries: dict[str, dict[str, Any]]  # url → the entry's state columns
    attempts: list[str]  # attempt ids recorded as history
    job_status: str
    in_flight: int


async def read_snapshot(conn: asyncpg.Connection, job_id: int) -> Snapshot:
    rows = await conn.fetch(
        """SELECT url, state, attempts, parsed, last_outcome, last_status, updated_at,
                  extract(epoch FROM not_before - updated_at)::float8 AS retry_in
           FROM entries WHERE job_id = $1 ORDER BY id""",
        job_id,
    )
    attempts = await conn.fetch(
        "SELECT attempt_id FROM attempts WHERE job_id = $1 ORDER BY attempt_id", job_id
    )
    return Snapshot(
        entries={r["url"]: {k: v for k, v in r.items() if k != "url"} for r in rows},
        attempts=[a["attempt_id"] for a in attempts],
        job_status=await conn.fetchval("SELECT status FROM jobs WHERE id = $1", job_id),
        in_flight=await conn.fetchval("SELECT coalesce(sum(in_flight), 0) FROM domains"),
    )


async def recover_stale(conn: asyncpg.Connection) -> None:
    """The scheduler's stale recovery with a visibility timeout of zero: every entry
    dispatched or fetched without its results goes back to pending (its work is "lost")."""
    await store.frontier.recover_stale(conn, 0.0)


# -- the crawl under test --------------------------------------------------------------------

BASE = "http://127.0.0.2:9"
SEED = f"{BASE}/c/shoes"
P1, P2, NEXT = f"{BASE}/p/1", f"{BASE}/p/2", f"{BASE}/c/shoes?page=2"
# Three new links, plus a repeat and a link back to the page itself: admitted once, not again.
LINKS = [
    Link(url=P1, kind="product"),
    Link(url=P2, kind="product"),
    Link(url=NEXT, kind="pagination"),
    Link(url=P1, kind="product"),
    Link(url=SEED, kind="page"),
]
SOURCE = {
    "name": "states",
    "seeds": [SEED],
    "allow_private": True,
    "pacing": {"min_delay": 0, "max_delay": 0, "max_in_flight": 4},
    # Short, exact back-off (no jitter) so a retry falls due within the test.
    "retry": {"max_retries": 2, "base_delay": 0.2, "factor": 2, "jitter": 0},
}


class Crawl:
    """One job of SOURCE, and the scheduler's handling of its results, step by step."""

    def __init__(
        self, pool: asyncpg.Pool, conn: asyncpg.Connection, js: JetStreamContext, names: Names
    ) -> None:
        self.conn = conn  # the scheduler's handlers apply results on one connection each
        self.js = js
        self.names = names
        self.job_sources = JobSources()
        self.dispatcher = Dispatcher(pool, js, names, self.job_sources)
        self.job_id = 0
        self.sub: Any = None

    async def start(self) -> None:
        await save_source(self.conn, source_from_dict(SOURCE))
        reply, created = await start_job(self.conn, Trigger(source="states"), "test-trigger")
        assert created and reply.job_id is not None
        self.job_id = reply.job_id
        self.sub = await self.js.pull_subscribe(
            self.names.fetch,
            durable=self.names.consumer("fetcher", n.FETCH),
            stream=self.names.stream(n.FETCH),
        )

    async def dispatch(self, count: int = 1) -> dict[str, FetchWork]:
        """One dispatch cycle, which must release ``count`` entries: their work, by URL."""
        assert await self.dispatcher.cycle() == count
        return await self._published(count)

    async def dispatch_when_due(self) -> FetchWork:
        """The next dispatch cycle that releases something (a retry falling due)."""

        async def released() -> bool:
            return await self.dispatcher.cycle() == 1

        await eventually(released, timeout=20, interval=0.05, what="a due retry to dispatch")
        (work,) = (await self._published(1)).values()
        return work

    async def _published(self, count: int) -> dict[str, FetchWork]:
        works: dict[str, FetchWork] = {}
        while len(works) < count:
            for msg in await self.sub.fetch(count - len(works), timeout=10):
                work = msgspec.json.decode(msg.data, type=FetchWork)
                works[work.attempt.url] = work
                await msg.ack()
        return works

    async def fetched(
        self, work: FetchWork, outcome: Outcome = "ok", **fields: Any
    ) -> Applied | None:
        return await apply_fetch_result(
            self.conn, self.fetch_result(work, outcome, **fields), self.job_sources
        )

    def fetch_result(self, work: FetchWork, outcome: Outcome = "ok", **fields: Any) -> FetchResult:
        ok = outcome in ("ok", "not_modified")
        return FetchResult(
            attempt=work.attempt,
            outcome=outcome,
            status=fields.pop("status", 200 if ok else None),
            started_at=time.time(),
            elapsed_ms=5.0,
            payload_ref=f"js:{work.attempt.entry_id:064x}" if ok else None,
            content_type="text/html" if ok else None,
            **fields,
        )

    async def parsed(
        self, work: FetchWork, links: list[Link] | None = None
    ) -> tuple[Applied | None, int]:
        result = ParseResult(attempt=work.attempt, links=links or [])
        return await apply_parse_result(self.conn, result, self.job_sources)

    async def complete(self) -> bool:
        """What the scheduler does after a result that closed an entry."""
        return await try_complete(self.conn, self.job_id)

    async def snapshot(self) -> Snapshot:
        return await read_snapshot(self.conn, self.job_id)

    async def recover_stale(self) -> None:
        await recover_stale(self.conn)

    def states(self, snap: Snapshot) -> dict[str, str]:
        return {url: e["state"] for url, e in snap.entries.items()}


@pytest.fixture
async def crawl(
    pool: asyncpg.Pool, database_url: str, nc: Any, namespace: str
) -> AsyncIterator[Crawl]:
    js = nc.jetstream()
    names = Names(namespace)
    await provision(js, names)
    conn = await connect(database_url)  # set up like the pool's connections
    try:
        c = Crawl(pool, conn, js, names)
        await c.start()
        yield c
        await c.sub.unsubscribe()
    finally:
        await conn.close()


ORDERS = pytest.mark.parametrize("parse_first", [False, True], ids=["fetch-parse", "parse-fetch"])


# -- the tests -------------------------------------------------------------------------------


@ORDERS
async def test_both_arrival_orders_end_done_with_links_admitted_once(
    crawl: Crawl, parse_first: bool
) -> None:
    work = (await crawl.dispatch())[SEED]
    assert (work.attempt.id, work.attempt.number) == (f"{work.attempt.entry_id}.1", 1)
    if parse_first:
        # The parse result overtakes the fetch result: links admitted, the entry stays open
        # (marked parsed) until the fetch result closes it.
        applied, admitted = await crawl.parsed(work, LINKS)
        assert applied == Applied(crawl.job_id, terminal=False)
        entry = (await crawl.snapshot()).entries[SEED]
        assert (entry["state"], entry["parsed"]) == ("dispatched", True)
        assert await crawl.fetched(work) == Applied(crawl.job_id, terminal=True, state="done")
    else:
        assert await crawl.fetched(work) == Applied(crawl.job_id, terminal=False, state="fetched")
        entry = (await crawl.snapshot()).entries[SEED]
        assert (entry["state"], entry["parsed"]) == ("fetched", False)
        applied, admitted = await crawl.parsed(work, LINKS)
        assert applied == Applied(crawl.job_id, terminal=True)
    assert admitted == 3
    snap = await crawl.snapshot()
    assert crawl.states(snap) == {SEED: "done", P1: "pending", P2: "pending", NEXT: "pending"}
    seed = snap.entries[SEED]
    assert (seed["parsed"], seed["last_outcome"], seed["last_status"]) == (True, "ok", 200)
    assert snap.attempts == [work.attempt.id]
    assert snap.in_flight == 0  # the result freed the domain's slot, once
    assert snap.job_status == "running"  # the admitted links are open work


@ORDERS
async def test_a_redelivered_result_changes_nothing(crawl: Crawl, parse_first: bool) -> None:
    work = (await crawl.dispatch())[SEED]

    async def fetch_result() -> Applied | None:
        return await crawl.fetched(work)

    async def parse_result() -> Applied | None:
        applied, _ = await crawl.parsed(work, LINKS)
        return applied

    first, second = (parse_result, fetch_result) if parse_first else (fetch_result, parse_result)
    assert await first() is not None
    half = await crawl.snapshot()
    assert await first() is None  # redelivered before the other result arrived
    assert await crawl.snapshot() == half

    assert await second() is not None
    done = await crawl.snapshot()
    assert crawl.states(done)[SEED] == "done" and len(done.entries) == 4
    # Both redelivered after both were applied: nothing, and no link admitted again.
    assert await crawl.fetched(work) is None
    assert await crawl.parsed(work, LINKS) == (None, 0)
    assert await crawl.snapshot() == done


async def test_results_of_a_superseded_attempt_change_nothing(crawl: Crawl) -> None:
    first = (await crawl.dispatch())[SEED]
    # Attempt 1 is fetched, but its parse result is late: stale recovery hands the entry back
    # and attempt 2 goes out.
    assert await crawl.fetched(first) == Applied(crawl.job_id, terminal=False, state="fetched")
    await crawl.recover_stale()
    second = (await crawl.dispatch())[SEED]
    assert (second.attempt.id, second.attempt.number) == (f"{first.attempt.entry_id}.2", 2)
    before = await crawl.snapshot()
    entry = before.entries[SEED]
    assert (entry["state"], entry["attempts"], entry["parsed"]) == ("dispatched", 2, False)

    # The late parse result of attempt 1 admits nothing and leaves the entry alone.
    assert await crawl.parsed(first, LINKS) == (None, 0)
    assert await crawl.snapshot() == before

    # Attempt 2 is lost in flight too; its fetch result arrives after attempt 3 went out: it is
    # history (an attempt row), and the entry is untouched.
    await crawl.recover_stale()
    third = (await crawl.dispatch())[SEED]
    assert third.attempt.number == 3
    before = await crawl.snapshot()
    assert await crawl.fetched(second) == Applied(crawl.job_id, terminal=False)
    after = await crawl.snapshot()
    assert after.entries == before.entries
    assert after.attempts == [first.attempt.id, second.attempt.id]

    # The current attempt's results close the entry as usual.
    assert await crawl.fetched(third) == Applied(crawl.job_id, terminal=False, state="fetched")
    assert await crawl.parsed(third, LINKS) == (Applied(crawl.job_id, terminal=True), 3)
    snap = await crawl.snapshot()
    assert crawl.states(snap) == {SEED: "done", P1: "pending", P2: "pending", NEXT: "pending"}
    assert snap.entries[SEED]["attempts"] == 3


async def test_a_retryable_outcome_waits_then_fails_when_retries_run_out(crawl: Crawl) -> None:
    work = (await crawl.dispatch())[SEED]
    assert await crawl.fetched(work, "timeout") == Applied(
        crawl.job_id, terminal=False, state="waiting"
    )
    entry = (await crawl.snapshot()).entries[SEED]
    assert (entry["state"], entry["last_outcome"]) == ("waiting", "timeout")
    assert entry["retry_in"] == pytest.approx(0.2)  # base_delay
    assert not await crawl.complete()  # a waiting entry keeps the job open

    # Retry 1 falls due and fails again; a larger Retry-After wins over the back-off (0.4 s).
    work = await crawl.dispatch_when_due()
    assert work.attempt.number == 2
    assert await crawl.fetched(work, "server_error", status=503, retry_after=0.6) == Applied(
        crawl.job_id, terminal=False, state="waiting"
    )
    entry = (await crawl.snapshot()).entries[SEED]
    assert (entry["state"], entry["last_outcome"], entry["last_status"]) == (
        "waiting",
        "server_error",
        503,
    )
    assert entry["retry_in"] == pytest.approx(0.6)

    # Retry 2 fails too: max_retries (2) spent, the entry has failed for good.
    work = await crawl.dispatch_when_due()
    assert work.attempt.number == 3
    assert await crawl.fetched(work, "network_error") == Applied(
        crawl.job_id, terminal=True, state="failed"
    )
    snap = await crawl.snapshot()
    entry = snap.entries[SEED]
    assert (entry["state"], entry["last_outcome"], entry["retry_in"]) == (
        "failed",
        "network_error",
        None,
    )
    assert len(snap.attempts) == 3
    assert await crawl.complete()  # failed is final


@pytest.mark.parametrize(
    ("outcome", "status"),
    [("gone", 404), ("rejected", 415), ("robots_disallowed", None), ("unsafe_url", None)],
)
async def test_a_final_outcome_without_a_page_is_done_at_once(
    crawl: Crawl, outcome: Outcome, status: int | None
) -> None:
    work = (await crawl.dispatch())[SEED]
    applied = await crawl.fetched(work, outcome, status=status)
    assert applied == Applied(crawl.job_id, terminal=True, state="done")
    snap = await crawl.snapshot()
    entry = snap.entries[SEED]
    assert (entry["state"], entry["last_outcome"], entry["parsed"]) == ("done", outcome, False)
    assert list(snap.entries) == [SEED]
    assert await crawl.complete()  # no parse result is coming for such a page


@ORDERS
async def test_the_job_completes_only_after_both_results_of_its_last_page(
    crawl: Crawl, parse_first: bool
) -> None:
    work = (await crawl.dispatch())[SEED]
    last_links = [Link(url=SEED, kind="page")]  # the last page links only to itself
    if parse_first:
        assert await crawl.parsed(work, last_links) == (Applied(crawl.job_id, terminal=False), 0)
    else:
        assert await crawl.fetched(work) == Applied(crawl.job_id, terminal=False, state="fetched")
    assert not await crawl.complete()
    assert (await crawl.snapshot()).job_status == "running"

    if parse_first:
        assert await crawl.fetched(work) == Applied(crawl.job_id, terminal=True, state="done")
    else:
        assert await crawl.parsed(work, last_links) == (Applied(crawl.job_id, terminal=True), 0)
    assert await crawl.complete()
    assert not await crawl.complete()  # completed once
    snap = await crawl.snapshot()
    assert snap.job_status == "completed" and crawl.states(snap) == {SEED: "done"}


async def test_stale_recovery_fails_an_entry_past_its_retry_budget(crawl: Crawl) -> None:
    # Every attempt is lost in flight (no result ever comes: a reply nobody could publish).
    # max_retries is 2: attempts 1 and 2 go back to pending, attempt 3 is the last.
    for number in (1, 2, 3):
        work = (await crawl.dispatch())[SEED]
        assert work.attempt.number == number
        assert not await crawl.complete()
        await crawl.recover_stale()
    snap = await crawl.snapshot()
    entry = snap.entries[SEED]
    assert (entry["state"], entry["attempts"], entry["last_outcome"]) == ("failed", 3, "lost")
    assert snap.in_flight == 0
    assert await crawl.dispatcher.cycle() == 0  # never re-dispatched
    assert await crawl.complete()


def _forged(work: FetchWork, **changes: Any) -> FetchWork:
    return msgspec.structs.replace(work, attempt=msgspec.structs.replace(work.attempt, **changes))


@pytest.mark.parametrize(
    ("changes", "reason"),
    [
        ({"entry_id": 999_999_999}, "no entry 999999999"),
        ({"job_id": 999_999_999}, "forged result: entry"),
        ({"source": "other-shop"}, "forged result: entry"),
        ({"url": f"{BASE}/p/elsewhere"}, "forged result: entry"),
        ({"number": 2}, "attempt 2 of entry"),
        ({"number": 0}, "attempt 0 of entry"),
    ],
    ids=["unknown-entry", "other-job", "other-source", "other-url", "future-attempt", "zero"],
)
async def test_a_result_that_claims_an_attempt_never_dispatched_is_poison(
    crawl: Crawl, changes: dict[str, Any], reason: str
) -> None:
    work = (await crawl.dispatch())[SEED]
    forged = _forged(work, **changes)
    before = await crawl.snapshot()
    with pytest.raises(Poison, match=reason):
        await crawl.fetched(forged)
    with pytest.raises(Poison, match=reason):
        await crawl.parsed(forged, LINKS)
    assert await crawl.snapshot() == before  # nothing recorded, no link admitted
    # The real attempt's results still apply.
    assert await crawl.fetched(work) == Applied(crawl.job_id, terminal=False, state="fetched")


@ORDERS
async def test_a_parse_result_the_parser_could_not_publish_fails_the_entry(
    crawl: Crawl, parse_first: bool
) -> None:
    work = (await crawl.dispatch())[SEED]
    failed = ParseResult(
        attempt=work.attempt, error="result not publishable: too large", failed=True
    )
    if not parse_first:
        assert await crawl.fetched(work) == Applied(crawl.job_id, terminal=False, state="fetched")
    applied, admitted = await apply_parse_result(crawl.conn, failed, crawl.job_sources)
    assert (applied, admitted) == (Applied(crawl.job_id, terminal=True, state="failed"), 0)
    if parse_first:  # the fetch result, late, is history: the entry stays failed
        assert await crawl.fetched(work) == Applied(crawl.job_id, terminal=False)
    snap = await crawl.snapshot()
    assert crawl.states(snap) == {SEED: "failed"}
    assert snap.in_flight == 0
    assert (
        await crawl.conn.fetchval("SELECT parse_error FROM entries WHERE job_id = $1", crawl.job_id)
        == "result not publishable: too large"
    )
    assert await crawl.complete()


async def test_a_fetch_result_the_fetcher_could_not_publish_fails_the_entry_at_once(
    crawl: Crawl,
) -> None:
    work = (await crawl.dispatch())[SEED]
    applied = await crawl.fetched(work, "unpublishable", error="result not publishable: ...")
    assert applied == Applied(crawl.job_id, terminal=True, state="failed")
    entry = (await crawl.snapshot()).entries[SEED]
    assert (entry["state"], entry["last_outcome"]) == ("failed", "unpublishable")
    assert await crawl.complete()


async def test_a_batch_of_results_applies_as_its_results_would_one_by_one(crawl: Crawl) -> None:
    """The scheduler applies results handled together in one transaction (a group commit): a
    result twice in the batch counts once, links two pages share are admitted once, and each
    result's outcome is what it would have been alone."""
    seed = (await crawl.dispatch())[SEED]
    await crawl.fetched(seed)
    await crawl.parsed(seed, LINKS)
    works = await crawl.dispatch(3)
    p1, p2, nxt = works[P1], works[P2], works[NEXT]
    results = [crawl.fetch_result(w) for w in (p1, p2, nxt)]
    results.append(results[0])  # redelivered within the same batch
    applied = await apply_fetch_results(crawl.conn, results, crawl.job_sources)
    fetched = Applied(crawl.job_id, terminal=False, state="fetched")
    assert applied == [fetched, fetched, fetched, None]
    snap = await crawl.snapshot()
    assert snap.in_flight == 0  # three slots freed, not four
    assert len(snap.attempts) == 4  # the seed's and three
    shared_link = f"{BASE}/p/3"
    parsed = [
        ParseResult(attempt=p1.attempt, links=[Link(url=shared_link, kind="product")]),
        ParseResult(attempt=p2.attempt, links=[Link(url=shared_link, kind="product")]),
        ParseResult(attempt=nxt.attempt, links=[Link(url=P1, kind="product")]),
        ParseResult(attempt=p1.attempt, links=[Link(url=shared_link, kind="product")]),
    ]
    seen = SeenLinks()
    out = await apply_parse_results(crawl.conn, parsed, crawl.job_sources, seen)
    closed = Applied(crawl.job_id, terminal=True)
    assert out == [(closed, 1), (closed, 0), (closed, 0), (None, 0)]
    snap = await crawl.snapshot()
    assert crawl.states(snap) == {
        SEED: "done",
        P1: "done",
        P2: "done",
        NEXT: "done",
        shared_link: "pending",
    }
    assert seen.known(crawl.job_id, (shared_link, ""))  # remembered once committed


async def test_a_batch_with_a_forged_result_changes_nothing(crawl: Crawl) -> None:
    """A result the scheduler does not back fails its whole batch, which rolls back (the
    scheduler then applies the batch's results one by one, so only the culprit fails)."""
    work = (await crawl.dispatch())[SEED]
    forged = _forged(work, number=2)
    before = await crawl.snapshot()
    with pytest.raises(Poison):
        await apply_fetch_results(
            crawl.conn, [crawl.fetch_result(work), crawl.fetch_result(forged)], crawl.job_sources
        )
    with pytest.raises(Poison):
        await apply_parse_results(
            crawl.conn,
            [ParseResult(attempt=work.attempt, links=LINKS), ParseResult(attempt=forged.attempt)],
            crawl.job_sources,
        )
    assert await crawl.snapshot() == before
