"""The refresher's batch apply against real Postgres: idempotency, snapshots on change only,
late results of older jobs, replay mode, the staging tables' life in a session, concurrent
batches, the refresher's view of a parse result."""

from __future__ import annotations

import asyncio
from decimal import Decimal

import asyncpg
import msgspec
import pytest

from schemas.messages import Attempt, Link, ParseResult, Product
from services.refresher.products import ParsedProducts, apply_results
from services.refresher.store import list_products


def _attempt(attempt_id: str, job: int, url: str) -> Attempt:
    """The attempt whose id is ``attempt_id`` when it is "<entry>.<number>", else an attempt
    with an id of its own that embeds ``attempt_id`` (as replay's do)."""
    entry, _, number = attempt_id.partition(".")
    if entry.isdigit() and number.isdigit():
        return Attempt(entry_id=int(entry), number=int(number), job_id=job, source="s", url=url)
    return Attempt(entry_id=1, job_id=job, source="s", url=url, replay=attempt_id)


def result(attempt: str, job: int, key: str = "A", price: str = "10.00", **kw) -> ParseResult:
    product = Product(
        key=key,
        name=kw.pop("name", f"Product {key}"),
        price=price,
        currency="EUR",
        availability=kw.pop("availability", "in_stock"),
        url=f"https://s/p/{key}",
    )
    return ParseResult(attempt=_attempt(attempt, job, f"https://s/p/{key}"), product=product, **kw)


async def _snapshots(conn, key: str = "A") -> list[tuple]:
    rows = await conn.fetch(
        "SELECT job_id, price::text, availability FROM snapshots WHERE key = $1 ORDER BY id", key
    )
    return [tuple(r) for r in rows]


async def _jobs(conn, *ids: int) -> None:
    await conn.execute("INSERT INTO sources (name, definition) VALUES ('s', '{}')")
    for i in ids:
        await conn.execute(
            "INSERT INTO jobs (id, source, status, definition) VALUES ($1, 's', 'completed', '{}')",
            i,
        )


async def test_batch_is_idempotent_and_snapshots_each_change(pool) -> None:
    async with pool.acquire() as conn:
        await _jobs(conn, 1, 2, 3)
        first = await apply_results(
            conn,
            [
                result("1.1", 1),
                result("1.1", 1),  # a redelivery inside the batch
                result("2.1", 1, key="B"),
            ],
        )
        assert (first.results, first.duplicates, first.upserts, first.snapshots) == (2, 1, 2, 2)
        again = await apply_results(conn, [result("1.1", 1), result("2.1", 1, key="B")])
        assert (again.results, again.duplicates, again.snapshots) == (0, 2, 0)
        # Job 2: A changes twice within one batch (two pages), B is unchanged.
        second = await apply_results(
            conn,
            [
                result("3.1", 2, price="9.00"),
                result("4.1", 2, price="8.00", availability="limited"),
                result("5.1", 2, key="B"),
            ],
        )
        assert second.snapshots == 2 and second.upserts == 1
        assert await _snapshots(conn) == [
            (1, "10.00", "in_stock"),
            (2, "9.00", "in_stock"),
            (2, "8.00", "limited"),
        ]
        assert await _snapshots(conn, "B") == [(1, "10.00", "in_stock")]
        # A late result of job 1 must not overwrite what job 2 saw.
        late = await apply_results(conn, [result("6.1", 1, price="10.00")])
        assert late.results == 1 and late.upserts == 0 and late.snapshots == 0
        products = {p.key: p for p in await list_products(conn, "s")}
        assert (products["A"].price, products["A"].availability) == ("8.00", "limited")
        assert products["A"].last_seen_job == 2


async def test_sighting_resets_misses_but_replay_does_not(pool) -> None:
    async with pool.acquire() as conn:
        await _jobs(conn, 1, 2)
        await apply_results(conn, [result("1.1", 1), result("2.1", 1, key="B")])
        await conn.execute(
            "UPDATE products SET consecutive_misses = 3, delisted_at = now(), "
            "availability = 'out_of_stock', name = 'broken'"
        )
        replayed = await apply_results(conn, [result("r-1", 1)], replay=True)
        assert replayed.upserts == 1 and replayed.snapshots == 1  # out_of_stock → in_stock
        row = await conn.fetchrow("SELECT * FROM products WHERE key = 'A'")
        assert row["name"] == "Product A" and row["availability"] == "in_stock"
        assert row["consecutive_misses"] == 3 and row["delisted_at"] is not None
        # A live sighting of B (unchanged fields) still resets its misses at once.
        await apply_results(conn, [result("3.1", 2, key="B")])
        row = await conn.fetchrow("SELECT * FROM products WHERE key = 'B'")
        assert row["consecutive_misses"] == 0 and row["delisted_at"] is None
        assert row["last_seen_job"] == 2


