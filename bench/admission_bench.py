"""Link admission benchmark: ``python -m bench.admission_bench``.

Applies N parse results through the real ``apply_parse_result`` against a fresh database, each
shaped like a page of a realistic shop: about 200 links, of which about 12 are new. The rest
repeat earlier pages' links: header and footer navigation, the category's facets (sort and
filter parameters), breadcrumbs, and related products already seen.

Prints the CPU this process (the scheduler's work) and the Postgres backend (its
``/proc/<pid>/stat`` utime + stime, found with ``pg_backend_pid()``) spend per result.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import time
import uuid

import asyncpg

from migrations.runner import migrate
from schemas.messages import Attempt, Link, ParseResult
from services.scheduler.catalog import save_source
from services.scheduler.frontier import Admission, Candidate
from services.scheduler.jobs import JobSources
from services.scheduler.results import apply_parse_result
from services.scheduler.seen import SeenLinks
from services.scheduler.store import Conn
from shared.db import open_pool
from shared.sources import source_from_dict

PG = "postgresql://root@127.0.0.1:5432"
SITE = "http://127.0.0.2:9"
DEFINITION = {
    "name": "admission",
    "seeds": [f"{SITE}/"],
    "allow_private": True,
    "links": {"max_depth": 1000},
}
TICK = os.sysconf("SC_CLK_TCK")


def backend_cpu_ms(pid: int) -> float:
    """utime + stime of a Postgres backend, in ms."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) * 1000 / TICK


class Shop:
    """Links as a shop's pages show them: the same navigation everywhere, a category's facets
    on its pages, a dozen new products per page and related products already seen."""

    def __init__(self, seed: int, *, categories: int = 20, new: int = 12, links: int = 200):
        self.rng = random.Random(seed)
        self.categories = categories
        self.new = new
        self.links = links
        self.nav = [f"{SITE}/c/{c}" for c in range(categories)] + [
            f"{SITE}/{p}" for p in ("about", "contact", "cart", "account", "help", "shipping")
        ]
        self.facets = [
            [
                f"{SITE}/c/{c}?sort={s}&filter={f}"
                for s in ("price", "name", "new")
                for f in ("red", "blue", "green", "small", "large")
            ]
            for c in range(categories)
        ]
        self.products: list[str] = []

    def page(self, n: int) -> list[Link]:
        c = n % self.categories
        links = [Link(url=u, kind="page") for u in self.nav]
        links += [Link(url=u, kind="page") for u in self.facets[c]]
        links += [Link(url=f"{SITE}/c/{c}?page={p}", kind="pagination") for p in range(1, 11)]
        fresh = [f"{SITE}/p/{len(self.products) + i}?ref=card" for i in range(self.new)]
        self.products += fresh
        links += [Link(url=u, kind="product") for u in fresh]
        known = self.products[: -self.new]
        room = self.links - len(links)
        for u in self.rng.sample(known, min(room, len(known))):
            links.append(Link(url=u, kind="product"))
        return links


async def run(conn: Conn, results: int, seed: int, *, seen: bool) -> dict[str, float]:
    source = source_from_dict(DEFINITION)
    await save_source(conn, source)
    job_id = await conn.fetchval(
        "INSERT INTO jobs (source, definition) VALUES ($1, $2) RETURNING id",
        source.name,
        DEFINITION,
    )
    await Admission(source, ["127.0.0.2:9"]).admit(conn, job_id, [Candidate(f"{SITE}/", "seed")])
    # The pages being parsed: one dispatched entry each, made before the clock starts.
    entry_ids = await conn.fetchval(
        """WITH e AS (
               INSERT INTO entries (job_id, url, domain, kind, depth, priority, rank, state,
                                    attempts)
               SELECT $1, $2 || '/parsed/' || i, '127.0.0.2:9', 'page', 1, 0, 0, 'dispatched', 1
               FROM generate_series(1, $3) AS i
               RETURNING id)
           SELECT array_agg(id ORDER BY id) FROM e""",
        job_id,
        SITE,
        results,
    )
    shop = Shop(seed)
    pages = [
        ParseResult(
            attempt=Attempt(
                job_id=job_id, entry_id=eid, source=source.name, url=f"{SITE}/parsed/{n}", depth=1
            ),
            links=shop.page(n),
        )
        for n, eid in enumerate(entry_ids)
    ]
    job_sources = JobSources()
    seen_links = SeenLinks() if seen else None
    pid = await conn.fetchval("SELECT pg_backend_pid()")
    admitted = 0
    pg0, cpu0, wall0 = backend_cpu_ms(pid), time.process_time(), time.perf_counter()
    for result in pages:
        _, n = await apply_parse_result(conn, result, job_sources, seen_links)
        admitted += n
    pg1, cpu1, wall1 = backend_cpu_ms(pid), time.process_time(), time.perf_counter()
    links = sum(len(p.links) for p in pages)
    distinct = await conn.fetchval(
        "SELECT count(*) FROM entries WHERE job_id = $1 AND url NOT LIKE '%/parsed/%'", job_id
    )
    return {
        "results": results,
        "links_per_result": round(links / results, 1),
        "admitted_per_result": round(admitted / results, 1),
        "entries": distinct,
        "scheduler_cpu_ms_per_result": round((cpu1 - cpu0) * 1000 / results, 3),
        "postgres_cpu_ms_per_result": round((pg1 - pg0) / results, 3),
        "wall_ms_per_result": round((wall1 - wall0) * 1000 / results, 3),
    }


async def main(args: argparse.Namespace) -> None:
    db = f"trawl_bench_{uuid.uuid4().hex[:6]}"
    dsn = f"{PG}/{db}"
    await migrate(dsn)
    pool = await open_pool(dsn, min_size=1, max_size=1)
    try:
        async with pool.acquire() as conn:
            out = await run(conn, args.results, args.seed, seen=not args.without_seen)
    finally:
        await pool.close()
        admin = await asyncpg.connect(f"{PG}/postgres")
        await admin.execute(f'DROP DATABASE IF EXISTS "{db}" WITH (FORCE)')
        await admin.close()
    out["total_cpu_ms_per_result"] = round(
        out["scheduler_cpu_ms_per_result"] + out["postgres_cpu_ms_per_result"], 3
    )
    print(json.dumps(out, indent=2))


def cli(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--results", type=int, default=1000, help="parse results to apply")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument(
        "--without-seen", action="store_true", help="every link to Postgres (no seen-set)"
    )
    asyncio.run(main(p.parse_args(argv)))


if __name__ == "__main__":
    cli()
