"""Dashboard first paint and export memory with a large catalog:
``python -m bench.dashboard_bench [--products 100000] [--rounds 5] [--export-rows 1000000]``.

In a scratch database (removed afterwards) on the local Postgres and NATS, it writes a catalog
of N products over four sources (a fifth of them sharing GTINs), a price history, 300 alert
rules on single products, 200 finished jobs and 100k attempts; starts the admin API as its own
process (``python -m control.api``) and loads every dashboard page in headless Chromium
(Debian's ``chromium``), each as a fresh document load, ``--rounds`` times in turn. Per page it
prints the medians of

- first contentful paint (the browser's ``first-contentful-paint`` entry),
- first rows: when the first of its tables was drawn (``performance.mark("rows:<page>")``;
  only the overview draws its tables one by one, the other pages draw all at once), and
- data on screen: when the page marked itself ready (``performance.mark("ready:<page>")``,
  set once its API answers are rendered),

all in milliseconds from navigation start. Then it exports ``--export-rows`` snapshot rows
through ``trawl export --history`` (CSV and Parquet) and prints the CLI's peak RSS, to show
memory stays flat whatever the row count (compare with ``--export-rows 100000``).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path
from urllib.request import urlopen

import asyncpg

from bench.harness import ROOT, free_port
from tests.support.browser import Browser

PG = os.environ.get("DATABASE_URL", "postgresql://root@127.0.0.1:5432/trawl").rsplit("/", 1)[0]
NATS = os.environ.get("NATS_URL", "nats://127.0.0.1:4222")
TOKEN = "bench-token"
SOURCES = ("alpha", "bravo", "charlie", "delta")

SOURCES_SQL = """
INSERT INTO sources (name, definition)
SELECT s, jsonb_build_object('name', s, 'seeds', jsonb_build_array('http://127.0.0.9/'))
FROM unnest($1::text[]) AS s
"""
PRODUCTS = """
INSERT INTO products (source, key, sku, gtin, name, brand, price, sale_price, currency,
                      availability, url, first_seen_at, last_seen_at, updated_at)
SELECT ($1::text[])[1 + i % 4], 'K' || lpad(i::text, 7, '0'), 'SKU' || i,
       CASE WHEN i % 5 = 0 THEN '40' || lpad((i / 4)::text, 11, '0') END,
       'Product ' || md5(i::text), 'Brand ' || (i % 97), (5 + (i * 7919) % 50000) / 100.0,
       CASE WHEN i % 11 = 0 THEN (4 + (i * 7919) % 40000) / 100.0 END, 'EUR',
       CASE WHEN i % 9 = 0 THEN 'out_of_stock' ELSE 'in_stock' END,
       'http://127.0.0.9/p/' || i, now() - interval '30 days',
       now() - (i % 1000) * interval '1 min', now() - (i % 5000) * interval '1 min'
FROM generate_series(1, $2::int) AS i
"""
JOBS = """
INSERT INTO jobs (source, kind, status, definition, created_at, finished_at, counters)
SELECT ($1::text[])[1 + j % 4], 'refresh', 'completed', '{}', now() - (200 - j) * interval '1 h',
       now() - (200 - j) * interval '1 h' + interval '9 min',
       jsonb_build_object('total', 5000, 'open', 0, 'done', 4900, 'failed', 100, 'products', 4800)
FROM generate_series(1, 200) AS j
"""
ATTEMPTS = """
INSERT INTO entries (job_id, url, domain, priority, rank, state)
SELECT j.id, 'http://127.0.0.9/p/' || e, '127.0.0.9', 0, 0, 'done'
FROM (SELECT id FROM jobs ORDER BY id DESC LIMIT 20) j, generate_series(1, 5000) AS e;

INSERT INTO attempts (attempt_id, entry_id, job_id, url, outcome, status, error, recorded_at)
SELECT e.id || '.1', e.id, e.job_id, e.url,
       CASE WHEN e.id % 50 = 0 THEN 'server_error' ELSE 'ok' END,
       CASE WHEN e.id % 50 = 0 THEN 503 ELSE 200 END,
       CASE WHEN e.id % 50 = 0 THEN 'upstream unavailable' END,
       j.created_at + (e.id % 540) * interval '1 s'
