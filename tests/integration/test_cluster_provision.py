"""Provisioning against a private three-node JetStream cluster: every stream and bucket gets the
configured replica count, running it again (as every service does at start, in any order, at
once) changes nothing, and buckets made with another count are scaled to it."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from nats.js import JetStreamContext

from shared.bus import connect
from shared.names import Names
from shared.provision import provision, provision_when_ready, stream_configs
from tests.support.nats_cluster import NatsCluster

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
async def cluster(tmp_path: Path) -> AsyncIterator[NatsCluster]:
    c = NatsCluster(tmp_path / "cluster")
    try:
        await c.start()
        yield c
    finally:
        await c.stop()


def _bucket_streams(names: Names) -> list[str]:
    buckets = (names.robots_bucket, names.sources_bucket, names.proxies_bucket)
    return [*(f"KV_{b}" for b in buckets), f"OBJ_{names.large_payload_bucket}"]


async def _replicas(js: JetStreamContext, names: Names) -> dict[str, int]:
    streams = [str(c.name) for c in stream_configs(names)] + _bucket_streams(names)
    infos = [await js.stream_info(s) for s in streams]
    return {s: int(i.config.num_replicas or 1) for s, i in zip(streams, infos, strict=True)}


async def test_provisioning_is_idempotent_on_a_cluster(cluster: NatsCluster) -> None:
    names = Names("cluster1")
    nc = await connect(cluster.url, name="test-provision", attempts=3)
    try:
        js = nc.jetstream(timeout=10)
        # Four services starting together, through different nodes' clients.
        clients = [await connect(n.url, name="test-provision", attempts=3) for n in cluster.nodes]
        try:
            await asyncio.gather(
                *(
                    provision_when_ready(c.jetstream(timeout=10), names, replicas=3)
                    for c in clients
                ),
                provision_when_ready(js, names, replicas=3),
            )
        finally:
            for c in clients:
                await c.close()
        first = await _replicas(js, names)
        assert set(first.values()) == {3}, first
        consumers = {
            s: [c.name for c in await js.consumers_info(s)]
            for s in first
            if not s.startswith(("KV_", "OBJ_"))
        }
        await provision(js, names, replicas=3)
        assert await _replicas(js, names) == first
        again = {s: [c.name for c in await js.consumers_info(s)] for s in consumers}
        assert again == consumers

        # A namespace provisioned at R1 (a single-node habit) is scaled up by the next start.
        small = Names("cluster2")
        await provision(js, small, replicas=1)
        assert set((await _replicas(js, small)).values()) == {1}
        await provision(js, small, replicas=3)
        assert set((await _replicas(js, small)).values()) == {3}
    finally:
        await nc.close()
