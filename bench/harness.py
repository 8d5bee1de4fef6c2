"""What the end-to-end benchmarks share: a fresh trawl stack under the Supervisor, a Scrapy run,
and CPU and memory read from /proc.

``TrawlStack`` runs the four services and the admin API as processes, exactly as ``trawl up``
does, on a database and a namespace of their own (removed on exit), with one source saved
before the services start. ``run_scrapy`` runs ``bench/scrapy_spider.py`` as its own process
and returns its wall time, its own CPU and peak RSS (``wait4``) and the items it wrote.
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any

import asyncpg

from control.client import TrawlClient
from control.supervisor import Supervisor
from migrations.runner import migrate
from services.scheduler.catalog import save_source
from shared.bus import connect
from shared.db import connect as db_connect
from shared.db import open_pool
from shared.names import Names
from shared.provision import teardown
from shared.settings import Settings
from shared.sources import source_from_dict

TICK = os.sysconf("SC_CLK_TCK")
ROOT = Path(__file__).resolve().parent.parent
SPIDER = ROOT / "bench" / "scrapy_spider.py"


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        port: int = s.getsockname()[1]
        return port


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


# -- /proc --------------------------------------------------------------------------------------
def _stat(pid: int) -> list[str]:
    """The fields of /proc/PID/stat after the command name (field 3 onwards)."""
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()


def proc_cpu(pid: int, *, children: bool = False) -> float:
    """CPU seconds (utime + stime) of a live process; with ``children``, also those of its
    exited children it has waited for (cutime + cstime)."""
    f = _stat(pid)
    ticks = int(f[11]) + int(f[12])
    if children:
        ticks += int(f[13]) + int(f[14])
    return ticks / TICK


def proc_hwm(pid: int) -> int:
    """Peak resident set size (VmHWM) of a live process, in kB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    return 0


def proc_stats(pid: int) -> tuple[float, int]:
    """(CPU seconds, peak RSS in kB) of a live process."""
    return proc_cpu(pid), proc_hwm(pid)


def processes() -> Iterator[tuple[int, str, int]]:
    """(pid, command name, parent pid) of every process readable in /proc."""
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            raw = Path(f"/proc/{entry.name}/stat").read_text()
        except OSError:  # exited meanwhile
            continue
        comm = raw[raw.index("(") + 1 : raw.rindex(")")]
        yield int(entry.name), comm, int(raw.rsplit(")", 1)[1].split()[1])


def pids_named(comm: str) -> list[int]:
    return [pid for pid, name, _ in processes() if name == comm]


def postmaster_pid() -> int | None:
    """The PostgreSQL server's main process: a ``postgres`` whose parent is not one."""
    procs = {pid: (name, ppid) for pid, name, ppid in processes()}
    for pid, (name, ppid) in procs.items():
        if name == "postgres" and procs.get(ppid, ("", 0))[0] != "postgres":
            return pid
    return None


def tree_cpu(root: int) -> float:
    """CPU seconds of a process and all its children, live or exited: the root's own time,
    what it has reaped (cutime + cstime), and each live child's time. Differences of two
    readings count a child that came and went in between (PostgreSQL backends do)."""
    total = proc_cpu(root, children=True)
    for pid, _, ppid in processes():
        if ppid == root:
            try:
                total += proc_cpu(pid)
            except OSError:
                continue
    return total


# -- trawl --------------------------------------------------------------------------------------
@dataclass
class Crawl:
    job_id: int
    status: str
    wall: float  # trigger → the job completed and its products were applied
    summary: dict[str, Any]


