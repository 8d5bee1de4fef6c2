"""The local stack behind ``trawl up`` and ``trawl demo``: migrate, supervise the services (and
the demo shop), and for the demo: apply its source, crawl it, show what was found."""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
import urllib.request
from pathlib import Path

from control.supervisor import DEMO_HOSTS, DEMO_PORT, Supervisor, parse_scale
from migrations.runner import migrate
from shared.settings import Settings

DEMO_SOURCE = "demo-shop"


async def run_stack(
    settings: Settings,
    *,
    scale: str | None,
    demo: bool,
    log_dir: Path,
    crawl: bool,
    keep: bool = False,
) -> int:
    from control.cli import install_stop

    await migrate(settings.database_url)
    replicas = parse_scale(scale)
    sup = Supervisor(scale=replicas, demo=demo, log_dir=log_dir)
    install_stop(sup.stop)
    await sup.start()
    runner = asyncio.create_task(sup.run(), name="supervisor")
    code = 0
    try:
        names = ", ".join(c.name for c in sup.children)
        print(f"trawl: started {names} (logs in {log_dir}/)", flush=True)
        if demo:
            await _apply_demo_source(settings)
            print(
                f"trawl: demo shop at http://{DEMO_HOSTS[0]}:{DEMO_PORT}/ and "
                f"http://{DEMO_HOSTS[1]}:{DEMO_PORT}/; source {DEMO_SOURCE!r} applied",
                flush=True,
            )
        if crawl:
            code = await _crawl_and_show(settings, replicas)
            if not keep:
                sup.stop()
        if not crawl or keep:
            print("trawl: running; Ctrl-C stops everything", flush=True)
        await runner
    finally:
        sup.stop()
        with contextlib.suppress(asyncio.CancelledError):
            await runner
    return code


async def _apply_demo_source(settings: Settings) -> None:
    """Ask the running shop for its own source definition and store it."""
    from control.sources import apply_source
    from shared.db import open_pool
    from shared.sources import source_from_dict

    url = f"http://{DEMO_HOSTS[0]}:{DEMO_PORT}/_shop/source"
    definition = None
    for _ in range(100):  # the shop starts in well under a second; allow a slow machine
        try:
            definition = await asyncio.to_thread(_get_json, url)
            break
        except OSError:
            await asyncio.sleep(0.1)
    if definition is None:
        raise RuntimeError(f"the demo shop did not answer at {url}")
    definition["name"] = DEMO_SOURCE
    source = source_from_dict(definition)
    pool = await open_pool(settings.database_url, min_size=1, max_size=1, attempts=5)
    async with pool, pool.acquire() as conn:
        await apply_source(conn, source)


def _get_json(url: str) -> dict:
    with urllib.request.urlopen(url, timeout=2) as resp:
        return json.loads(resp.read())


async def _crawl_and_show(settings: Settings, scale: dict[str, int]) -> int:
    from control.client import TrawlClient

    async with TrawlClient(settings) as client:
        await client.wait_for_workers(scale, timeout=60)  # every service registered
        reply = await client.trigger(DEMO_SOURCE)
        if reply.error:
            print(f"trawl: {reply.error}", file=sys.stderr)
            return 1
        print(f"trawl: crawling {DEMO_SOURCE} as job {reply.job_id}", flush=True)
        assert reply.job_id is not None  # a reply without an error names its job
        summary = await client.wait(reply.job_id, timeout=600, progress=True)
        products = await client.products(DEMO_SOURCE)
        TrawlClient.print_products(DEMO_SOURCE, products)
        TrawlClient.print_summary(summary)
        if summary["status"] != "completed":
            return 1
        # The shop's next epoch changes prices and stock; a refresh records it, so the
        # dashboard's product pages have a price history to chart from the start.
        await asyncio.to_thread(_post, f"http://{DEMO_HOSTS[0]}:{DEMO_PORT}/_shop/epoch?n=1")
        reply = await client.trigger(DEMO_SOURCE, kind="refresh")
        if reply.error or reply.job_id is None:
            print(f"trawl: {reply.error}", file=sys.stderr)
            return 1
        print(f"trawl: the shop changed (epoch 1); refreshing as job {reply.job_id}", flush=True)
        summary = await client.wait(reply.job_id, timeout=600, progress=True)
        TrawlClient.print_summary(summary)
        print(
            f"trawl: dashboard at http://{settings.api_listen}/ "
            "(products, price history, jobs, changes)",
            flush=True,
        )
        return 0 if summary["status"] == "completed" else 1


def _post(url: str) -> None:
    with urllib.request.urlopen(urllib.request.Request(url, method="POST"), timeout=5):
        pass
