"""A private PgBouncer (Debian's ``pgbouncer``) on a free loopback port, in front of a
PostgreSQL server: every database name is passed through to the same name on that server.

PgBouncer refuses to run as root; as root it runs as ``postgres`` (``-u``), with its files in a
directory that user can read (pytest's tmp dirs are private to root).
"""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import tempfile
import time
from pathlib import Path

from tests.support.private_servers import free_port

PGBOUNCER = shutil.which("pgbouncer") or "/usr/sbin/pgbouncer"


class PgBouncer:
    def __init__(
        self,
        server_port: int = 5432,
        *,
        pool_mode: str = "transaction",
        pool_size: int = 4,
        user: str = "root",
    ) -> None:
        self.server_port = server_port
        self.pool_mode = pool_mode
        self.pool_size = pool_size
        self.user = user
        self.port = free_port()
        self.dir = Path(tempfile.mkdtemp(prefix="trawl-pgbouncer-"))
        self.log_path = self.dir / "pgbouncer.log"
        self.proc: asyncio.subprocess.Process | None = None
        self._as = ["-u", "postgres"] if os.geteuid() == 0 else []

    def url(self, database: str) -> str:
        return f"postgresql://{self.user}@127.0.0.1:{self.port}/{database}"

    def _write_config(self) -> Path:
        (self.dir / "users.txt").write_text(f'"{self.user}" ""\n')
        ini = self.dir / "pgbouncer.ini"
        ini.write_text(
            f"""[databases]
* = host=127.0.0.1 port={self.server_port}

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = {self.port}
unix_socket_dir =
auth_type = trust
auth_file = {self.dir / "users.txt"}
pool_mode = {self.pool_mode}
default_pool_size = {self.pool_size}
max_client_conn = 1000
logfile = {self.log_path}
pidfile = {self.dir / "pgbouncer.pid"}
log_connections = 0
log_disconnections = 0
"""
        )
        if self._as:
            for path in (self.dir, *self.dir.iterdir()):
                shutil.chown(path, "postgres")
        return ini

    async def start(self, timeout: float = 15.0) -> None:
        ini = self._write_config()
        self.proc = await asyncio.create_subprocess_exec(
            PGBOUNCER,
            *self._as,
            str(ini),
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.DEVNULL,
            start_new_session=True,
        )
        deadline = time.monotonic() + timeout
        while True:
            try:
                _, writer = await asyncio.open_connection("127.0.0.1", self.port)
            except OSError:
                if self.proc.returncode is not None or time.monotonic() > deadline:
                    log = self.log_path.read_text() if self.log_path.exists() else ""
                    raise RuntimeError(f"pgbouncer did not start:\n{log}") from None
                await asyncio.sleep(0.05)
                continue
            writer.close()
            await writer.wait_closed()
            return

    async def stop(self) -> None:
        if self.proc is not None and self.proc.returncode is None:
            self.proc.send_signal(signal.SIGINT)  # SIGINT: shut down at once
            try:
                await asyncio.wait_for(self.proc.wait(), 10)
            except TimeoutError:
                self.proc.kill()
                await self.proc.wait()
        shutil.rmtree(self.dir, ignore_errors=True)

    async def __aenter__(self) -> PgBouncer:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()
