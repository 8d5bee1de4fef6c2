"""Rendering throughput and memory: the demo shop's JavaScript-only section crawled by one
renderer (headless Debian Chromium).

    python -m bench.render_bench [--products 120] [--contexts 4]

Prints pages rendered per second (wall, trigger → products applied), the renderer's CPU per
page (its own process plus the browser's, from /proc), and the peak proportional memory (PSS)
of the renderer process and of its browser's processes together, sampled through the crawl.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import tempfile
import time
from pathlib import Path

from bench.harness import TrawlStack, proc_cpu, processes
from control.supervisor import chromium_installed
from demo.shop import DemoShop

DATABASE = os.environ.get("DATABASE_URL", "postgresql://root@127.0.0.1:5432/postgres")
NATS = os.environ.get("NATS_URL", "nats://127.0.0.1:4222")
SAMPLE_EVERY = 0.2


def tree(root: int) -> list[int]:
    below: dict[int, list[int]] = {}
    for pid, _, ppid in processes():
        below.setdefault(ppid, []).append(pid)
    found, todo = [root], [root]
    while todo:
        for child in below.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def tree_cpu_all(root: int) -> float:
    """CPU seconds of ``root`` and every live descendant (each with what it has reaped)."""
    total = 0.0
    for pid in tree(root):
        try:
            total += proc_cpu(pid, children=True)
        except OSError:
            continue
    return total


def pss_kb(pids: list[int]) -> int:
    """Proportional set size: shared pages split among the processes that share them, so the
    browser's many processes are not counted several times over."""
    total = 0
    for pid in pids:
        try:
            for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
                if line.startswith("Pss:"):
                    total += int(line.split()[1])
                    break
        except (OSError, IndexError, ValueError):
            continue
    return total


async def main(args: argparse.Namespace) -> None:
    os.environ["TRAWL_RENDER_CONTEXTS"] = str(args.contexts)
    async with DemoShop(hosts=("127.0.0.2", "127.0.0.3"), port=0, products=args.products) as shop:
        source = shop.js_source_definition("bench-js")
        with tempfile.TemporaryDirectory() as logs:
            scale = {"scheduler": 1, "fetcher": 1, "renderer": 1, "parser": 1, "refresher": 1}
            scale["api"] = 0
            async with TrawlStack(
                database=DATABASE, nats=NATS, source=source, scale=scale, log_dir=Path(logs)
            ) as stack:
                renderer = next(c for c in stack.supervisor.children if c.name == "renderer-0")
                assert renderer.proc is not None
                pid = renderer.proc.pid
                cpu0 = tree_cpu_all(pid)
                peak_own = peak_browser = 0
                done = asyncio.Event()

                async def sample() -> None:
                    nonlocal peak_own, peak_browser
                    while not done.is_set():
                        pids = tree(pid)
                        peak_own = max(peak_own, pss_kb([pid]))
                        peak_browser = max(peak_browser, pss_kb(pids[1:]))
                        await asyncio.sleep(SAMPLE_EVERY)

                sampler = asyncio.create_task(sample())
                t0 = time.monotonic()
                crawl = await stack.crawl("bench-js")
                wall = time.monotonic() - t0
                cpu = tree_cpu_all(pid) - cpu0
                done.set()
                await sampler
                products = await stack.client.products("bench-js")
        pages = len(shop.catalog.categories) + len(shop.truth())
    print(f"status {crawl.status}; products {len(products)} of {len(shop.truth())}")
    print(f"pages rendered         {pages}")
    print(f"pages/s (one renderer) {pages / wall:.2f}   (contexts {args.contexts})")
    print(f"CPU ms/page            {cpu * 1000 / pages:.0f}   (renderer + browser)")
    print(f"peak PSS renderer      {peak_own / 1024:.0f} MB")
    print(f"peak PSS browser       {peak_browser / 1024:.0f} MB   (all its processes)")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--products", type=int, default=120)
    parser.add_argument("--contexts", type=int, default=4)
    return parser.parse_args(argv)


if __name__ == "__main__":
    if not chromium_installed():
        print("render_bench: skipped, no Chromium or Playwright here (apt-get install chromium)")
    else:
        asyncio.run(main(parse_args()))
