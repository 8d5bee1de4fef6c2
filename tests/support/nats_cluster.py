"""A private three-node NATS JetStream cluster for fault tests: three ``nats-server`` processes
on free loopback ports, each with its own store directory, routed to each other. A node keeps its
ports and store across a kill and restart, so it rejoins as itself and catches up."""

from __future__ import annotations

import asyncio
import signal
import time
from pathlib import Path

import nats.errors
import nats.js.errors

from shared.bus import connect
from tests.support.private_servers import NATS_SERVER, free_port


class ClusterNode:
    def __init__(self, root: Path, name: str, cluster: str) -> None:
        self.root = root
        self.name = name
        self.cluster = cluster
        self.port = free_port()
        self.route_port = free_port()
        self.routes: list[str] = []
        self.log_path = root / "nats.log"
        self.proc: asyncio.subprocess.Process | None = None

    @property
    def url(self) -> str:
        return f"nats://127.0.0.1:{self.port}"

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.returncode is None

    async def start(self, timeout: float = 15.0) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        mark = self.log_path.stat().st_size if self.log_path.exists() else 0
        self.proc = await asyncio.create_subprocess_exec(
            NATS_SERVER,
            "-js",
            "-a", "127.0.0.1",
            "-p", str(self.port),
            "-sd", str(self.root / "jetstream"),
            "-n", self.name,
            "--cluster_name", self.cluster,
            "--cluster", f"nats://127.0.0.1:{self.route_port}",
            "--routes", ",".join(self.routes),
            "-l", str(self.log_path),
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.DEVNULL,
            start_new_session=True,
        )  # fmt: skip
        deadline = time.monotonic() + timeout
        while not self._ready(mark):
            if self.proc.returncode is not None or time.monotonic() > deadline:
                log = self.log_path.read_text() if self.log_path.exists() else ""
                raise RuntimeError(f"{self.name} did not start:\n{log}")
            await asyncio.sleep(0.05)

    def _ready(self, mark: int) -> bool:
        return self.log_path.exists() and b"Server is ready" in self.log_path.read_bytes()[mark:]

    async def kill(self) -> None:
        if self.alive:
            assert self.proc is not None
            self.proc.send_signal(signal.SIGKILL)
            await asyncio.wait_for(self.proc.wait(), 30)


class NatsCluster:
    def __init__(self, root: Path, size: int = 3, name: str = "trawl-test") -> None:
        self.nodes = [ClusterNode(root / f"n{i}", f"n{i}", name) for i in range(1, size + 1)]
        for node in self.nodes:
            node.routes = [f"nats://127.0.0.1:{o.route_port}" for o in self.nodes if o is not node]

    @property
    def url(self) -> str:
        """Every node's URL, comma-separated: what ``NATS_URL`` holds for a cluster."""
        return ",".join(node.url for node in self.nodes)

    def node(self, name: str) -> ClusterNode:
        return next(node for node in self.nodes if node.name == name)

    async def start(self, timeout: float = 60.0) -> None:
        await asyncio.gather(*(node.start() for node in self.nodes))
        await self.wait_ready(timeout)

    async def wait_ready(self, timeout: float = 60.0) -> None:
        """Until JetStream answers through every live node (a meta leader is elected)."""
        deadline = time.monotonic() + timeout
        for node in self.nodes:
            if not node.alive:
                continue
            nc = await connect(node.url, name="test-cluster-ready", attempts=3)
            try:
                while True:
                    try:
                        await nc.jetstream(timeout=2).account_info()
                        break
                    except (nats.js.errors.Error, nats.errors.Error, TimeoutError):
                        if time.monotonic() > deadline:
                            raise
                        await asyncio.sleep(0.2)
            finally:
                await nc.close()

    async def stop(self) -> None:
        await asyncio.gather(*(node.kill() for node in self.nodes))
