"""Private NATS and PostgreSQL servers for fault tests: each on a free loopback port with its own
store, so a test may kill or restart them without touching the shared development servers.

The port stays the same across restarts, so clients reconnect to the same URL.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
import socket
import tempfile
import time
from pathlib import Path

import asyncpg

NATS_SERVER = shutil.which("nats-server") or "/usr/sbin/nats-server"
PG_BIN_DIRS = ("/usr/local/bin", "/usr/lib/postgresql/15/bin")


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def _pg_tool(name: str) -> str:
    for d in PG_BIN_DIRS:
        path = Path(d) / name
        if path.exists():
            return str(path)
    found = shutil.which(name)
    if found is None:
        raise RuntimeError(f"{name} not found in {PG_BIN_DIRS} or on PATH")
    return found


async def _wait_port(port: int, deadline: float, what: str) -> None:
    while True:
        try:
            _, writer = await asyncio.open_connection("127.0.0.1", port)
        except OSError:
            if time.monotonic() > deadline:
                raise TimeoutError(f"{what} did not listen on {port}") from None
            await asyncio.sleep(0.05)
            continue
        writer.close()
        await writer.wait_closed()
        return


class PrivateNats:
    """``nats-server -js`` with file storage in its own directory."""

    def __init__(self, root: Path, port: int | None = None) -> None:
        self.root = root
        self.port = port or free_port()
        self.store = root / "jetstream"
        self.log_path = root / "nats.log"
        self.proc: asyncio.subprocess.Process | None = None

    @property
    def url(self) -> str:
        return f"nats://127.0.0.1:{self.port}"

    async def start(self, timeout: float = 15.0) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        mark = self.log_path.stat().st_size if self.log_path.exists() else 0
        self.proc = await asyncio.create_subprocess_exec(
            NATS_SERVER,
            "-js",
            "-a",
            "127.0.0.1",
            "-p",
            str(self.port),
            "-sd",
            str(self.store),
            "-l",
            str(self.log_path),
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.DEVNULL,
            start_new_session=True,
        )
        deadline = time.monotonic() + timeout
        await _wait_port(self.port, deadline, "nats-server")
        # JetStream recovers its streams before "Server is ready"; wait for that line.
        while b"Server is ready" not in self.log_path.read_bytes()[mark:]:
            if self.proc.returncode is not None or time.monotonic() > deadline:
                raise RuntimeError(f"nats-server did not start:\n{self.log_path.read_text()}")
            await asyncio.sleep(0.05)

    async def stop(self, sig: int = signal.SIGTERM) -> None:
        if self.proc is None or self.proc.returncode is not None:
            return
        self.proc.send_signal(sig)
        await asyncio.wait_for(self.proc.wait(), 30)

    async def kill(self) -> None:
        await self.stop(signal.SIGKILL)


class PrivatePostgres:
    """A throwaway PostgreSQL 15 cluster (``initdb`` + ``pg_ctl``), trust auth for ``root``.

    ``initdb`` refuses to run as root, so as root the cluster belongs to the ``postgres`` user
    and lives in a directory that user can reach (pytest's tmp dirs are private to root).
    """

    def __init__(self, port: int | None = None, user: str = "root") -> None:
        self.port = port or free_port()
        self.user = user
        self.dir = Path(tempfile.mkdtemp(prefix="trawl-pg-"))
        self.data = self.dir / "data"
        self.log_path = self.dir / "postgres.log"
        self._as = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
        if self._as:
            shutil.chown(self.dir, "postgres")

    def url(self, database: str = "postgres") -> str:
        return f"postgresql://{self.user}@127.0.0.1:{self.port}/{database}"

    async def _run(self, *argv: str) -> None:
        proc = await asyncio.create_subprocess_exec(
            *self._as,
            *argv,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
        )
        out, _ = await proc.communicate()
        if proc.returncode != 0:
            log = self.log_path.read_text() if self.log_path.exists() else ""
            raise RuntimeError(f"{' '.join(argv)} failed:\n{out.decode()}\n{log[-3000:]}")

    async def init(self) -> None:
        await self._run(
            _pg_tool("initdb"),
            "-D",
            str(self.data),
            "-A",
            "trust",
            "-U",
            self.user,
            "-E",
            "UTF8",
            "--no-sync",
        )

    async def start(self) -> None:
        if not self.data.exists():
            await self.init()
        # fsync off: the tests crash the server process, never the machine, so the page cache
        # survives. synchronous_commit stays on: a crash must not lose acknowledged commits.
        options = (
            f"-p {self.port} -k {self.dir} -c listen_addresses=127.0.0.1 -c fsync=off "
            "-c full_page_writes=off -c max_connections=300"
        )
        await self._run(
            _pg_tool("pg_ctl"), "-D", str(self.data), "-o", options, "-l", str(self.log_path),
            "-w", "start",
        )  # fmt: skip

    async def stop(self, mode: str = "fast") -> None:
        """``fast`` disconnects clients cleanly; ``immediate`` is a crash (recovery at start)."""
        await self._run(_pg_tool("pg_ctl"), "-D", str(self.data), "-m", mode, "-w", "stop")

    async def create_database(self, name: str) -> str:
        conn = await asyncpg.connect(self.url())
        try:
            await conn.execute(f'CREATE DATABASE "{name}"')
        finally:
            await conn.close()
        return self.url(name)

    async def destroy(self) -> None:
        if (self.data / "postmaster.pid").exists():
            with contextlib.suppress(RuntimeError):
                await self.stop("immediate")
        shutil.rmtree(self.dir, ignore_errors=True)
