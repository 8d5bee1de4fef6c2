"""End to end: two crawls of the demo shop across an epoch change, with two refresher
replicas, give exactly the change events the shop's truth implies, once each, in the database
and on the events stream (where a reader can replay them from the start)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import msgspec
import pytest

from control.client import TrawlClient
from demo.shop import DemoShop
from schemas.messages import ProductChange
from services.refresher import store
from services.scheduler.catalog import save_source
from shared import names as n
from shared.names import Names
from shared.sources import source_from_dict
from tests.support.stack import Stack, eventually

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(240)]

SOLD_OUT = "out_of_stock"


async def settled(pool) -> None:
    """Wait until verification has settled every candidate change (a verify job re-checks each
    sold-out and delisting first), and check that it confirmed them all: the shop's changes are
    real, and it plants no transient fault here."""

    async def none_pending() -> bool:
        async with pool.acquire() as conn:
            return not await conn.fetchval(
                "SELECT count(*) FROM product_events WHERE verification = 'pending'"
            )

    await eventually(none_pending, timeout=90, what="verification settled", interval=0.2)
    async with pool.acquire() as conn:
        states = await conn.fetch(
            "SELECT DISTINCT verification FROM product_events WHERE verification IS NOT NULL"
        )
    assert {r[0] for r in states} <= {"confirmed"}, states


def expected(before: dict[str, dict], after: dict[str, dict]) -> Counter[tuple[str, str]]:
    """(key, kind) of every change from one epoch's truth to the next."""
    want: Counter[tuple[str, str]] = Counter()
    for key in set(before) - set(after):
        want[(key, "delisted")] += 1
    for key, now in after.items():
        if key not in before:  # a variant the epoch added
            want[(key, "new")] += 1
            continue
        was = before[key]
        if now["price"] != was["price"]:
            want[(key, "price_changed")] += 1
        if was["availability"] != SOLD_OUT and now["availability"] == SOLD_OUT:
            want[(key, "out_of_stock")] += 1
        if was["availability"] == SOLD_OUT and now["availability"] != SOLD_OUT:
            want[(key, "back_in_stock")] += 1
    return want


async def test_change_events_once_each(env, settings, pool, nc, tmp_path: Path):
    async with DemoShop(hosts=("127.0.0.2",), port=0, products=40) as shop:
        definition = shop.source_definition("demo-shop")
        definition["refresh"] = {"miss_threshold": 1}  # a product gone once is delisted
        async with pool.acquire() as conn:
            await save_source(conn, source_from_dict(definition))
        before = {p["key"]: p for p in shop.truth()}
        names = Names(env["TRAWL_NAMESPACE"])
        js = nc.jetstream()

        async with (
            Stack(env, tmp_path / "logs", scale="refresher=2") as stack,
            TrawlClient(settings) as client,
        ):
            for epoch, kind in ((0, "discovery"), (1, "refresh")):
                shop.set_epoch(epoch)
                reply = await client.trigger("demo-shop", kind=kind)
                assert reply.error is None, reply.error
                summary = await client.wait(reply.job_id, timeout=120)
                assert summary["status"] == "completed" and "refresh" in summary, stack.logs()
                if epoch == 0:
                    first_job = reply.job_id
            second_job = reply.job_id
            await settled(pool)
            after = {p["key"]: p for p in shop.truth()}
            want = expected(before, after)
            assert want, "the epoch changed nothing"

            async with pool.acquire() as conn:
                rows = await conn.fetch(
                    "SELECT key, kind, job_id, percent FROM product_events ORDER BY id"
                )
            got = Counter((r["key"], r["kind"]) for r in rows if r["job_id"] == second_job)
            assert got == want, (got - want, want - got, stack.logs())
            assert Counter(r["kind"] for r in rows if r["job_id"] == first_job) == {
                "new": len(before)
            }

            # The stream holds each event once (two replicas, one Nats-Msg-Id per event).
            stream = names.stream(n.EVENTS)
            subjects = names.product_changes("demo-shop")

            async def published() -> bool:
                info = await js.stream_info(stream, subjects_filter=subjects)
                return sum((info.state.subjects or {}).values()) >= len(rows)

            await eventually(published, timeout=30, what="every change on the stream")
            info = await js.stream_info(stream, subjects_filter=subjects)
            assert sum((info.state.subjects or {}).values()) == len(rows)
            # Replayable from any point: read them back by sequence, each decodes.
            on_stream = []
            sub = await js.subscribe(subjects, ordered_consumer=True)
            for _ in range(len(rows)):
                msg = await sub.next_msg(timeout=10)
                on_stream.append(msgspec.json.decode(msg.data, type=ProductChange))
            await sub.unsubscribe()
            assert Counter((e.key, e.kind) for e in on_stream if e.job_id == second_job) == want
            price = next(e for e in on_stream if e.kind == "price_changed")
            was, now = before[price.key]["price"], after[price.key]["price"]
            assert price.before is not None and price.before.price == was
            assert price.after.price == now
            assert price.direction == ("up" if float(now) > float(was) else "down")
            assert price.job_id == second_job and price.url == after[price.key]["url"]

            # The cursor pages through them all.
            async with pool.acquire() as conn:
                cursor = 0
                seen = 0
                while page := await store.list_events(
                    conn, store.ChangeFilter(source="demo-shop"), cursor=cursor, limit=7
                ):
                    seen += len(page)
                    cursor = page[-1].id
            assert seen == len(rows)