class TrawlStack:
    """The services as processes against a fresh database and namespace, one source saved.

    ``async with TrawlStack(...) as stack: crawl = await stack.crawl("name")``; ``usage()``
    reads every live child's (CPU seconds, peak RSS kB).
    """

    def __init__(
        self,
        *,
        database: str,
        nats: str,
        source: dict[str, Any],
        scale: dict[str, int],
        log_dir: Path,
    ) -> None:
        self.admin = database.rsplit("/", 1)[0]
        self.db = f"trawl_bench_{uuid.uuid4().hex[:8]}"
        self.env = dict(os.environ)
        self.env.update(
            {
                "DATABASE_URL": f"{self.admin}/{self.db}",
                "NATS_URL": nats,
                "TRAWL_NAMESPACE": f"bench{uuid.uuid4().hex[:8]}",
                "TRAWL_API_LISTEN": f"127.0.0.1:{free_port()}",
                "TRAWL_LOG_LEVEL": "WARNING",
                "PYTHONPATH": str(ROOT),
                # The services run this tree, whatever the working directory: ``python -m``
                # puts the working directory first on sys.path, ahead of PYTHONPATH, so a
                # bench of another worktree started from here would run this checkout's code.
                "PYTHONSAFEPATH": "1",
            }
        )
        self.settings = Settings.from_env(self.env)
        self.source = source
        self.scale = scale
        self.supervisor = Supervisor(scale=scale, demo=False, log_dir=log_dir, env=self.env)
        self.client = TrawlClient(self.settings)
        self._runner: asyncio.Task[None] | None = None
        self._pool: asyncpg.Pool | None = None

    @property
    def pool(self) -> asyncpg.Pool:
        assert self._pool is not None, "use the stack inside `async with`"
        return self._pool

    async def __aenter__(self) -> TrawlStack:
        try:
            await migrate(self.env["DATABASE_URL"])
            self._pool = await open_pool(
                self.env["DATABASE_URL"], min_size=1, max_size=2, attempts=3
            )
            conn = await db_connect(self.env["DATABASE_URL"])  # a Connection, as save_source wants
            try:
                await save_source(conn, source_from_dict(self.source))
            finally:
                await conn.close()
            await self.supervisor.start()
            self._runner = asyncio.create_task(self.supervisor.run(), name="supervisor")
            await self.client.__aenter__()
            await self.client.wait_for_workers(self.scale, timeout=60)
        except BaseException:
            await self.close()
            raise
        return self

    async def __aexit__(
        self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()

    async def close(self) -> None:
        self.supervisor.stop()
        if self._runner is not None:
            await self._runner
        await self.client.__aexit__(None, None, None)
        if self._pool is not None:
            await self._pool.close()
        nc = await connect(self.settings.nats_url, name="bench-teardown", attempts=3)
        await teardown(nc.jetstream(), Names(self.settings.namespace))
        await nc.close()
        conn = await asyncpg.connect(f"{self.admin}/postgres")
        await conn.execute(f'DROP DATABASE IF EXISTS "{self.db}" WITH (FORCE)')
        await conn.close()

    def usage(self) -> dict[str, tuple[float, int]]:
        """(CPU seconds, peak RSS kB) of every live child, by name (``parser-0``)."""
        return {c.name: proc_stats(c.proc.pid) for c in self.supervisor.children if c.proc}

    def restarts(self) -> dict[str, int]:
        return {c.name: c.restarts for c in self.supervisor.children if c.restarts}

    async def crawl(self, source: str, *, timeout: float = 3600.0) -> Crawl:
        t0 = time.monotonic()
        reply = await self.client.trigger(source, timeout=30)
        if reply.job_id is None:
            raise RuntimeError(f"trigger refused: {reply.error}")
        summary = await self.client.wait(reply.job_id, timeout=timeout)
        return Crawl(reply.job_id, summary["status"], time.monotonic() - t0, summary)

    async def payload_messages(self) -> int:
        """Bodies in the payload store's stream."""
        assert self.client.nc is not None
        info = await self.client.nc.jetstream().stream_info(self.client.names.payload_stream)
        return info.state.messages


# -- Scrapy -------------------------------------------------------------------------------------
@dataclass
class ScrapyRun:
    wall: float  # process start → exit
    cpu: float  # the process's own utime + stime
    rss: int  # its peak RSS, kB
    items: list[dict[str, Any]]
    returncode: int


async def run_scrapy(
    start: list[str], hosts: list[str], workdir: Path, *, args: dict[str, str] | None = None
) -> ScrapyRun:
    """Crawl with the Scrapy spider; ``args`` are more spider arguments (``-a k=v``)."""
    out = workdir / "scrapy.jl"
    argv = [
        sys.executable, "-m", "scrapy", "runspider", str(SPIDER),
        "-a", f"start={','.join(start)}", "-a", f"hosts={','.join(hosts)}",
        "-O", str(out), "-s", "LOG_LEVEL=WARNING",
    ]  # fmt: skip
    for key, value in (args or {}).items():
        argv += ["-a", f"{key}={value}"]
    t0 = time.monotonic()
    # Popen + wait4 rather than asyncio's child watcher: wait4 gives this child's own rusage.
    proc = subprocess.Popen(argv, cwd=workdir, stdin=subprocess.DEVNULL)  # noqa: ASYNC220
    _, status, usage = await asyncio.to_thread(os.wait4, proc.pid, 0)
    wall = time.monotonic() - t0
    proc.returncode = os.waitstatus_to_exitcode(status)
    items = []
    if out.exists():
        items = [json.loads(line) for line in out.read_text().splitlines() if line.strip()]
    return ScrapyRun(
        wall=wall,
        cpu=usage.ru_utime + usage.ru_stime,
        rss=usage.ru_maxrss,
        items=items,
        returncode=proc.returncode,
    )