FROM entries e JOIN jobs j ON j.id = e.job_id;
"""
# Alert rules on a few hundred products, none on a whole source: the "has alerts" filter's
# hard case, where few rows match and the list must look through all of them.
ALERTS = """
INSERT INTO alert_rules (source, product_key, variant_key, gtin, condition, webhook, secret)
SELECT ($1::text[])[1 + i % 4],
       CASE WHEN i % 3 = 0 THEN 'K' || lpad(i::text, 7, '0') END,
       CASE WHEN i % 3 = 2 THEN 'K' || lpad(i::text, 7, '0') || '#m' END,
       CASE WHEN i % 3 = 1 THEN '40' || lpad((i / 4)::text, 11, '0') END,
       'change', 'http://127.0.0.9/hook', 'bench'
FROM generate_series(5, $2::int, 335) AS i
"""
# Every 40th product (all of source alpha) a group of three sizes, each a product row of its
# own (variant_of, migration 0019) with its own history: the product page's series.
VARIANTS = """
INSERT INTO products (source, key, variant_of, sku, name, price, currency, availability, url,
                      attributes, first_seen_at, last_seen_at, updated_at)
SELECT p.source, p.key || '#' || v, p.key, p.sku || '-' || v, p.name || ' ' || v, p.price + v,
       'EUR', CASE WHEN v = 3 THEN 'out_of_stock' ELSE 'in_stock' END, p.url,
       jsonb_build_object('size', (ARRAY['S', 'M', 'L'])[v]), p.first_seen_at, p.last_seen_at,
       p.updated_at
FROM products p, generate_series(1, 3) AS v
WHERE right(p.key, 7)::int % 40 = 0
"""
HISTORY = """
INSERT INTO snapshots (source, key, job_id, price, sale_price, currency, availability,
                       observed_at)
SELECT p.source, p.key, NULL, round(p.price * (1 + (n % 3) / 10.0), 2), p.sale_price, 'EUR',
       CASE WHEN n % 4 = 3 THEN 'out_of_stock' ELSE 'in_stock' END,
       now() - (40 - n) * interval '1 day'
FROM products p, generate_series(1, $1::int) AS n
WHERE $2::text IS NULL OR p.source = $2
"""


async def seed(dsn: str, products: int, export_rows: int) -> tuple[str, str]:
    conn = await asyncpg.connect(dsn)
    try:
        started = time.perf_counter()
        await conn.execute("SET synchronous_commit = off")
        await conn.execute(SOURCES_SQL, list(SOURCES))
        await conn.execute(PRODUCTS, list(SOURCES), products)
        await conn.execute(JOBS, list(SOURCES))
        await conn.execute(ATTEMPTS)
        await conn.execute(ALERTS, list(SOURCES), products)
        await conn.execute(VARIANTS)
        # Every product 3 snapshots; the exported source ("alpha", a quarter of the catalog)
        # as many more as the export's rows need.
        await conn.execute(HISTORY, 3, None)
        per_product = -(-max(0, export_rows - 3 * products // 4) // max(1, products // 4))
        if per_product:
            await conn.execute(HISTORY, per_product, "alpha")
        await conn.execute("ANALYZE")
        key, grouped = await conn.fetchrow(
            "SELECT min(key) FILTER (WHERE key NOT LIKE '%#%'),"
            " min(variant_of) FILTER (WHERE variant_of IS NOT NULL)"
            " FROM products WHERE source = 'alpha'"
        )
        rows = await conn.fetchval("SELECT count(*) FROM snapshots")
        took = time.perf_counter() - started
        variants = products // 40 * 3
        print(
            f"seeded {products:,} products (and {variants:,} variant rows), {rows:,} snapshots"
            f" in {took:.1f} s"
        )
        return key, grouped
    finally:
        await conn.close()


PAGES = [
    ("overview", "", "overview"),
    ("products", "#/products", "products"),
    ("products by price", "#/products?sort=price", "products"),
    ("products search", "#/products?q=abc", "products"),
    ("products, alerts", "#/products?has_alerts=true", "products"),
    ("product", "#/product/alpha/{key}", "product"),
    ("product, variants", "#/product/alpha/{grouped}", "product"),
    ("changes", "#/changes", "changes"),
    ("jobs", "#/jobs", "jobs"),
    ("job", "#/job/200", "job"),
    ("sources", "#/sources", "sources"),
    ("match", "#/match", "match"),
]


def cpu_ms(pid: int) -> float:
    """A process's user + system CPU time so far (/proc/<pid>/stat), in milliseconds."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) * 1000 / os.sysconf("SC_CLK_TCK")


