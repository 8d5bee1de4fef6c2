"""trawl against Scrapy on a static shop served by nginx (issue 13):
``python -m bench.static_bench [--products 5000] [--rounds 3]``.

Generates the site of ``bench/static_site.py`` into a temporary directory, serves it with its
own nginx process (Debian's ``nginx-light``, installed with apt-get when ``nginx`` is missing;
loopback, gzip, keep-alive), then crawls it in alternating rounds — trawl, Scrapy, trawl, … —
and prints, per round and as medians:

- the ratio of wall times, trawl / Scrapy (trawl: trigger → the job completed and its products
  applied, the services already running; Scrapy: the process's start → exit);
- CPU ms per page of each trawl service process, of nats-server and of PostgreSQL (the server
  and every backend, from /proc before and after the crawl; "bench db" is the part spent by the
  backends of the round's own database, which stays readable when other work shares the
  server), of Scrapy, and of nginx serving each;
- peak RSS (VmHWM) of each process;
- completeness: the job's entries (and how many robots.txt settled at admission, never
  dispatched), every ok fetch has a stored payload, every product of the site's truth is in
  Postgres with the truth's price, Scrapy's items, and whether both fetched the same pages
  (from nginx's access log).

trawl runs as ``trawl up`` does (the four services and the admin API as processes under the
Supervisor), on a fresh database and namespace each round, removed afterwards; ``fast`` pacing
(32 requests in flight), images off (the spider fetches none). Scrapy runs the spider of
``bench/scrapy_spider.py`` at 128 concurrent requests, dropping tracking parameters as trawl
does. "Pages" are the pages each crawler fetched with status 200 (robots.txt not counted).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import resource
import shutil
import statistics
import subprocess
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any

from bench import static_site
from bench.harness import (
    TrawlStack,
    free_port,
    pids_named,
    postmaster_pid,
    proc_cpu,
    proc_hwm,
    processes,
    run_scrapy,
    tree_cpu,
)
from control.supervisor import parse_scale
from services.scheduler.store.frontier import ROBOTS_ERROR

HOST = "127.0.0.2"
SOURCE = "static"
TRACKING_PARAMS = "utm_*,gclid,fbclid,msclkid"  # what trawl drops itself (shared.urls)

NGINX_CONF = """\
worker_processes auto;
daemon off;
master_process on;
pid {run}/nginx.pid;
error_log {run}/error.log warn;
events {{ worker_connections 4096; }}
http {{
    types {{ text/html html; text/plain txt; application/json json; }}
    default_type application/octet-stream;
    log_format bench '$msec $status $body_bytes_sent "$request_uri" "$http_user_agent"';
    access_log {run}/access.log bench;
    client_body_temp_path {run}/tmp/body;
{module_temp_paths}
    sendfile on;
    tcp_nopush on;
    tcp_nodelay on;
    keepalive_timeout 65s;
    keepalive_requests 100000;
    # Bounded well below the workers' descriptor limit (``_file_cache``): each cached file
    # holds a descriptor, and once a worker ran out, try_files took the failed open for a
    # missing file and answered 404 (895 "gone" pages of a 20k crawl at max=100000).
    open_file_cache max={file_cache} inactive=60s;
    open_file_cache_valid 300s;
    gzip on;
    gzip_comp_level 1;
    gzip_min_length 1024;
    gzip_types text/plain application/json;
    gzip_vary on;
    server {{
        listen {host}:{port};
        server_name _;
        root {site};
        index index.html;
        location / {{ try_files $uri $uri/ =404; }}
    }}
}}
"""


# -- nginx --------------------------------------------------------------------------------------
def ensure_nginx() -> str:
    """The nginx binary; installs Debian's ``nginx-light`` when there is none (needs root)."""
    found = shutil.which("nginx") or shutil.which("nginx", path="/usr/sbin:/usr/local/sbin")
    if found:
        return found
    if os.geteuid() != 0:
        raise SystemExit("nginx is missing: apt-get install nginx-light (as root), then re-run")
    print("installing nginx-light with apt-get …", flush=True)
    # RUNLEVEL=1: the package's postinst starts no system nginx; this bench runs its own.
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive", "RUNLEVEL": "1"}
    install = ["apt-get", "install", "-y", "-qq", "--no-install-recommends", "nginx-light"]
    if subprocess.call(install, env=env) != 0:  # stale package lists: update once, retry
        subprocess.check_call(["apt-get", "update", "-qq"], env=env)
        subprocess.check_call(install, env=env)
    found = shutil.which("nginx", path="/usr/sbin:/usr/local/sbin:/usr/bin")
    if not found:
        raise SystemExit("nginx-light installed but no nginx binary found")
    return found


