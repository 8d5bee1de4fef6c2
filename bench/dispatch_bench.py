"""Scheduler dispatch benchmark: ``python -m bench.dispatch_bench``.

1. Release rate with pacing off: N entries over 1,000 domains, dispatched (claimed, marked,
   published to JetStream, committed) by one Dispatcher, as fast as it goes.
2. The dispatch queries at a large frontier (default 1,000,000 pending entries over 10,000
   domains): latency of one claim (domains + entries), p50/p99, in transactions rolled back
   so the frontier stays the same size.
3. RSS of this process with an empty and with a full frontier.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import resource
import time
import uuid

import asyncpg

from migrations.runner import migrate
from services.scheduler import store
from services.scheduler.dispatch import Dispatcher
from services.scheduler.jobs import JobSources
from shared.bus import connect
from shared.db import open_pool
from shared.names import Names
from shared.provision import provision, teardown

PG = "postgresql://root@127.0.0.1:5432"
SOURCE = {
    "name": "bench",
    "seeds": ["http://d0.bench/"],
    "allow_private": True,
    "pacing": {"profile": "fast"},
}


def rss_mb() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


async def fill(pool: asyncpg.Pool, entries: int, domains: int, *, max_in_flight: int) -> int:
    """A running job with ``entries`` pending entries spread over ``domains`` domains."""
    async with pool.acquire() as conn:
        await conn.execute("TRUNCATE entries, domains, jobs, sources CASCADE")
        await conn.execute("INSERT INTO sources (name, definition) VALUES ('bench', $1)", SOURCE)
        job_id = await conn.fetchval(
            "INSERT INTO jobs (source, definition) VALUES ('bench', $1) RETURNING id", SOURCE
        )
        await conn.execute(
            """INSERT INTO domains (domain, max_in_flight, min_delay, max_delay, has_pending)
               SELECT 'd' || i || '.bench', $2, 0, 0, true
               FROM generate_series(0, $1 - 1) AS i""",
            domains,
            max_in_flight,
        )
        await conn.execute(
            """INSERT INTO entries (job_id, url, domain, kind, priority, rank)
               SELECT $1, 'http://d' || (i % $3) || '.bench/p/' || i, 'd' || (i % $3) || '.bench',
                      'product', 40, 40 - random()
               FROM generate_series(0, $2 - 1) AS i""",
            job_id,
            entries,
            domains,
        )
        await conn.execute("ANALYZE entries")
        await conn.execute("ANALYZE domains")
    return job_id


async def release_rate(pool: asyncpg.Pool, js, names: Names, entries: int) -> dict:
    await fill(pool, entries, 1000, max_in_flight=10_000)
    dispatcher = Dispatcher(pool, js, names, JobSources(), max_domains=1000)
    start = time.perf_counter()
    sent = 0
    while sent < entries:
        n = await dispatcher.cycle()
        if n == 0:
            break
        sent += n
    elapsed = time.perf_counter() - start
    return {"entries": sent, "seconds": round(elapsed, 2), "per_second": round(sent / elapsed)}


def _pct(values: list[float], q: float) -> float:
    values = sorted(values)
    return round(values[max(0, int(len(values) * q) - 1)], 2)


async def query_latency(
    pool: asyncpg.Pool, entries: int, domains: int, rounds: int, per_claim: int
) -> dict:
    """The dispatch query (claim domains + pick and lock their best entries) and the whole
    claim including marking the entries dispatched, each in a rolled-back transaction."""
    t0 = time.perf_counter()
    await fill(pool, entries, domains, max_in_flight=1)
    fill_s = time.perf_counter() - t0
    select_ms, claim_ms = [], []
    async with pool.acquire() as conn:
        for i in range(rounds * 2):
            tr = conn.transaction()
            await tr.start()
            t = time.perf_counter()
            claimed = await store.dispatch.claim_domains(conn, per_claim)
            args = ([d["domain"] for d in claimed], [1] * len(claimed))
            pick = store.dispatch.pick_entries if i % 2 else store.dispatch.claim_entries
            picked = await pick(conn, *args)
            (select_ms if i % 2 else claim_ms).append((time.perf_counter() - t) * 1000)
            assert len(picked) == len(claimed) == per_claim, (len(claimed), len(picked))
            await tr.rollback()
    return {
        "entries": entries,
        "domains": domains,
        "fill_seconds": round(fill_s, 1),
        "domains_per_claim": per_claim,
        "dispatch_query_ms_p50": _pct(select_ms, 0.5),
        "dispatch_query_ms_p99": _pct(select_ms, 0.99),
        "claim_and_mark_ms_p50": _pct(claim_ms, 0.5),
        "claim_and_mark_ms_p99": _pct(claim_ms, 0.99),
    }


async def main(args: argparse.Namespace) -> None:
    db = f"trawl_bench_{uuid.uuid4().hex[:6]}"
    dsn = f"{PG}/{db}"
    await migrate(dsn)
    pool = await open_pool(dsn, min_size=1, max_size=4)
    nc = await connect("nats://127.0.0.1:4222", name="bench", attempts=3)
    names = Names(f"bench{uuid.uuid4().hex[:6]}")
    js = nc.jetstream()
    await provision(js, names)
    out: dict = {"rss_mb_start": round(rss_mb(), 1)}
    try:
        out["release"] = await release_rate(pool, js, names, args.release_entries)
        out["rss_mb_after_release"] = round(rss_mb(), 1)
        out["query"] = await query_latency(
            pool, args.entries, args.domains, args.rounds, args.per_claim
        )
        out["rss_mb_full_frontier"] = round(rss_mb(), 1)
    finally:
        await teardown(js, names)
        await nc.close()
        await pool.close()
        conn = await asyncpg.connect(f"{PG}/postgres")
        await conn.execute(f'DROP DATABASE IF EXISTS "{db}" WITH (FORCE)')
        await conn.close()
    print(json.dumps(out, indent=2))


def cli(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--release-entries", type=int, default=20_000)
    p.add_argument("--entries", type=int, default=1_000_000)
    p.add_argument("--domains", type=int, default=10_000)
    p.add_argument("--rounds", type=int, default=200)
    p.add_argument("--per-claim", type=int, default=200, help="domains claimed per cycle")
    asyncio.run(main(p.parse_args(argv)))


if __name__ == "__main__":
    cli()