async def paint(base: str, keys: dict[str, str], rounds: int, shots: Path, api_pid: int) -> None:
    timings: dict[str, list[tuple[float, float, float, float]]] = {n: [] for n, _, _ in PAGES}
    with tempfile.TemporaryDirectory() as profile:
        async with Browser(Path(profile)) as browser:
            await browser.send("Page.enable")
            await browser.send("Page.navigate", url=f"{base}/static/index.html")
            await wait(browser, "document.readyState === 'complete'")
            await browser.eval(f"localStorage.setItem('trawl-token', {json.dumps(TOKEN)}); true")
            loads = 0
            for r in range(rounds):
                for name, fragment, ready in PAGES:
                    # A new query string each time: a full document load, not a hash change.
                    loads += 1
                    url = f"{base}/?interval=600000&load={loads}{fragment.format(**keys)}"
                    cpu = cpu_ms(api_pid)
                    await browser.send("Page.navigate", url=url)
                    # Ready can come before the first paint (data in under a frame): the
                    # paint entry is then not there yet, so wait for both.
                    await wait(
                        browser,
                        f"document.body && document.body.dataset.ready === '{ready}'"
                        " && performance.getEntriesByName('first-contentful-paint').length",
                    )
                    fcp, rows, shown = await browser.eval(
                        "[(performance.getEntriesByName('first-contentful-paint')[0] || {})"
                        f".startTime, (performance.getEntriesByName('rows:{ready}')[0] || {{}})"
                        f".startTime, performance.getEntriesByName('ready:{ready}')[0].startTime]"
                    )
                    timings[name].append((fcp or 0.0, rows or shown, shown, cpu_ms(api_pid) - cpu))
                    if r == rounds - 1:
                        shot = name.replace(",", "").replace(" ", "-")
                        await browser.screenshot(shots / f"{shot}.png")
    print(
        f"\n{'page':20} {'first paint':>12} {'first rows':>11} {'data shown':>11} {'API CPU':>8}"
        f"   ms, median of {rounds}"
    )
    for name, values in timings.items():
        fcp, rows, shown, cpu = (statistics.median(v[i] for v in values) for i in range(4))
        print(f"{name:20} {fcp:12.0f} {rows:11.0f} {shown:11.0f} {cpu:8.0f}")
    print(f"screenshots: {shots}")


async def wait(browser: Browser, expr: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not await browser.eval(f"!!({expr})"):
        if time.monotonic() > deadline:
            raise SystemExit(f"timed out waiting for {expr}")
        await asyncio.sleep(0.01)  # polls the page; the timings come from the page itself


async def export_memory(env: dict[str, str], tmp: Path) -> None:
    for fmt in ("csv", "parquet"):
        out = tmp / f"history.{fmt}"
        code = (
            "import resource, sys; from control.cli import main\n"
            "try:\n    main(sys.argv[1:])\n"
            "finally:\n"
            "    print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, file=sys.stderr)"
        )
        started = time.perf_counter()
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-c",
            code,
            "export",
            "alpha",
            "--history",
            "--format",
            fmt,
            "-o",
            str(out),
            env=env,
            stderr=asyncio.subprocess.PIPE,
        )
        _, err = await proc.communicate()
        took = time.perf_counter() - started
        rss_kb = int(err.decode().strip().splitlines()[-1])
        size = out.stat().st_size / 1e6
        print(
            f"export alpha --history --format {fmt:8} {size:8.1f} MB in {took:5.1f} s, "
            f"peak RSS {rss_kb / 1024:6.1f} MB"
        )


