"""Refresher throughput: ``python -m bench.refresher_bench [--products N] [--no-service]``.

Prints product upserts per second, and this process's CPU time per upsert (the refresher is
one Python thread: when that nears 1 s per second, Python is the bottleneck)

1. through the batch apply alone (``apply_results`` on one connection, one batch after the
   other): a first sighting of every product (insert + snapshot), a round with 15 % price
   changes, and an unchanged round (``--verify``: with the service's verification policies, so
   the repricings of 30 % or more are held as candidates instead of applied);
2. end to end through the service: parse results preloaded on ``<ns>.parsed``, the refresher's
   consumer running in this process, timed until every result is applied. Every product
   changes price (upsert + snapshot).

It runs on the services' event loop (uvloop where installed, ``shared.service.run``;
``--asyncio`` for the stock loop), in a scratch database and namespace (both removed
afterwards) on the local Postgres and NATS (``DATABASE_URL``'s server, ``NATS_URL``).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import resource
import time
import uuid

import asyncpg

from schemas.messages import Attempt, Link, ParseResult, Product
from services.refresher.products import apply_results
from shared.service import run

PG = os.environ.get("DATABASE_URL", "postgresql://root@127.0.0.1:5432/trawl").rsplit("/", 1)[0]
NATS = os.environ.get("NATS_URL", "nats://127.0.0.1:4222")


def results(
    n: int, job_id: int, prices: list[str], run: str, *, links: int = 0
) -> list[ParseResult]:
    return [
        ParseResult(
            # One entry per job and product: each round's results are new (not redeliveries).
            attempt=Attempt(
                job_id=job_id,
                entry_id=job_id * n + i,
                source="bench",
                url=f"https://shop.example.com/p/{i}",
            ),
            product=Product(
                key=f"SKU-{i:07d}",
                sku=f"SKU-{i:07d}",
                name=f"Product {i}",
                brand="Bench",
                price=prices[i],
                currency="EUR",
                availability="in_stock",
                url=f"https://shop.example.com/p/{i}",
                image=f"https://shop.example.com/i/{i}.jpg",
            ),
            links=[
                Link(url=f"https://shop.example.com/p/{(i + j) % n}") for j in range(1, links + 1)
            ],
        )
        for i in range(n)
    ]


def cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def rate(n: int, took: float, cpu: float) -> str:
    return f"{n / took:8,.0f} upserts/s, {cpu / n * 1e6:3.0f} µs CPU each"


async def bench_apply(dsn: str, n: int, batch: int, verify: bool = False) -> None:
    rng = random.Random(1)
    prices = [f"{rng.randint(1, 999)}.99" for _ in range(n)]
    from services.refresher.verification import Policies
    from shared.db import connect

    conn = await connect(dsn)  # the services' codecs: jsonb columns take Python objects
    policies = Policies() if verify else None
    if verify:  # the jobs the policies are read from: a source that verifies (the default)
        source = {"name": "bench", "seeds": ["https://shop.example.com/"]}
        await conn.execute("INSERT INTO sources (name, definition) VALUES ('bench', $1)", source)
        for job_id in (1, 2, 3):
            await conn.execute(
                "INSERT INTO jobs (id, source, kind, status, definition) "
                "VALUES ($1, 'bench', $2, 'completed', $3)",
                job_id,
                "discovery" if job_id == 1 else "refresh",
                source,
            )
    try:
        for job_id, label, share in ((1, "new", 0.0), (2, "15% repriced", 0.15), (3, "same", 0)):
            for i in rng.sample(range(n), int(n * share)):
                prices[i] = f"{rng.randint(1, 999)}.49"
            rows = results(n, job_id, prices, "apply")
            started, cpu = time.perf_counter(), cpu_seconds()
            snapshots = candidates = 0
            for i in range(0, n, batch):
                done = await apply_results(conn, rows[i : i + batch], policies=policies)
                snapshots += done.snapshots
                candidates += done.candidates
            took, cpu = time.perf_counter() - started, cpu_seconds() - cpu
            print(
                f"apply  {label:13} {n:7} upserts in {took:6.2f} s = {rate(n, took, cpu)} "
                f"({snapshots} snapshots, {candidates} candidates, batch {batch})"
            )
    finally:
        await conn.close()


async def bench_service(dsn: str, n: int, links: int) -> None:
    from services.refresher.service import start
    from shared.bus import connect, publish_many
    from shared.db import open_pool
    from shared.names import Names
    from shared.provision import provision, teardown
    from shared.service import DbRuntime
    from shared.settings import Settings

    ns = f"bench{uuid.uuid4().hex[:8]}"
    settings = Settings.from_env({"NATS_URL": NATS, "DATABASE_URL": dsn, "TRAWL_NAMESPACE": ns})
    names = Names(ns)
    nc = await connect(NATS, name="refresher-bench", attempts=3)
    js = nc.jetstream(timeout=10)
    pool = await open_pool(dsn, min_size=2, max_size=4, attempts=3)
    try:
        await provision(js, names)
        rows = results(n, 10, [f"{i % 500}.95" for i in range(n)], "service", links=links)
        started = time.perf_counter()
        await publish_many(js, [(names.parsed, r, None, None) for r in rows])
        took = time.perf_counter() - started
        print(f"service: {n} parse results published in {took:.2f} s ({n / took:,.0f}/s)")
        stop = asyncio.Event()
        rt = DbRuntime("refresher", settings, names, nc, js, stop, pool=pool)
        started, cpu = time.perf_counter(), cpu_seconds()
        tasks = [asyncio.create_task(c) for c in await start(rt)]
        while rt.stats["applied"] < n:
            if any(t.done() for t in tasks):
                raise SystemExit("the refresher stopped early")
            await asyncio.sleep(0.02)  # a benchmark's progress probe
        took, cpu = time.perf_counter() - started, cpu_seconds() - cpu
        print(
            f"service end to end {n:7} upserts in {took:6.2f} s = {rate(n, took, cpu)} "
            f"({rt.stats['batches']} batches, mean {n / rt.stats['batches']:.0f}, "
            f"{links} links per result)"
        )
        stop.set()
        await asyncio.gather(*tasks)
    finally:
        await teardown(js, names)
        await pool.close()
        await nc.close()


async def main(args: argparse.Namespace) -> None:
    from migrations.runner import migrate

    name = f"trawl_bench_{uuid.uuid4().hex[:8]}"
    dsn = f"{PG}/{name}"
    await migrate(dsn)
    try:
        await bench_apply(dsn, args.products, args.batch, args.verify)
        if not args.no_service:
            await bench_service(dsn, args.products, args.links)
    finally:
        conn = await asyncpg.connect(f"{PG}/postgres")
        try:
            await conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        finally:
            await conn.close()


def parse_args() -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--products", type=int, default=20_000)
    ap.add_argument("--batch", type=int, default=500)
    ap.add_argument("--no-service", action="store_true", help="skip the end-to-end run")
    ap.add_argument(
        "--links", type=int, default=0, help="links per parse result in the end-to-end run"
    )
    ap.add_argument("--asyncio", action="store_true", help="the stock event loop, not uvloop")
    ap.add_argument(
        "--verify", action="store_true", help="apply with verification (candidates held)"
    )
    return ap.parse_args()


if __name__ == "__main__":
    args = parse_args()
    if args.asyncio:
        asyncio.run(main(args))
    else:
        run(main(args))  # the services' loop
