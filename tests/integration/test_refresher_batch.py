"""The refresher's batch apply against real Postgres: idempotency, snapshots on change only,
late results of older jobs, replay mode, and the batcher's failure isolation."""

from __future__ import annotations

import asyncio

from schemas.messages import ParseResult, Product
from services.refresher.batcher import Batcher
from services.refresher.products import apply_results, list_products


def result(attempt: str, job: int, key: str = "A", price: str = "10.00", **kw) -> ParseResult:
    product = Product(
        key=key,
        name=kw.pop("name", f"Product {key}"),
        price=price,
        currency="EUR",
        availability=kw.pop("availability", "in_stock"),
        url=f"https://s/p/{key}",
    )
    return ParseResult(
        attempt_id=attempt,
        job_id=job,
        entry_id=1,
        source="s",
        url=f"https://s/p/{key}",
        product=product,
        **kw,
    )


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
        products = {p["key"]: p for p in await list_products(conn, "s")}
        assert (products["A"]["price"], products["A"]["availability"]) == ("8.00", "limited")
        assert products["A"]["last_seen_job"] == 2


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
            attempt_id="2.1",
            job_id=2,
            entry_id=1,
            source="s",
            url="https://s/p/A",
            not_modified=True,
        )
        assert (await apply_results(conn, [bare])).results == 1
        row = await conn.fetchrow("SELECT consecutive_misses, last_seen_job FROM products")
        assert tuple(row) == (0, 2)


async def test_batcher_groups_and_isolates_a_failure() -> None:
    batches: list[list[int]] = []

    async def apply(items):
        if 13 in items:
            raise ValueError("bad item")
        batches.append(list(items))
        return len(items)

    batcher: Batcher[int, int] = Batcher(apply, max_size=50, max_wait=0.01)
    grouped = await asyncio.gather(*(batcher.submit(i) for i in range(100, 120)))
    assert grouped == [20] * 20 and batches == [list(range(100, 120))]
    batches.clear()
    outcomes = await asyncio.gather(*(batcher.submit(i) for i in range(20)), return_exceptions=True)
    assert isinstance(outcomes[13], ValueError)
    # The failed batch was re-applied one by one: only the culprit failed.
    assert [o for i, o in enumerate(outcomes) if i != 13] == [1] * 19
    assert sorted(i for b in batches for i in b) == [i for i in range(20) if i != 13]


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
        return ParseResult(
            attempt_id=attempt,
            job_id=job,
            entry_id=1,
            source="s",
            url="https://s/p/A",
            product=product,
        )

    async with pool.acquire() as conn:
        await _jobs(conn, 1, 2, 3)
        await apply_results(conn, [sighting("1.1", 1, "9.00")])
        await apply_results(conn, [sighting("2.1", 2, "9.00")])  # unchanged: no snapshot
        await apply_results(conn, [sighting("3.1", 3, "8.50")])  # member price changed
        (row,) = await list_products(conn, "s")
        snaps = await conn.fetch("SELECT job_id, prices FROM snapshots ORDER BY id")
    assert row["prices"] == {"member": "8.50"} and row["attributes"] == {"thc": "20%"}
    assert [(s["job_id"], s["prices"]) for s in snaps] == [
        (1, {"member": "9.00"}),
        (3, {"member": "8.50"}),
    ]