async def query_times(dsn: str, grouped: str) -> None:
    """Postgres's own execution time of the product list's queries at this size (EXPLAIN
    ANALYZE, median of 5): what the database adds to a page, apart from the machine's load."""
    from services.refresher import store

    conn = await asyncpg.connect(dsn)
    try:
        queries = await store.all_queries(conn)
        cases = [
            ("first page by key", "products_by_key", [None] * 9 + [51]),
            ("first page by price", "products_by_price", [None] * 9 + [51]),
            ("search 'abc' by key", "products_by_key", [None, None, "abc"] + [None] * 6 + [51]),
            ("has alerts by key", "products_by_key", [None] * 5 + [True] + [None] * 3 + [51]),
            ("has alerts by price", "products_by_price", [None] * 5 + [True] + [None] * 3 + [51]),
            ("count, no filter", "count_view_products", [None] * 6),
            ("count, search", "count_view_products", [None, None, "abc", None, None, None]),
            ("count, has alerts", "count_view_products", [None] * 5 + [True]),
            ("history with 3 variants", "product_history", ["alpha", grouped, None, None, 1001]),
        ]
        print(f"\n{'query (100k products)':28} {'execution ms':>12}")
        for label, name, args in cases:
            took = []
            for _ in range(5):
                plan = await conn.fetchval("EXPLAIN (ANALYZE, FORMAT JSON) " + queries[name], *args)
                took.append(json.loads(plan)[0]["Execution Time"])
            print(f"{label:28} {statistics.median(took):12.1f}")
    finally:
        await conn.close()


def healthy(url: str, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            with urlopen(url, timeout=1):
                return
        except OSError:
            if time.monotonic() > deadline:
                raise SystemExit("the API did not start") from None
            time.sleep(0.1)


async def main(args: argparse.Namespace) -> None:
    from migrations.runner import migrate

    name = f"trawl_bench_{uuid.uuid4().hex[:8]}"
    dsn = f"{PG}/{name}"
    await migrate(dsn)
    listen = f"127.0.0.1:{free_port()}"
    env = {
        **os.environ,
        "DATABASE_URL": dsn,
        "NATS_URL": NATS,
        "TRAWL_NAMESPACE": f"bench{uuid.uuid4().hex[:8]}",
        "TRAWL_API_LISTEN": listen,
        "TRAWL_API_TOKEN": TOKEN,
        "TRAWL_LOG_LEVEL": "WARNING",
        "PYTHONPATH": str(ROOT),
    }
    api = None
    try:
        key, grouped = await seed(dsn, args.products, args.export_rows)
        api = await asyncio.create_subprocess_exec(sys.executable, "-m", "control.api", env=env)
        await asyncio.to_thread(healthy, f"http://{listen}/healthz")
        shots = ROOT / "test-artifacts" / "dashboard-bench"
        keys = {"key": key, "grouped": grouped}
        await paint(f"http://{listen}", keys, args.rounds, shots, api.pid)
        await query_times(dsn, grouped)
        if args.export_rows:
            with tempfile.TemporaryDirectory() as tmp:
                await export_memory(env, Path(tmp))
    finally:
        if api is not None:
            api.terminate()
            await api.wait()
        conn = await asyncpg.connect(f"{PG}/postgres")
        try:
            await conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        finally:
            await conn.close()


def parse_args() -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--products", type=int, default=100_000)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--export-rows", type=int, default=1_000_000, help="0: skip the export")
    return ap.parse_args()


if __name__ == "__main__":
    asyncio.run(main(parse_args()))