def _module_temp_paths(binary: str, run: Path) -> str:
    """Temp paths for the proxy-like modules this nginx build has (nginx-light lacks some,
    and a directive of a missing module is a configuration error)."""
    configure = subprocess.run([binary, "-V"], capture_output=True, text=True).stderr
    lines = []
    for module in ("proxy", "fastcgi", "uwsgi", "scgi"):
        if f"--without-http_{module}_module" not in configure:
            lines.append(f"    {module}_temp_path {run}/tmp/{module};")
    return "\n".join(lines)


def _file_cache() -> int:
    """Open-file cache entries: a quarter of the descriptors a worker may hold, at most 4,096."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    return max(64, min(4096, soft // 4))


class Nginx:
    """Our own nginx process (``daemon off``) serving ``site`` on ``host:port``."""

    def __init__(self, binary: str, site: Path, run: Path, host: str, port: int) -> None:
        self.binary, self.site, self.run, self.host, self.port = binary, site, run, host, port
        self.proc: asyncio.subprocess.Process | None = None
        self.access_log = run / "access.log"

    @property
    def base(self) -> str:
        return f"http://{self.host}:{self.port}"

    async def __aenter__(self) -> Nginx:
        (self.run / "tmp").mkdir(parents=True, exist_ok=True)
        conf = self.run / "nginx.conf"
        conf.write_text(
            NGINX_CONF.format(
                run=self.run,
                site=self.site,
                host=self.host,
                port=self.port,
                module_temp_paths=_module_temp_paths(self.binary, self.run),
                file_cache=_file_cache(),
            )
        )
        self.access_log.touch()
        self.proc = await asyncio.create_subprocess_exec(
            self.binary, "-p", str(self.run), "-c", str(conf), "-e", str(self.run / "error.log"),
            stdin=asyncio.subprocess.DEVNULL,
        )  # fmt: skip
        deadline = time.monotonic() + 15
        while True:
            with contextlib.suppress(OSError):
                _, writer = await asyncio.open_connection(self.host, self.port)
                writer.close()
                await writer.wait_closed()
                return self
            if self.proc.returncode is not None or time.monotonic() > deadline:
                errors = (self.run / "error.log").read_text(errors="replace")[-2000:]
                raise RuntimeError(f"nginx did not start:\n{errors}")
            await asyncio.sleep(0.05)

    async def __aexit__(self, *exc: object) -> None:
        if self.proc is not None and self.proc.returncode is None:
            self.proc.terminate()  # SIGTERM: fast shutdown
            await self.proc.wait()

    def cpu(self) -> float:
        """CPU seconds of the master and its workers so far."""
        assert self.proc is not None
        return tree_cpu(self.proc.pid)

    def log_offset(self) -> int:
        return self.access_log.stat().st_size

    def requests(self, start: int, end: int) -> Requests:
        """The requests logged between two offsets of the access log."""
        with self.access_log.open("rb") as f:
            f.seek(start)
            data = f.read(end - start).decode(errors="replace")
        out = Requests()
        for line in data.splitlines():
            stamp, status, _, rest = line.split(" ", 3)
            uri = rest[1 : rest.index('"', 1)]
            t = float(stamp)
            out.first = min(out.first, t)
            out.last = max(out.last, t)
            if uri == "/robots.txt":
                continue
            out.statuses[status] += 1
            if status == "200":
                out.pages[uri] += 1
        return out


@dataclass
class Requests:
    pages: Counter[str] = field(default_factory=Counter)  # path → times fetched with 200
    statuses: Counter[str] = field(default_factory=Counter)
    first: float = float("inf")
    last: float = 0.0

    @property
    def count(self) -> int:
        return sum(self.pages.values())

    @property
    def duplicates(self) -> int:
        return self.count - len(self.pages)

    @property
    def span(self) -> float:
        return max(0.0, self.last - self.first)


# -- PostgreSQL and NATS ------------------------------------------------------------------------
class PgSampler:
    """CPU of PostgreSQL while a crawl runs: the whole server (postmaster, every backend and
    helper, live or exited) from two readings, and the part spent by the backends of one
    database, sampled every ``interval`` so that backends which exit in between still count
    up to their last sample."""

    def __init__(self, database: str, interval: float = 0.5) -> None:
        self.database = database
        self.interval = interval
        self.postmaster = postmaster_pid()
        self.first: dict[int, float] = {}
        self.last: dict[int, float] = {}
        self.hwm = 0
        self.total0 = self.total1 = 0.0
        self._task: asyncio.Task[None] | None = None

    def _sample(self) -> None:
        for pid, _, ppid in processes():
            if ppid != self.postmaster:
                continue
            try:
                cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
                if f" {self.database} ".encode() not in cmdline:
                    continue
                cpu = proc_cpu(pid)
                self.hwm = max(self.hwm, proc_hwm(pid))
            except OSError:
                continue
            self.first.setdefault(pid, cpu)
            self.last[pid] = cpu

    async def _run(self) -> None:
        while True:
            self._sample()
            await asyncio.sleep(self.interval)

    def start(self) -> None:
        if self.postmaster is None:
            return
        self.total0 = tree_cpu(self.postmaster)
        self._sample()
        self._task = asyncio.create_task(self._run(), name="pg-sampler")

    async def stop(self) -> None:
        if self._task is None or self.postmaster is None:
            return
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task
        self._sample()
        self.total1 = tree_cpu(self.postmaster)

    @property
    def total(self) -> float:
        return self.total1 - self.total0

    @property
    def ours(self) -> float:
        return sum(self.last[pid] - self.first[pid] for pid in self.last)


def nats_cpu() -> tuple[float, int]:
    """(CPU seconds, peak RSS kB) of the nats-server process(es) on this machine."""
    cpu, hwm = 0.0, 0
    for pid in pids_named("nats-server"):
        with contextlib.suppress(OSError):
            cpu += proc_cpu(pid)
            hwm = max(hwm, proc_hwm(pid))
    return cpu, hwm


# -- rounds -------------------------------------------------------------------------------------
@dataclass
class Round:
    crawler: str
    wall: float
    pages: int  # fetched with status 200, robots.txt not counted
    cpu: dict[str, float]  # component → CPU seconds
    rss: dict[str, int]  # process → peak RSS kB
    requests: Requests
    lines: list[str]  # completeness, as printed


def _compare(truth: dict[str, Decimal], found: dict[str, Decimal | None]) -> tuple[int, int]:
    """(products of the truth missing, products present with another price)."""
    missing = sum(1 for sku in truth if sku not in found)
    wrong = sum(1 for sku, price in truth.items() if sku in found and found[sku] != price)
    return missing, wrong


def _source(nginx: Nginx, in_flight: int) -> dict[str, Any]:
    return {
        "name": SOURCE,
        "seeds": [f"{nginx.base}/"],
        "allowed_domains": [f"{nginx.host}:{nginx.port}"],
        "allow_private": [f"{nginx.host}/32"],
        "robots": "obey",
        "pacing": {"profile": "fast", "max_in_flight": in_flight},
        "images": False,  # the spider fetches none: the same pages each
    }


async def trawl_round(
    args: argparse.Namespace, nginx: Nginx, truth: dict[str, Decimal], workdir: Path, n: int
) -> Round:
    stack = TrawlStack(
        database=args.database,
        nats=args.nats,
        source=_source(nginx, args.in_flight),
        scale=parse_scale(args.scale),
        log_dir=workdir / f"logs-{n}",
    )
    async with stack:
        usage0 = stack.usage()
        nats0, _ = nats_cpu()
        pg = PgSampler(stack.db)
        web0, off0 = nginx.cpu(), nginx.log_offset()
        pg.start()
        crawl = await stack.crawl(SOURCE)
        await pg.stop()
        usage1 = stack.usage()
        nats1, nats_hwm = nats_cpu()
        web1, off1 = nginx.cpu(), nginx.log_offset()
        restarts = stack.restarts()
        async with stack.pool.acquire() as conn:
            ok = await conn.fetchval(
                "SELECT count(*) FROM attempts WHERE job_id = $1 AND outcome = 'ok'",
                crawl.job_id,
            )
            stored = await conn.fetchval(
                "SELECT count(*) FROM attempts a JOIN payloads p ON p.ref = a.payload_ref "
                "AND p.attempt_id = a.attempt_id WHERE a.job_id = $1 AND a.outcome = 'ok'",
                crawl.job_id,
            )
            outcomes = await conn.fetch(
                "SELECT outcome, count(*) AS n FROM attempts WHERE job_id = $1 GROUP BY 1 "
                "ORDER BY 2 DESC",
                crawl.job_id,
            )
            # Entries, and those a known robots.txt settled at admission (never dispatched).
            entries, settled = await conn.fetchrow(
                "SELECT count(*), count(*) FILTER (WHERE a.error = $2) FROM entries e "
                "LEFT JOIN attempts a ON a.attempt_id = e.id || '.1' "
                "AND a.outcome = 'robots_disallowed' WHERE e.job_id = $1",
                crawl.job_id,
                ROBOTS_ERROR,
            )
            rows = await conn.fetch("SELECT sku, price FROM products WHERE source = $1", SOURCE)
        bodies = await stack.payload_messages()
    requests = nginx.requests(off0, off1)
    found = {r["sku"]: r["price"] for r in rows}
    missing, wrong = _compare(truth, found)
    cpu = {name: usage1[name][0] - usage0.get(name, (0.0, 0))[0] for name in usage1}
    cpu.update({"nats-server": nats1 - nats0, "postgres": pg.total, "postgres bench db": pg.ours})
    cpu["nginx"] = web1 - web0
    rss = {name: hwm for name, (_, hwm) in usage1.items()}
    rss.update({"nats-server": nats_hwm, "postgres bench db": pg.hwm})
    lines = [
        f"job {crawl.status}; attempts: " + ", ".join(f"{r['outcome']} {r['n']}" for r in outcomes),
        f"entries: {entries}; robots_disallowed settled at admission (never dispatched): {settled}",
        f"payloads: {stored}/{ok} ok fetches have a stored payload ({bodies} bodies in the store)",
        f"products in Postgres: {len(rows)}; of the truth's {len(truth)}: {len(truth) - missing}"
        f" present, {missing} missing, {wrong} with another price",
    ]
    if restarts:
        lines.append(f"restarts: {restarts}")
    return Round("trawl", crawl.wall, requests.count, cpu, rss, requests, lines)


async def scrapy_round(nginx: Nginx, truth: dict[str, Decimal], workdir: Path) -> Round:
    web0, off0 = nginx.cpu(), nginx.log_offset()
    run = await run_scrapy(
        [f"{nginx.base}/"], [nginx.host], workdir, args={"drop_params": TRACKING_PARAMS}
    )
    web1, off1 = nginx.cpu(), nginx.log_offset()
    requests = nginx.requests(off0, off1)
    found: dict[str, Decimal | None] = {}
    for item in run.items:
        price = item.get("price")
        found[str(item.get("sku"))] = None if price is None else Decimal(str(price))
    missing, wrong = _compare(truth, found)
    lines = [
        f"exit {run.returncode}; {len(run.items)} items, {len(found)} skus; of the truth's "
        f"{len(truth)}: {len(truth) - missing} present, {missing} missing, {wrong} with "
        "another price"
    ]
    cpu = {"scrapy": run.cpu, "nginx": web1 - web0}
    return Round("scrapy", run.wall, requests.count, cpu, {"scrapy": run.rss}, requests, lines)


# -- report -------------------------------------------------------------------------------------
def _ms(r: Round, component: str) -> float:
    return 1000 * r.cpu.get(component, float("nan")) / max(1, r.pages)


def _median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def report(trawl: list[Round], scrapy: list[Round], site: static_site.Site) -> None:
    rounds = len(trawl)
    t_wall, s_wall = _median([r.wall for r in trawl]), _median([r.wall for r in scrapy])
    print(f"\n== {site.pages} pages, {len(site.products)} products; {rounds} rounds ==")
    print(f"{'round':<8}{'trawl s':>9}{'scrapy s':>10}{'ratio':>7}{'pages t/s':>14}"
          f"{'nginx span t/s':>18}")  # fmt: skip
    for i, (t, s) in enumerate(zip(trawl, scrapy, strict=True), 1):
        print(
            f"{i:<8}{t.wall:>9.1f}{s.wall:>10.1f}{t.wall / s.wall:>7.2f}"
            f"{f'{t.pages}/{s.pages}':>14}{f'{t.requests.span:.1f}/{s.requests.span:.1f}':>18}"
        )
    print(f"{'median':<8}{t_wall:>9.1f}{s_wall:>10.1f}{t_wall / s_wall:>7.2f}")
    print(f"\ntrawl / scrapy wall time (medians): {t_wall / s_wall:.2f}")

    services = sorted(
        {name for r in trawl for name in r.cpu}
        - {"nats-server", "postgres", "postgres bench db", "nginx"}
    )
    cols = "".join(f"{f'r{i}':>8}" for i in range(1, rounds + 1))
    print(f"\nCPU ms per page{' ' * 11}{cols}{'median':>8}{'peak RSS':>10}")

    def row(label: str, runs: list[Round], component: str, rss: int | None) -> float:
        values = [_ms(r, component) for r in runs]
        med = _median(values)
        cells = "".join(f"{v:>8.2f}" for v in values)
        mem = f"{rss / 1024:>8.0f}MB" if rss else ""
        print(f"  {label:<24}{cells}{med:>8.2f}{mem:>10}")
        return med

    def peak(runs: list[Round], name: str) -> int:
        return max(r.rss.get(name, 0) for r in runs)

    total = 0.0
    for name in services:
        total += row(name, trawl, name, peak(trawl, name))
    total += row("nats-server", trawl, "nats-server", peak(trawl, "nats-server"))
    total += row("postgres (all)", trawl, "postgres", None)
    row("  of which bench db", trawl, "postgres bench db", peak(trawl, "postgres bench db"))
    print(f"  {'trawl total':<24}{'':>{8 * rounds}}{total:>8.2f}  services + nats + postgres")
    row("scrapy", scrapy, "scrapy", peak(scrapy, "scrapy"))
    row("nginx serving trawl", trawl, "nginx", None)
    row("nginx serving scrapy", scrapy, "nginx", None)
    print(
        "  (nats-server and postgres (all) include whatever else this machine runs meanwhile; "
        "nats-server's peak RSS is its lifetime's)"
    )

    print("\ncompleteness")
    for i, (t, s) in enumerate(zip(trawl, scrapy, strict=True), 1):
        for line in t.lines:
            print(f"  r{i} trawl   {line}")
        for line in s.lines:
            print(f"  r{i} scrapy  {line}")
        same = set(t.requests.pages) == set(s.requests.pages)
        only_t = len(set(t.requests.pages) - set(s.requests.pages))
        only_s = len(set(s.requests.pages) - set(t.requests.pages))
        print(
            f"  r{i} nginx   {'the same' if same else 'different'} pages: trawl "
            f"{len(t.requests.pages)} ({only_t} only trawl, {t.requests.duplicates} fetched "
            f"twice), scrapy {len(s.requests.pages)} ({only_s} only scrapy, "
            f"{s.requests.duplicates} twice); the site has {site.pages}; not 200: trawl "
            f"{sum(n for k, n in t.requests.statuses.items() if k != '200')}, scrapy "
            f"{sum(n for k, n in s.requests.statuses.items() if k != '200')}"
        )


# -- main ---------------------------------------------------------------------------------------
async def main(args: argparse.Namespace) -> None:
    binary = ensure_nginx()
    workdir = Path(tempfile.mkdtemp(prefix="trawl-static-bench-"))
    os.chmod(workdir, 0o755)  # nginx's workers run unprivileged and read the site from here
    try:
        t0 = time.monotonic()
        site = static_site.generate(
            workdir / "site",
            products=args.products,
            seed=args.seed,
            truth_file=workdir / "truth.json",
        )
        sizes = sorted(site.product_sizes)
        print(
            f"site: {site.pages} pages ({len(site.products)} products, "
            f"{sum(site.listings.values())} listings, product pages {sizes[0] // 1000}-"
            f"{sizes[-1] // 1000} KB, median {sizes[len(sizes) // 2] // 1000} KB), "
            f"{site.bytes_written / 1e6:.0f} MB generated in {time.monotonic() - t0:.1f} s",
            flush=True,
        )
        truth = {p.sku: Decimal(p.price) for p in site.products}
        nginx = Nginx(binary, workdir / "site", workdir / "nginx", HOST, free_port(HOST))
        trawl: list[Round] = []
        scrapy: list[Round] = []
        async with nginx:
            print(f"nginx on {nginx.base}; trawl in-flight {args.in_flight}, scrapy 128")
            for n in range(1, args.rounds + 1):
                t = await trawl_round(args, nginx, truth, workdir, n)
                trawl.append(t)
                print(f"round {n} trawl  {t.wall:6.1f} s, {t.pages} pages", flush=True)
                s = await scrapy_round(nginx, truth, workdir)
                scrapy.append(s)
                print(f"round {n} scrapy {s.wall:6.1f} s, {s.pages} pages", flush=True)
        report(trawl, scrapy, site)
    finally:
        if args.keep:
            print(f"\nwork dir kept: {workdir}")
        else:
            shutil.rmtree(workdir, ignore_errors=True)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="python -m bench.static_bench",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--products", type=int, default=5000)
    p.add_argument("--rounds", type=int, default=3, help="alternating rounds (default 3)")
    p.add_argument("--seed", type=int, default=13, help="the site generator's seed")
    p.add_argument("--in-flight", type=int, default=32, help="trawl's requests in flight")
    p.add_argument("--scale", default="", help="e.g. fetcher=2,parser=2")
    p.add_argument(
        "--database",
        default=os.environ.get("DATABASE_URL", "postgresql://root@127.0.0.1:5432/trawl"),
    )
    p.add_argument("--nats", default=os.environ.get("NATS_URL", "nats://127.0.0.1:4222"))
    p.add_argument("--keep", action="store_true", help="keep the work dir (site, logs)")
    args = p.parse_args(argv)
    if args.rounds < 1 or args.products < 1:
        p.error("--rounds and --products must be at least 1")
    return args


if __name__ == "__main__":
    asyncio.run(main(parse_args()))