async def test_not_modified_without_product_counts_as_seen(pool) -> None:
    async with pool.acquire() as conn:
        await _jobs(conn, 1, 2)
        await apply_results(conn, [result("1.1", 1)])
        await conn.execute("UPDATE products SET consecutive_misses = 2")
        bare = ParseResult(
            attempt=Attempt(entry_id=2, job_id=2, source="s", url="https://s/p/A"),
            not_modified=True,
        )
        assert (await apply_results(conn, [bare])).results == 1
        row = await conn.fetchrow("SELECT consecutive_misses, last_seen_job FROM products")
        assert tuple(row) == (0, 2)


async def test_price_lists_and_attributes_are_stored_and_their_changes_snapshotted(pool) -> None:
    def sighting(attempt: str, job: int, member: str) -> ParseResult:
        product = Product(
            key="A",
            name="A",
            price="10.00",
            currency="EUR",
            availability="in_stock",
            prices={"member": member},
            attributes={"thc": "20%"},
        )
        return ParseResult(attempt=_attempt(attempt, job, "https://s/p/A"), product=product)

    async with pool.acquire() as conn:
        await _jobs(conn, 1, 2, 3)
        await apply_results(conn, [sighting("1.1", 1, "9.00")])
        await apply_results(conn, [sighting("2.1", 2, "9.00")])  # unchanged: no snapshot
        await apply_results(conn, [sighting("3.1", 3, "8.50")])  # member price changed
        (row,) = await list_products(conn, "s")
        snaps = await conn.fetch("SELECT job_id, prices FROM snapshots ORDER BY id")
    assert row.prices == {"member": "8.50"} and row.attributes == {"thc": "20%"}
    assert [(s["job_id"], s["prices"]) for s in snaps] == [
        (1, {"member": "9.00"}),
        (3, {"member": "8.50"}),
    ]


async def test_an_api_page_records_and_upserts_each_listed_product(pool) -> None:
    page = ParseResult(
        attempt=Attempt(job_id=1, entry_id=1, source="s", url="https://s/api?page=1"),
        products=[Product(key=k, price="1.00", availability="in_stock") for k in "ABC"],
    )
    async with pool.acquire() as conn:
        await _jobs(conn, 1)
        done = await apply_results(conn, [page])
        assert (done.results, done.upserts, done.snapshots) == (1, 3, 3)
        rows = await conn.fetch("SELECT attempt_id, product_key FROM applied_results ORDER BY 1")
        assert [tuple(r) for r in rows] == [("1.1", "A"), ("1.1#1", "B"), ("1.1#2", "C")]
        assert (await apply_results(conn, [page])).duplicates == 1


async def test_a_failed_batch_leaves_the_session_usable(pool) -> None:
    """A batch that fails mid-way (here: Postgres refuses a NUL in text) rolls back whole, and
    the next batch on the same connection, staging tables and all, goes through."""
    async with pool.acquire() as conn:
        await _jobs(conn, 1)
        with pytest.raises(asyncpg.PostgresError):
            await apply_results(conn, [result("1.1", 1), result("2.1", 1, key="B", name="a\x00")])
        assert await conn.fetchval("SELECT count(*) FROM applied_results") == 0
        done = await apply_results(conn, [result("1.1", 1), result("2.1", 1, key="B")])
        assert (done.results, done.upserts, done.snapshots) == (2, 2, 2)
        # A session without the staging tables (as after DISCARD) creates them again.
        await conn.execute("DISCARD TEMP")
        done = await apply_results(conn, [result("3.1", 1, key="C")])
        assert (done.results, done.upserts) == (1, 1)


async def test_concurrent_batches_over_the_same_products_do_not_deadlock(pool) -> None:
    """Two replicas' batches name the same products in opposite orders: rows are locked and
    written in key order, so one waits for the other instead of deadlocking."""
    keys = [f"K{i:03d}" for i in range(200)]
    async with pool.acquire() as conn:
        await _jobs(conn, 1, 2)
        await apply_results(conn, [result(f"0.{k}", 1, key=k) for k in keys])

    async def apply(job: int, order: list[str], rnd: int) -> None:
        async with pool.acquire() as conn:
            await apply_results(
                conn, [result(f"{rnd}.{job}.{k}", job, key=k, price=f"{job}.00") for k in order]
            )

    for rnd in range(3):
        await asyncio.gather(apply(2 + rnd, keys, rnd), apply(3 + rnd, keys[::-1], rnd))
        keys = keys[1:] + keys[:1]
    async with pool.acquire() as conn:
        assert await conn.fetchval("SELECT count(*) FROM products") == len(keys)
        # The newest job's price, whichever batch committed first.
        assert await conn.fetchval("SELECT array_agg(DISTINCT price::text) FROM products") == [
            "5.00"
        ]


