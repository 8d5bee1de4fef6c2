"""Product change events against real Postgres: the kinds, once per product, variant, job and
kind however often a result is delivered, none from a replay or a late result, the delisting's
event, and the cursor the CLI and the API page by."""

from __future__ import annotations

import pytest

from schemas.messages import ParseResult, Product, ProductState
from services.refresher import store
from services.refresher.changes import delisting, detect
from services.refresher.products import apply_results
from tests.integration.test_refresher_batch import _jobs, result


async def _events(conn) -> list[tuple]:
    rows = await store.list_events(conn, store.ChangeFilter(source="s"), limit=1000)
    return [(e.key, e.variant, e.job_id, e.kind, e.direction, e.percent) for e in rows]


async def test_each_kind_once_per_job_however_often_delivered(pool) -> None:
    async with pool.acquire() as conn:
        await _jobs(conn, 1, 2, 3, 4)
        first = await apply_results(conn, [result("1.1", 1), result("2.1", 1, key="B")])
        assert [(e.kind, e.key) for e in first.events] == [("new", "A"), ("new", "B")]
        # Redelivered: already applied, nothing new.
        again = await apply_results(conn, [result("1.1", 1), result("2.1", 1, key="B")])
        assert again.events == ()
        # Job 2: A drops 10 % and then sells out on a second page; B unchanged.
        second = await apply_results(
            conn,
            [
                result("3.1", 2, price="9.00"),
                result("4.1", 2, price="9.00", availability="out_of_stock"),
                result("5.1", 2, key="B"),
            ],
        )
        assert [(e.kind, e.direction, e.percent) for e in second.events] == [
            ("price_changed", "down", -10.0),
            ("out_of_stock", None, None),
        ]
        ev = second.events[0]
        assert ev.before == ProductState(
            price="10.00", currency="EUR", availability="in_stock"
        ) and ev.after == ProductState(price="9.00", currency="EUR", availability="in_stock")
        # Another page of job 2 showing a third price: the same (key, job, kind), one event.
        more = await apply_results(conn, [result("6.1", 2, price="8.00")])
        assert [e.kind for e in more.events] == ["back_in_stock"]
        # A late result of job 1 changes nothing; a replay emits nothing.
        late = await apply_results(conn, [result("7.1", 1, price="10.00")])
        assert late.events == ()
        replayed = await apply_results(conn, [result("r-3", 3, price="1.00")], replay=True)
        assert replayed.snapshots == 1 and replayed.events == ()
        assert await _events(conn) == [
            ("A", "", 1, "new", None, None),
            ("B", "", 1, "new", None, None),
            ("A", "", 2, "price_changed", "down", -10.0),
            ("A", "", 2, "out_of_stock", None, None),
            ("A", "", 2, "back_in_stock", None, None),
        ]


async def test_delisted_and_relisted(pool) -> None:
    async with pool.acquire() as conn:
        await _jobs(conn, 1, 2)
        await apply_results(conn, [result("1.1", 1)])
        await conn.execute(
            "UPDATE products SET consecutive_misses = 3, delisted_at = now(), "
            "availability = 'out_of_stock'"
        )
        seen = await apply_results(conn, [result("2.1", 2)])
        assert [e.kind for e in seen.events] == ["relisted", "back_in_stock"]


async def test_delisting_records_its_event(pool) -> None:
    async with pool.acquire() as conn:
        await _jobs(conn, 1, 2)
        await apply_results(conn, [result("1.1", 1)])
        await conn.execute("UPDATE products SET consecutive_misses = 3")
        delisted = await store.delist_products(conn, "s", 3)
        rows = [delisting("s", 2, d).row() for d in delisted]
        first = await store.insert_events(conn, rows)
        assert [(e.kind, e.before and e.before.availability) for e in first] == [
            ("delisted", "in_stock")
        ]
        assert await store.insert_events(conn, rows) == []  # the same job again: no event


async def test_cursor_pages_and_filters(pool) -> None:
    async with pool.acquire() as conn:
        await _jobs(conn, 1)
        await apply_results(conn, [result(f"{i}.1", 1, key=f"K{i}") for i in range(1, 6)])
        where = store.ChangeFilter(source="s")
        page = await store.list_events(conn, where, limit=2)
        rest = await store.list_events(conn, where, cursor=page[-1].id, limit=10)
        assert [e.key for e in page + rest] == [f"K{i}" for i in range(1, 6)]
        # Newest first: before a cursor (0: from the newest), the same filters.
        newest = await store.list_events(conn, where, newest_first=True, limit=2)
        older = await store.list_events(
            conn, where, cursor=newest[-1].id, newest_first=True, limit=10
        )
        assert [e.key for e in newest + older] == [f"K{i}" for i in range(5, 0, -1)]
        assert (
            await store.list_events(conn, store.ChangeFilter(source="s", kinds=["delisted"])) == []
        )
        assert await store.list_events(conn, store.ChangeFilter(source="other")) == []


@pytest.mark.parametrize(
    ("before", "after", "kinds"),
    [
        (None, ("1", None, "in_stock"), ["new"]),
        (("10", None, "in_stock"), ("10", "8", "in_stock"), ["price_changed"]),  # a sale starts
        (("10", None, None), ("10", None, "out_of_stock"), []),  # unknown → sold out: no change
        (("10", None, "out_of_stock"), ("10", None, "unknown"), []),
        (("10", None, "discontinued"), ("10", None, "limited"), ["back_in_stock"]),
        ((None, None, "in_stock"), ("5", None, "in_stock"), []),  # a first price is no change
    ],
)
def test_detect(before, after, kinds) -> None:
    def st(t):
        return None if t is None else ProductState(price=t[0], sale_price=t[1], availability=t[2])

    assert [k for k, _, _ in detect(st(before), st(after))] == kinds


async def test_a_reparsed_304_sees_what_its_page_shows_not_every_row_at_its_url(pool) -> None:
    """A variant gone from a page that then answers 304 shares the page's URL, but the
    re-parse of the stored page does not show it: not seen. A 304 nothing was re-parsed from
    still stands for every row at its URL."""

    def variant(sku: str) -> Product:
        return Product(key=f"A#{sku}", sku=sku, price="10.00", url="https://s/p/A", variant_of="A")

    async with pool.acquire() as conn:
        await _jobs(conn, 1, 2, 3)
        await apply_results(conn, [result("1.1", 1, products=[variant("1"), variant("2")])])
        await apply_results(conn, [result("2.1", 2, products=[variant("1")], not_modified=True)])
        assert set(await store.seen_keys(conn, 2, "s")) == {"A", "A#1"}
        bare = ParseResult(attempt=result("3.1", 3).attempt, not_modified=True)
        await apply_results(conn, [bare])
        assert set(await store.seen_keys(conn, 3, "s")) == {"A", "A#1", "A#2"}
