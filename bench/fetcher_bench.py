"""Fetcher throughput: ``python -m bench.fetcher_bench [--pages N] [--concurrency 256]``.

One run, all on loopback:

1. the demo shop as its own process (``python -m demo``) on 127.0.0.2;
2. a bare aiohttp GET loop over the shop's pages (the physical limit of this machine);
3. the fetcher alone, as one process (``python -m services.fetcher``), ``fast`` pacing, every
   payload stored: the work is queued first, then the fetcher starts and drains it.

Printed: pages/s of both, the fetcher's CPU ms per page (from /proc, the fetcher process
only), its RSS now and at its peak (VmHWM) with ``--concurrency`` fetches in flight.
Needs NATS on 127.0.0.1:4222; uses (and deletes) its own namespace.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import sys
import time
import uuid
from pathlib import Path

import aiohttp
import msgspec

from schemas.messages import Attempt, FetchPolicy, FetchResult, FetchWork
from shared.bus import connect, encode
from shared.names import Names
from shared.provision import provision, teardown

NATS_URL = "nats://127.0.0.1:4222"
ROOT = Path(__file__).resolve().parent.parent
CLK_TCK = os.sysconf("SC_CLK_TCK")


def _proc(pid: int) -> tuple[float, int, int]:
    """(CPU seconds, RSS bytes, peak RSS bytes) of a process."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    cpu = (int(fields[11]) + int(fields[12])) / CLK_TCK
    status = dict(
        line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines()
    )
    return cpu, int(status["VmRSS"].split()[0]) * 1024, int(status["VmHWM"].split()[0]) * 1024


async def start_shop(products: int) -> tuple[asyncio.subprocess.Process, str]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "demo",
        "--hosts",
        "127.0.0.2",
        "--port",
        "0",
        "--products",
        str(products),
        cwd=ROOT,
        stdout=asyncio.subprocess.PIPE,
    )
    assert proc.stdout is not None
    line = (await asyncio.wait_for(proc.stdout.readline(), 30)).decode()
    return proc, line.split("demo shop:", 1)[1].split()[0]


async def page_urls(base: str, want: int) -> list[str]:
    async with aiohttp.ClientSession() as session, session.get(f"{base}/sitemap.xml") as resp:
        text = await resp.text()
    urls = re.findall(r"<loc>([^<]+)</loc>", text)
    if not urls:
        raise SystemExit("the shop's sitemap lists no pages")
    return [urls[i % len(urls)] for i in range(want)]


async def bare_loop(urls: list[str], concurrency: int) -> float:
    """Pages/s of plain aiohttp GETs reading every body: the ceiling."""
    queue = list(reversed(urls))
    connector = aiohttp.TCPConnector(limit=0)
    async with aiohttp.ClientSession(connector=connector) as session:

        async def worker() -> None:
            while queue:
                async with session.get(queue.pop()) as resp:
                    await resp.read()

        started = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(concurrency)))
        return len(urls) / (time.perf_counter() - started)


async def fetcher_run(urls: list[str], concurrency: int) -> dict[str, float]:
    ns = f"bench{uuid.uuid4().hex[:8]}"
    names = Names(ns)
    nc = await connect(NATS_URL, name="fetcher-bench", attempts=3)
    js = nc.jetstream()
    await provision(js, names)
    policy = FetchPolicy(robots=True, allow_private=["127.0.0.2/32"], max_in_flight=concurrency)
    decode = msgspec.json.Decoder(FetchResult).decode
    outcomes: dict[str, int] = {}
    stored = 0
    done = asyncio.Event()
    first_at = 0.0
    last_at = 0.0
    cpu_first = 0.0
    proc = None

    async def on_result(msg) -> None:
        nonlocal stored, first_at, last_at, cpu_first
        result = decode(msg.data)
        now = time.perf_counter()
        if not first_at:
            first_at, cpu_first = now, _proc(proc.pid)[0]
        last_at = now
        outcomes[result.outcome] = outcomes.get(result.outcome, 0) + 1
        stored += result.payload_ref is not None
        if sum(outcomes.values()) == len(urls):
            done.set()

    try:
        sub = await nc.subscribe(names.fetched, cb=on_result, pending_bytes_limit=256 * 2**20)
        # Queue everything first: the fetcher then runs flat out, as with a full fetch stream.
        acks = []
        for i, url in enumerate(urls):
            work = FetchWork(
                attempt=Attempt(job_id=1, entry_id=i, source="bench", url=url),
                domain="127.0.0.2",
                policy=policy,
            )
            acks.append(js.publish(names.fetch, encode(work)))
            if len(acks) == 500:
                await asyncio.gather(*acks)
                acks = []
        await asyncio.gather(*acks)
        env = dict(os.environ)
        env.update(
            {
                "NATS_URL": NATS_URL,
                "TRAWL_NAMESPACE": ns,
                "TRAWL_CONCURRENCY": str(max(1, concurrency // 4)),  # the fetcher runs 4x
                "TRAWL_LOG_LEVEL": "WARNING",
                "PYTHONPATH": str(ROOT),
            }
        )
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "services.fetcher", env=env, cwd=ROOT
        )
        await asyncio.wait_for(done.wait(), 600)
        cpu_last, rss, peak = _proc(proc.pid)
        await sub.unsubscribe()
    finally:
        if proc is not None:
            proc.terminate()
            await proc.wait()
        await teardown(js, names)
        await nc.close()
    # From the first result to the last: start-up (imports, provisioning) is not fetching.
    n = len(urls) - 1
    elapsed = max(1e-9, last_at - first_at)
    return {
        "pages_per_s": n / elapsed,
        "cpu_ms_per_page": (cpu_last - cpu_first) * 1000 / n,
        "rss_mib": rss / 2**20,
        "peak_rss_mib": peak / 2**20,
        "stored": stored,
        "outcomes": outcomes,  # type: ignore[dict-item]
    }


async def main(args: argparse.Namespace) -> None:
    shop, base = await start_shop(args.products)
    try:
        urls = await page_urls(base, args.pages)
        await bare_loop(urls[: min(500, len(urls))], args.concurrency)  # warm the shop's cache
        bare = await bare_loop(urls, args.concurrency)
        figures = await fetcher_run(urls, args.concurrency)
    finally:
        shop.terminate()
        await shop.wait()
    print(f"pages                      {len(urls)} ({len(set(urls))} distinct)")
    print(f"bare aiohttp GET loop      {bare:8.0f} pages/s  ({args.concurrency} concurrent)")
    print(f"fetcher, payloads stored   {figures['pages_per_s']:8.0f} pages/s")
    print(f"fetcher CPU                {figures['cpu_ms_per_page']:8.2f} ms/page")
    rss, peak = figures["rss_mib"], figures["peak_rss_mib"]
    print(f"fetcher RSS                {rss:8.0f} MiB (peak {peak:.0f})")
    print(f"payloads stored            {figures['stored']:8d}   outcomes {figures['outcomes']}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(prog="python -m bench.fetcher_bench", description=__doc__)
    parser.add_argument("--pages", type=int, default=20000)
    parser.add_argument("--products", type=int, default=5000)
    parser.add_argument("--concurrency", type=int, default=256)
    asyncio.run(main(parser.parse_args()))