async def test_replicas_applying_the_same_redelivered_results_do_not_deadlock(pool) -> None:
    """After an ack timeout two replicas can hold the same results, in opposite orders. A third
    transaction holds the middle attempt id, so both batches are surely inside their inserts at
    once; attempt ids are recorded in one order, so one batch waits for the other instead of
    deadlocking, then finds them all applied."""
    keys = [f"K{i:03d}" for i in range(300)]
    async with pool.acquire() as conn:
        await _jobs(conn, 1)

    async def apply(order: list[str]) -> int:
        async with pool.acquire() as conn:
            done = await apply_results(conn, [result(f"1.{k}", 1, key=k) for k in order])
            return done.results

    async with pool.acquire() as holder, pool.acquire() as watcher:
        tx = holder.transaction()
        await tx.start()
        await holder.execute(
            "INSERT INTO applied_results (attempt_id, job_id, source) VALUES ($1, 1, 's')",
            _attempt("1.K150", 1, "").id,
        )
        both = asyncio.gather(apply(keys), apply(keys[::-1]))
        deadline = asyncio.get_running_loop().time() + 30
        while (
            await watcher.fetchval(
                "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
                "AND datname = current_database()"
            )
            < 2
        ):
            assert asyncio.get_running_loop().time() < deadline, "the batches never both waited"
            await asyncio.sleep(0.01)
        await tx.rollback()
        applied = await both
    assert sorted(applied) == [0, len(keys)]  # one batch applied them all, the other none


async def test_parsed_products_is_the_refreshers_view_of_a_parse_result(pool) -> None:
    """The refresher decodes parse results as ``ParsedProducts``, which skips the links: it
    must stay the same message (every field of the view is a ParseResult field, same type,
    same default) and apply the same way."""
    config, view_config = ParseResult.__struct_config__, ParsedProducts.__struct_config__
    assert (view_config.tag_field, view_config.tag) == (config.tag_field, config.tag)
    full = {f.name: f for f in msgspec.structs.fields(ParseResult)}
    for f in msgspec.structs.fields(ParsedProducts):
        assert (f.type, f.default) == (full[f.name].type, full[f.name].default), f.name
    original = result("1.1", 1, links=[Link(url=f"https://s/p/{i}") for i in range(50)])
    view = msgspec.json.decode(msgspec.json.encode(original), type=ParsedProducts)
    assert view.sightings() == original.sightings() and view.attempt.id == "1.1"
    async with pool.acquire() as conn:
        await _jobs(conn, 1)
        done = await apply_results(conn, [view])
        assert (done.results, done.upserts, done.snapshots) == (1, 1, 1)


async def test_an_unsure_parse_is_neither_seen_nor_missed(pool) -> None:
    """Three states: a product whose page parsed without confidence is unknown. It is not
    applied (its page's word on price or stock is not taken), the job does not wait for it,
    and its misses stay as they were; a product page that parsed without any product says
    nothing either."""
    from services.refresher import store
    from services.refresher.misses import count_misses
    from shared.sources import source_from_dict

    async with pool.acquire() as conn:
        await _jobs(conn, 1)
        first = [result("1.1", 1, key="A"), result("2.1", 1, key="B"), result("3.1", 1, key="C")]
        await apply_results(conn, first)
        await conn.execute(
            "UPDATE products SET consecutive_misses = 1, first_seen_at = now() - interval '1 day'"
        )
        await conn.execute(
            "INSERT INTO jobs (id, source, status, definition, created_at) "
            "VALUES (2, 's', 'completed', '{}', now())"
        )
        unsure = Product(
            key="A", price="1.00", availability="out_of_stock", url="https://s/p/A",
            found_by="visible", confidence=0.35,
        )  # fmt: skip
        done = await apply_results(
            conn,
            [
                ParseResult(attempt=_attempt("4.1", 2, "https://s/p/A"), product=unsure),
                result("5.1", 2, key="B"),
            ],
        )
        assert (done.results, done.upserts) == (2, 1)  # B's sighting; A's page is not taken
        assert await store.count_applied_products(conn, 2) == 1  # the job waits for B only
        job = await store.job(conn, 2)
        assert job is not None
        async with conn.transaction():
            report = await count_misses(
                conn, job, source_from_dict({"name": "s", "seeds": ["https://s/"]})
            )
        rows = {
            r["key"]: (r["consecutive_misses"], r["availability"], r["price"])
            for r in await conn.fetch(
                "SELECT key, consecutive_misses, availability, price FROM products"
            )
        }
    assert report.counted and (report.seen, report.missed) == (1, 1)
    assert rows["A"] == (1, "in_stock", Decimal("10.00"))  # unknown: unchanged
    assert rows["B"][0] == 0  # seen
    assert rows["C"][0] == 2  # not seen: a miss
