"""Verify before alerting, against real Postgres: a candidate change is held (no event, the
row keeps its verified state) until a verify job's re-check confirms it (one event, the
candidate's), cancels it or says nothing (unknown); a delisting waits for its page to come back
gone; redeliveries confirm nothing twice."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path

import msgspec

from schemas.messages import Product
from services.refresher import store, verification
from services.refresher.misses import count_misses
from services.refresher.products import apply_results
from services.scheduler.catalog import save_source
from shared.names import Names
from shared.provision import provision
from shared.sources import source_from_dict
from tests.integration.test_refresher_batch import result
from tests.support.stack import Stack

SOURCE = {"name": "s", "seeds": ["https://s/"]}
OFF = "https://elsewhere.example/p/X"  # not among the source's domains


async def _jobs(conn, *jobs: tuple[int, str], definition: dict | None = None) -> None:
    """(id, kind) jobs of source ``s``, completed, created an hour ago (misses count for
    products first seen before a job)."""
    text = definition or SOURCE  # the pool's codec encodes JSON
    await conn.execute(
        "INSERT INTO sources (name, definition) VALUES ('s', $1) ON CONFLICT DO NOTHING", text
    )
    for job_id, kind in jobs:
        await conn.execute(
            "INSERT INTO jobs (id, source, kind, status, definition, partial) "
            "VALUES ($1, 's', $2, 'completed', $3, $4)",
            job_id,
            kind,
            text,
            kind == "verify",
        )


async def _row(conn, key: str = "A") -> tuple:
    r = await conn.fetchrow(
        "SELECT price, availability, consecutive_misses, delisted_at IS NOT NULL AS delisted "
        "FROM products WHERE key = $1",
        key,
    )
    return tuple(r)


async def _candidates(conn) -> list[tuple]:
    rows = await conn.fetch(
        "SELECT key, job_id, kind, verification, verify_job FROM product_events "
        "WHERE verification IS NOT NULL ORDER BY id"
    )
    return [tuple(r) for r in rows]


async def test_a_transient_sold_out_is_held_then_cancelled(pool) -> None:
    policies = verification.Policies()
    async with pool.acquire() as conn:
        await _jobs(conn, (1, "discovery"), (2, "refresh"), (3, "verify"))
        await apply_results(conn, [result("1.1", 1)], policies=policies)
        held = await apply_results(
            conn, [result("2.1", 2, availability="out_of_stock")], policies=policies
        )
        # No event, no snapshot; the row keeps its verified stock; one re-check asked for.
        assert held.events == () and held.snapshots == 0 and held.candidates == 1
        assert await _row(conn) == (Decimal("10.00"), "in_stock", 0, False)
        assert [(r.source, r.urls) for r in held.rechecks] == [("s", ("https://s/p/A",))]
        trigger = held.rechecks[0].trigger_id
        assert trigger == verification.trigger_id("s", 2, "2.1")
        await store.link_verify_job(conn, trigger, 3)
        # The re-check sees it in stock: no change against the held row, no event.
        checked = await apply_results(conn, [result("3.1", 3)], policies=policies)
        assert checked.events == () and checked.confirmed == 0
        async with conn.transaction():
            done = await verification.resolve(conn, 3, "s")
        assert (done.confirmed, done.cancelled, done.unknown) == (0, 1, 0)
        assert await _candidates(conn) == [("A", 2, "out_of_stock", "cancelled", 3)]
        # `trawl changes` shows the emitted events; the cancelled candidate on request.
        listed = await store.list_events(conn, store.ChangeFilter(source="s"))
        assert [e.kind for e in listed] == ["new"]
        cancelled = store.ChangeFilter(source="s", verification=["cancelled"])
        assert [e.kind for e in await store.list_events(conn, cancelled)] == ["out_of_stock"]
        assert await store.verification_counts(conn, store.ChangeFilter(source="s")) == {
            "cancelled": 1
        }
        async with conn.transaction():  # a second completion settles nothing
            assert await verification.resolve(conn, 3, "s") == verification.Resolution()


async def test_a_real_sold_out_is_confirmed_once(pool) -> None:
    policies = verification.Policies()
    async with pool.acquire() as conn:
        await _jobs(conn, (1, "discovery"), (2, "refresh"), (3, "verify"), (4, "refresh"))
        await apply_results(conn, [result("1.1", 1)], policies=policies)
        # Sold out, and 10 % cheaper: the price change (no candidate by itself) waits with it.
        sold_out = {"availability": "out_of_stock", "price": "9.00"}
        held = await apply_results(conn, [result("2.1", 2, **sold_out)], policies=policies)
        assert held.candidates == 2 and held.events == ()
        await store.link_verify_job(conn, held.rechecks[0].trigger_id, 3)
        # A second crawl sees it too before the re-check: still one pending candidate each.
        again = await apply_results(conn, [result("4.1", 4, **sold_out)], policies=policies)
        assert again.candidates == 0 and again.events == ()
        recheck = result("3.1", 3, **sold_out)
        checked = await apply_results(conn, [recheck], policies=policies)
        # The candidates are the events: job 2's, verified by job 3.
        assert [(e.kind, e.job_id, e.verified_by) for e in checked.events] == [
            ("price_changed", 2, 3),
            ("out_of_stock", 2, 3),
        ]
        assert checked.confirmed == 2
        assert await _row(conn) == (Decimal("9.00"), "out_of_stock", 0, False)
        assert (await apply_results(conn, [recheck], policies=policies)).events == ()
        async with conn.transaction():
            assert await verification.resolve(conn, 3, "s") == verification.Resolution()
        listed = await store.list_events(conn, store.ChangeFilter(source="s"))
        assert [(e.kind, e.verified_by) for e in listed] == [
            ("new", None),
            ("price_changed", 3),
            ("out_of_stock", 3),
        ]


async def test_a_recheck_that_says_nothing_is_unknown_and_the_change_comes_again(pool) -> None:
    policies = verification.Policies()
    async with pool.acquire() as conn:
        await _jobs(conn, (1, "discovery"), (2, "refresh"), (3, "verify"), (4, "refresh"))
        await apply_results(conn, [result("1.1", 1)], policies=policies)
        held = await apply_results(
            conn, [result("2.1", 2, availability="out_of_stock")], policies=policies
        )
        await store.link_verify_job(conn, held.rechecks[0].trigger_id, 3)
        async with conn.transaction():  # the verify job's page failed: no sighting
            done = await verification.resolve(conn, 3, "s")
        assert (done.confirmed, done.cancelled, done.unknown) == (0, 0, 1)
        assert await _row(conn) == (Decimal("10.00"), "in_stock", 0, False)
        # Unknown is not a change: the next crawl that sees it sold out asks again.
        later = await apply_results(
            conn, [result("4.1", 4, availability="out_of_stock")], policies=policies
        )
        assert later.candidates == 1 and later.events == ()


async def test_only_a_large_price_change_is_held(pool) -> None:
    policies = verification.Policies()
    async with pool.acquire() as conn:
        await _jobs(conn, (1, "discovery"), (2, "refresh"))
        first = [result("1.1", 1), result("2.1", 1, key="B")]
        await apply_results(conn, first, policies=policies)
        second = [result("3.1", 2, price="5.00"), result("4.1", 2, key="B", price="9.00")]
        done = await apply_results(conn, second, policies=policies)
        assert [(e.key, e.kind, e.percent) for e in done.events] == [("B", "price_changed", -10.0)]
        assert done.candidates == 1 and await _candidates(conn) == [
            ("A", 2, "price_changed", "pending", None)
        ]
        assert (await _row(conn))[0] == Decimal("10.00")


async def test_verification_off_emits_at_once(pool) -> None:
    policies = verification.Policies()
    async with pool.acquire() as conn:
        await _jobs(conn, (1, "discovery"), (2, "refresh"), definition={**SOURCE, "verify": False})
        await apply_results(conn, [result("1.1", 1)], policies=policies)
        done = await apply_results(
            conn, [result("2.1", 2, availability="out_of_stock")], policies=policies
        )
        assert [e.kind for e in done.events] == ["out_of_stock"] and done.candidates == 0


async def _verify_page(conn, job_id: int, url: str, state: str, outcome: str | None) -> None:
    await conn.execute(
        "INSERT INTO entries (job_id, url, domain, kind, priority, rank, state, last_outcome, "
        "attempts) VALUES ($1, $2, 's', 'product', 40, 40, $3, $4, 1)",
        job_id,
        url,
        state,
        outcome,
    )


async def test_a_delisting_waits_for_its_page_to_come_back_gone(pool) -> None:
    source = source_from_dict({**SOURCE, "refresh": {"miss_threshold": 1}})
    policies = verification.Policies()
    async with pool.acquire() as conn:
        await _jobs(conn, (1, "discovery"), (2, "refresh"), (3, "verify"), (4, "verify"))
        await apply_results(conn, [result("1.1", 1), result("2.1", 1, key="B")], policies=policies)
        await conn.execute("UPDATE products SET first_seen_at = now() - interval '1 day'")
        job = await store.job(conn, 2)
        assert job is not None
        async with conn.transaction():  # job 2 saw neither: both at the threshold
            report = await count_misses(conn, job, source)
        assert (report.delisted, report.candidates, report.events) == (0, 2, ())
        assert await _row(conn) == (Decimal("10.00"), "in_stock", 1, False)  # not delisted yet
        [recheck] = report.rechecks
        assert recheck.urls == ("https://s/p/A", "https://s/p/B")
        await store.link_verify_job(conn, recheck.trigger_id, 3)
        # The re-check: A's page is gone (404), B's fetch failed.
        await _verify_page(conn, 3, "https://s/p/A", "done", "gone")
        await _verify_page(conn, 3, "https://s/p/B", "failed", "blocked")
        async with conn.transaction():
            done = await verification.resolve(conn, 3, "s")
        assert (done.confirmed, done.cancelled, done.unknown) == (1, 0, 1)
        assert [(e.key, e.kind, e.job_id, e.verified_by) for e in done.events] == [
            ("A", "delisted", 2, 3)
        ]
        assert await _row(conn, "A") == (Decimal("10.00"), "out_of_stock", 1, True)
        assert await _row(conn, "B") == (Decimal("10.00"), "in_stock", 1, False)  # unknown


async def test_a_replay_keeps_the_verified_state(pool) -> None:
    policies = verification.Policies()
    async with pool.acquire() as conn:
        await _jobs(conn, (1, "discovery"), (2, "refresh"))
        await apply_results(conn, [result("1.1", 1)], policies=policies)
        sold_out = result("r-2", 2, availability="out_of_stock")
        done = await apply_results(conn, [sold_out], replay=True, policies=policies)
        assert (done.events, done.candidates, done.snapshots) == ((), 0, 0)
        assert await _row(conn) == (Decimal("10.00"), "in_stock", 0, False)
        assert await _candidates(conn) == []


async def test_a_recheck_nobody_answered_is_asked_again_as_the_same_job(
    env, settings, pool, nc, tmp_path: Path
) -> None:
    """The refresher asks for its verify job after the commit; with no scheduler up the
    candidates stay unlinked, the sweep finds them and asks again with the same trigger id, and
    the job the scheduler made of the queued copy is the one it answers with."""
    names = Names(env["TRAWL_NAMESPACE"])
    await provision(nc.jetstream(), names)
    policies = verification.Policies()
    async with pool.acquire() as conn:
        await save_source(conn, source_from_dict(SOURCE))
        await _jobs(conn, (1001, "discovery"), (1002, "refresh"))
        await apply_results(conn, [result("1.1", 1001)], policies=policies)
        sold_out = result("2.1", 1002, availability="out_of_stock")
        held = await apply_results(conn, [sold_out], policies=policies)
        await verification.request(nc, names, conn, held.rechecks)  # nobody answers
        assert [c[4] for c in await _candidates(conn)] == [None]
        assert await store.unlinked_rechecks(conn, 0, 10) == list(held.rechecks)
    scale = "fetcher=0,parser=0,refresher=0"
    async with Stack(env, tmp_path / "logs", scale=scale), pool.acquire() as conn:
        unlinked = await store.unlinked_rechecks(conn, 0, 10)
        await verification.request(nc, names, conn, unlinked)
        [(_, _, _, state, verify_job)] = await _candidates(conn)
        assert state == "pending" and verify_job is not None
        assert await store.unlinked_rechecks(conn, 0, 10) == []
        jobs = await conn.fetch("SELECT id, partial FROM jobs WHERE kind = 'verify'")
        assert [tuple(j) for j in jobs] == [(verify_job, True)]
        # A page the scheduler refuses to fetch for the source (off its domains, as a forged
        # or stale result could claim): its candidate cannot be verified, so it is unknown at
        # once, never asked again.
        elsewhere = msgspec.structs.replace(
            result("3.1", 1001, key="X"),
            product=Product(key="X", price="5", availability="in_stock", url=OFF),
        )
        shown = result("4.1", 1002, key="X")
        sold_out_x = msgspec.structs.replace(
            shown,
            attempt=msgspec.structs.replace(shown.attempt, url=OFF),
            product=Product(key="X", price="5", availability="out_of_stock", url=OFF),
        )
        await apply_results(conn, [elsewhere], policies=policies)
        held = await apply_results(conn, [sold_out_x], policies=policies)
        assert await verification.request(nc, names, conn, held.rechecks) == 1
        states = {c[0]: c[3] for c in await _candidates(conn)}
        assert states == {"A": "pending", "X": "unknown"}
        assert await store.unlinked_rechecks(conn, 0, 10) == []


async def test_the_recheck_fetches_the_page_that_showed_the_change(pool) -> None:
    """Not the product's own URL, which may be a canonical on a host the source may not fetch."""
    policies = verification.Policies()
    canonical = "https://www.elsewhere.example/p/A"
    async with pool.acquire() as conn:
        await _jobs(conn, (1, "discovery"), (2, "refresh"))
        await apply_results(conn, [result("1.1", 1)], policies=policies)
        shown = result("2.1", 2)
        sold_out = msgspec.structs.replace(
            shown,
            product=Product(key="A", price="10.00", availability="out_of_stock", url=canonical),
        )
        held = await apply_results(conn, [sold_out], policies=policies)
        assert [r.urls for r in held.rechecks] == [(shown.attempt.url,)]