async def test_variants_have_their_own_rows_history_and_events(env, settings, pool, tmp_path):
    """Across an epoch that changes variants' prices and stock, adds a variant to some products
    and takes one from others: each variant has its own row and history, and the right events
    once each; a vanished variant is delisted only when its misses reach the threshold."""
    async with DemoShop(hosts=("127.0.0.2",), port=0, products=30, variants=True) as shop:
        async with pool.acquire() as conn:
            definition = shop.source_definition("demo-shop")
            definition["refresh"] = {"miss_threshold": 2}  # gone twice: delisted
            await save_source(conn, source_from_dict(definition))
        before = {v["key"]: v for v in shop.variant_truth()}
        async with Stack(env, tmp_path / "logs") as stack, TrawlClient(settings) as client:
            jobs = []
            for epoch, kind in ((0, "discovery"), (1, "refresh"), (1, "refresh")):
                shop.set_epoch(epoch)
                reply = await client.trigger("demo-shop", kind=kind)
                assert reply.error is None, reply.error
                summary = await client.wait(reply.job_id, timeout=120)
                assert summary["status"] == "completed" and "refresh" in summary, stack.logs()
                jobs.append(reply.job_id)
                if len(jobs) == 1:
                    rows = {p["key"]: p for p in await client.products("demo-shop")}
                    got = {k: (p["price"], p["availability"]) for k, p in rows.items()}
                    assert {k: got.get(k) for k in before} == {
                        k: (v["price"], v["availability"]) for k, v in before.items()
                    }
                    # The group is in stock when any variant is, at its cheapest available.
                    for key in {v["variant_of"] for v in before.values()}:
                        mine = [v for v in before.values() if v["variant_of"] == key]
                        available = [v for v in mine if v["availability"] == "in_stock"]
                        if available and key in rows:
                            assert rows[key]["availability"] == "in_stock"
                            assert float(rows[key]["price"]) == min(
                                float(v["price"]) for v in available
                            )
            await settled(pool)
            after = {v["key"]: v for v in shop.variant_truth()}
            added = set(after) - set(before)
            listed = {v["variant_of"] for v in after.values()}
            vanished = {k for k in set(before) - set(after) if before[k]["variant_of"] in listed}
            assert added and vanished, "the epoch added or removed no variant of a listed product"
            rows = {p["key"]: p for p in await client.products("demo-shop")}
            for key, v in after.items():
                assert rows[key]["variant_of"] == v["variant_of"]
                assert (rows[key]["price"], rows[key]["availability"]) == (
                    v["price"],
                    v["availability"],
                ), key
            for key in vanished:  # its product page was seen twice without it
                assert rows[key]["delisted_at"] is not None, key
                assert rows[key]["consecutive_misses"] == 2, key
            # Each variant's own history: a second snapshot where it changed, none where not.
            changed = {
                k
                for k in after
                if k in before
                and (after[k]["price"], after[k]["availability"])
                != (before[k]["price"], before[k]["availability"])
            }
            assert changed, "the epoch changed no variant"
            async with pool.acquire() as conn:
                counts = dict(
                    await conn.fetch(
                        "SELECT key, count(*) FROM snapshots WHERE key LIKE '%#%' GROUP BY key"
                    )
                )
                events = await conn.fetch(
                    "SELECT key, variant, kind, job_id FROM product_events WHERE variant <> ''"
                )
            assert {k for k in after if counts.get(k) == 2} == changed
            assert all(counts.get(k) == 1 for k in added)  # a new variant starts its own history
            want = expected(before, after)
            delisted = Counter({k: n for k, n in want.items() if k[1] == "delisted"})
            # The second crawl sees the changes and the new variants; the vanished ones count a
            # miss. The third sees nothing new: only the delistings, at the threshold.
            by_job = [
                Counter((e["variant"], e["kind"]) for e in events if e["job_id"] == j) for j in jobs
            ]
            assert by_job[1] == want - delisted
            assert by_job[2] == delisted
            assert Counter(kind for _, kind in by_job[0].elements()) == {"new": len(before)}
            assert all(
                e["key"] == (before.get(e["variant"]) or after[e["variant"]])["variant_of"]
                for e in events
            )
