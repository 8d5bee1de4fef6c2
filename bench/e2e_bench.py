"""End to end: ``python -m bench.e2e_bench [--products 5000] [--scale fetcher=1]``.

Runs the demo shop as its own process on loopback, crawls it with trawl (``fast`` profile; the
four services as processes under the Supervisor, exactly as ``trawl up``; a fresh database and
namespace, removed afterwards), then crawls the same shop with the Scrapy spider in
``bench/scrapy_spider.py``, and prints:

- pages/s and products/s (trigger → the job's products applied),
- p50/p99 trigger-to-product latency (``jobs.created_at`` → ``products.first_seen_at``),
- peak RSS (VmHWM) and CPU seconds per page of every service process,
- that every payload is stored and every product is in Postgres,
- the ratio of trawl's wall time to Scrapy's.

The demo shop is a Python server sharing the cores with both crawlers, so these figures measure
it as much as the crawlers: speed and CPU figures in notes come from ``bench.static_bench``
(a static site served by nginx, issue 13).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path
from urllib.request import urlopen

from bench.harness import ROOT, TrawlStack, free_port, pct, run_scrapy
from control.supervisor import parse_scale

HOSTS = ("127.0.0.2", "127.0.0.3")


async def _start_shop(products: int, port: int, workdir: Path) -> asyncio.subprocess.Process:
    shop = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "demo", "--hosts", ",".join(HOSTS), "--port", str(port),
        "--products", str(products), "--truth-file", str(workdir / "truth.json"),
        stdout=asyncio.subprocess.PIPE, cwd=ROOT,
    )  # fmt: skip
    assert shop.stdout is not None
    line = await asyncio.wait_for(shop.stdout.readline(), 60)
    if not line.startswith(b"demo shop:"):
        raise RuntimeError(f"the demo shop did not start: {line!r}")
    return shop


async def crawl_with_trawl(args: argparse.Namespace, base: str, workdir: Path) -> dict:
    with urlopen(f"{base}/_shop/source", timeout=10) as resp:  # noqa: ASYNC210 - once, at setup
        definition = json.load(resp)
    definition["name"] = "bench"
    definition["pacing"] = {"profile": "fast"}
    # The Scrapy spider fetches no images, so neither does trawl here: the same pages each.
    definition["images"] = False
    stack = TrawlStack(
        database=args.database,
        nats=args.nats,
        source=definition,
        scale=parse_scale(args.scale),
        log_dir=workdir / "logs",
    )
    async with stack:
        cpu0 = {name: cpu for name, (cpu, _) in stack.usage().items()}
        crawl = await stack.crawl("bench")
        usage = stack.usage()
        restarts = stack.restarts()
        async with stack.pool.acquire() as conn:
            row = await conn.fetchrow(
                "SELECT created_at, finished_at, counters FROM jobs WHERE id = $1", crawl.job_id
            )
            assert row is not None
            lat = await conn.fetch(
                "SELECT extract(epoch FROM p.first_seen_at - $2::timestamptz) AS s "
                "FROM products p WHERE p.source = 'bench' AND p.last_seen_job = $1",
                crawl.job_id,
                row["created_at"],
            )
            ok = await conn.fetchval(
                "SELECT count(*) FROM attempts WHERE job_id = $1 AND outcome = 'ok'",
                crawl.job_id,
            )
            stored = await conn.fetchval(
                "SELECT count(*) FROM attempts a JOIN payloads p ON p.ref = a.payload_ref "
                "AND p.attempt_id = a.attempt_id WHERE a.job_id = $1 AND a.outcome = 'ok'",
                crawl.job_id,
            )
            products = await conn.fetchval("SELECT count(*) FROM products WHERE source = 'bench'")
        payload_msgs = await stack.payload_messages()
    pages = row["counters"].get("total", 0)
    return {
        "status": crawl.status,
        "wall": crawl.wall,
        "crawl": (row["finished_at"] - row["created_at"]).total_seconds(),
        "pages": pages,
        "products": products,
        "latency": [r["s"] for r in lat],
        "ok": ok,
        "stored": stored,
        "payload_msgs": payload_msgs,
        "cpu": {n: usage[n][0] - cpu0.get(n, 0.0) for n in usage},
        "rss": {n: usage[n][1] for n in usage},
        "restarts": restarts,
    }


async def crawl_with_scrapy(base_urls: list[str], workdir: Path) -> tuple[float, int]:
    run = await run_scrapy([u + "/" for u in base_urls], list(HOSTS), workdir)
    return run.wall, len({item["sku"] for item in run.items})


async def main(args: argparse.Namespace) -> None:
    workdir = Path(tempfile.mkdtemp(prefix="trawl-e2e-bench-"))
    port = free_port(HOSTS[0])
    shop = await _start_shop(args.products, port, workdir)
    base_urls = [f"http://{h}:{port}" for h in HOSTS]
    try:
        truth = len(json.loads((workdir / "truth.json").read_text()))
        print(f"shop: {truth} products on {', '.join(base_urls)}; trawl scale {args.scale}")
        t = await crawl_with_trawl(args, base_urls[0], workdir)
        s_wall, s_items = await crawl_with_scrapy(base_urls, workdir)
    finally:
        shop.terminate()
        await shop.wait()
    wall = t["wall"]
    print(f"\ntrawl   job {t['status']}: {t['pages']} pages, {t['products']} products")
    print(f"        wall {wall:.1f} s (trigger → products applied; crawl {t['crawl']:.1f} s)")
    print(f"        {t['pages'] / wall:.0f} pages/s, {t['products'] / wall:.0f} products/s")
    print(
        f"        trigger→product latency p50 {pct(t['latency'], 0.5):.1f} s, "
        f"p99 {pct(t['latency'], 0.99):.1f} s"
    )
    print(
        f"        payloads: {t['stored']}/{t['ok']} ok fetches recorded, "
        f"{t['payload_msgs']} bodies in the store; products in Postgres: "
        f"{t['products']}/{truth}"
    )
    if t["restarts"]:
        print(f"        restarts: {t['restarts']}")
    print(f"        {'process':<14}{'peak RSS':>10}{'CPU s':>8}{'CPU ms/page':>13}")
    for name in sorted(t["rss"]):
        cpu = t["cpu"][name]
        print(
            f"        {name:<14}{t['rss'][name] / 1024:>8.0f}MB{cpu:>8.1f}"
            f"{1000 * cpu / max(1, t['pages']):>13.2f}"
        )
    print(f"\nscrapy  {s_items} products, wall {s_wall:.1f} s, ~{t['pages'] / s_wall:.0f} pages/s")
    print(f"\ntrawl / scrapy wall time: {wall / s_wall:.2f}")
    if not args.keep:
        shutil.rmtree(workdir, ignore_errors=True)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m bench.e2e_bench", description=__doc__)
    p.add_argument("--products", type=int, default=5000)
    p.add_argument("--scale", default="", help="e.g. fetcher=2,parser=2")
    p.add_argument(
        "--database",
        default=os.environ.get("DATABASE_URL", "postgresql://root@127.0.0.1:5432/trawl"),
    )
    p.add_argument("--nats", default=os.environ.get("NATS_URL", "nats://127.0.0.1:4222"))
    p.add_argument("--keep", action="store_true", help="keep the work dir (logs, scrapy output)")
    return p.parse_args(argv)


if __name__ == "__main__":
    asyncio.run(main(parse_args()))
