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
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import sys
import tempfile
import time
import uuid
from pathlib import Path
from urllib.request import urlopen

import asyncpg

from control.client import TrawlClient
from control.supervisor import Supervisor, parse_scale
from migrations.runner import migrate
from services.scheduler.catalog import save_source
from shared.bus import connect
from shared.db import open_pool
from shared.names import Names
from shared.provision import teardown
from shared.settings import Settings
from shared.sources import source_from_dict

HOSTS = ("127.0.0.2", "127.0.0.3")
TICK = os.sysconf("SC_CLK_TCK")
ROOT = Path(__file__).resolve().parent.parent


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind((HOSTS[0], 0))
        return s.getsockname()[1]


def _proc_stats(pid: int) -> tuple[float, int]:
    """(CPU seconds, peak RSS in kB) of a live process."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    cpu = (int(fields[11]) + int(fields[12])) / TICK  # utime + stime
    hwm = 0
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            hwm = int(line.split()[1])
    return cpu, hwm


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


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
    admin = args.database.rsplit("/", 1)[0]
    db = f"trawl_bench_{uuid.uuid4().hex[:8]}"
    env = dict(os.environ)
    env.update(
        {
            "DATABASE_URL": f"{admin}/{db}",
            "NATS_URL": args.nats,
            "TRAWL_NAMESPACE": f"bench{uuid.uuid4().hex[:8]}",
            "TRAWL_API_LISTEN": f"127.0.0.1:{_free_port()}",
            "TRAWL_LOG_LEVEL": "WARNING",
            "PYTHONPATH": str(ROOT),
        }
    )
    settings = Settings.from_env(env)
    await migrate(env["DATABASE_URL"])
    with urlopen(f"{base}/_shop/source", timeout=10) as resp:  # noqa: ASYNC210 - once, at setup
        definition = json.load(resp)
    definition["name"] = "bench"
    definition["pacing"] = {"profile": "fast"}
    # The Scrapy spider fetches no images, so neither does trawl here: the same pages each.
    definition["images"] = False
    pool = await open_pool(env["DATABASE_URL"], min_size=1, max_size=2, attempts=3)
    async with pool.acquire() as conn:
        await save_source(conn, source_from_dict(definition))

    scale = parse_scale(args.scale)
    sup = Supervisor(scale=scale, demo=False, log_dir=workdir / "logs", env=env)
    await sup.start()
    runner = asyncio.create_task(sup.run(), name="supervisor")
    try:
        async with TrawlClient(settings) as client:
            await client.wait_for_workers(scale, timeout=60)
            cpu0 = {c.name: _proc_stats(c.proc.pid)[0] for c in sup.children if c.proc}
            t0 = time.monotonic()
            reply = await client.trigger("bench", timeout=30)
            assert reply.job_id is not None, reply.error
            summary = await client.wait(reply.job_id, timeout=3600)
            wall = time.monotonic() - t0
            procs = {c.name: (c.proc.pid, c.restarts) for c in sup.children if c.proc}
            usage = {name: _proc_stats(pid) for name, (pid, _) in procs.items()}
            async with pool.acquire() as conn:
                row = await conn.fetchrow(
                    "SELECT created_at, finished_at, counters FROM jobs WHERE id = $1",
                    reply.job_id,
                )
                lat = await conn.fetch(
                    "SELECT extract(epoch FROM p.first_seen_at - $2::timestamptz) AS s "
                    "FROM products p WHERE p.source = 'bench' AND p.last_seen_job = $1",
                    reply.job_id,
                    row["created_at"],
                )
                ok = await conn.fetchval(
                    "SELECT count(*) FROM attempts WHERE job_id = $1 AND outcome = 'ok'",
                    reply.job_id,
                )
                stored = await conn.fetchval(
                    "SELECT count(*) FROM attempts a JOIN payloads p ON p.ref = a.payload_ref "
                    "AND p.attempt_id = a.attempt_id WHERE a.job_id = $1 AND a.outcome = 'ok'",
                    reply.job_id,
                )
                products = await conn.fetchval(
                    "SELECT count(*) FROM products WHERE source = 'bench'"
                )
            assert client.nc is not None
            payload_msgs = (
                await client.nc.jetstream().stream_info(client.names.payload_stream)
            ).state.messages
    finally:
        sup.stop()
        await runner
        await pool.close()
        nc = await connect(args.nats, name="bench-teardown", attempts=3)
        await teardown(nc.jetstream(), Names(settings.namespace))
        await nc.close()
        conn = await asyncpg.connect(f"{admin}/postgres")
        await conn.execute(f'DROP DATABASE IF EXISTS "{db}" WITH (FORCE)')
        await conn.close()
    pages = row["counters"].get("total", 0)
    return {
        "status": summary["status"],
        "wall": wall,
        "crawl": (row["finished_at"] - row["created_at"]).total_seconds(),
        "pages": pages,
        "products": products,
        "latency": [r["s"] for r in lat],
        "ok": ok,
        "stored": stored,
        "payload_msgs": payload_msgs,
        "cpu": {n: usage[n][0] - cpu0.get(n, 0.0) for n in usage},
        "rss": {n: usage[n][1] for n in usage},
        "restarts": {n: r for n, (_, r) in procs.items() if r},
    }


async def crawl_with_scrapy(base_urls: list[str], workdir: Path) -> tuple[float, int]:
    out = workdir / "scrapy.jl"
    t0 = time.monotonic()
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "scrapy", "runspider", str(ROOT / "bench" / "scrapy_spider.py"),
        "-a", f"start={','.join(u + '/' for u in base_urls)}",
        "-a", f"hosts={','.join(HOSTS)}", "-O", str(out),
        "-s", "LOG_LEVEL=WARNING",
        cwd=workdir,
    )  # fmt: skip
    await proc.wait()
    wall = time.monotonic() - t0
    items = {json.loads(line)["sku"] for line in out.read_text().splitlines() if line.strip()}
    return wall, len(items)


async def main(args: argparse.Namespace) -> None:
    workdir = Path(tempfile.mkdtemp(prefix="trawl-e2e-bench-"))
    port = _free_port()
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
        f"        trigger→product latency p50 {_pct(t['latency'], 0.5):.1f} s, "
        f"p99 {_pct(t['latency'], 0.99):.1f} s"
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
