"""A three-node JetStream cluster (private ``nats-server`` processes, R3 streams and buckets)
loses a node mid-crawl, SIGKILL, and gets it back later: the services ride it out on the
surviving nodes, the crawl completes intact, and no message is lost or doubled on the way.
Once with a node that leads no stream of the work, once with the work stream's leader."""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import asyncpg
import pytest
from nats.js import JetStreamContext

from control.client import TrawlClient
from demo.faults import Faults
from demo.shop import DemoShop
from migrations.runner import migrate
from services.parser.service import PARSEABLE
from shared import names as n
from shared.channels import FETCH_WORK
from shared.db import open_pool
from shared.names import Names
from shared.settings import Settings
from tests.conftest import ROOT, free_port
from tests.faults.crawl import FAULT_ENV, check_crawl, save_shop_source
from tests.support.nats_cluster import NatsCluster
from tests.support.private_servers import PrivatePostgres
from tests.support.stack import Stack, eventually

pytestmark = [pytest.mark.faults, pytest.mark.timeout(360)]

PRODUCTS = 150
# The streams of the crawl's work; each is drained when the job is done.
WORK_STREAMS = (n.TRIGGER, n.FETCH, n.FETCHED, n.PARSED)
FETCH_ACK_WAIT = FETCH_WORK.durable("fetcher").ack_wait


@pytest.fixture
async def cluster(tmp_path: Path) -> AsyncIterator[NatsCluster]:
    c = NatsCluster(tmp_path / "cluster")
    try:
        await c.start()
        yield c
    finally:
        await c.stop()


@pytest.fixture
async def cluster_env(cluster: NatsCluster, private_pg: PrivatePostgres) -> dict[str, str]:
    """Services on the cluster and a private Postgres (a crawl's connections must not depend on
    what else the shared server is serving)."""
    database_url = private_pg.url(f"trawl_{uuid.uuid4().hex[:8]}")
    await migrate(database_url)
    return {
        **os.environ,
        **FAULT_ENV,
        "NATS_URL": cluster.url,
        "TRAWL_STREAM_REPLICAS": "3",
        "DATABASE_URL": database_url,
        "TRAWL_NAMESPACE": f"c{uuid.uuid4().hex[:12]}",
        "TRAWL_API_LISTEN": f"127.0.0.1:{free_port()}",
        "TRAWL_LOG_LEVEL": "INFO",
        "PYTHONPATH": str(ROOT),
    }


@pytest.fixture
async def cluster_pool(cluster_env: dict[str, str]) -> AsyncIterator[asyncpg.Pool]:
    pool = await open_pool(cluster_env["DATABASE_URL"], min_size=1, max_size=4, attempts=3)
    yield pool
    await pool.close()


async def _leader(js: JetStreamContext, names: Names) -> str:
    info = await js.stream_info(names.stream(n.FETCH))
    assert info.cluster is not None and info.cluster.leader, info
    return info.cluster.leader


async def _caught_up(js: JetStreamContext, names: Names) -> bool:
    """Every work stream has its three replicas, all current (a restarted node caught up)."""
    for key in WORK_STREAMS:
        cluster = (await js.stream_info(names.stream(key))).cluster
        peers = (cluster.replicas or []) if cluster else []
        if len(peers) != 2 or not all(p.current for p in peers):
            return False
    return True


async def check_no_message_lost(js: JetStreamContext, names: Names, pool: asyncpg.Pool) -> None:
    """Each hop's stream sequence equals what the database says went through it once: every
    dispatched attempt was stored once (deduplicated by its message id), every one answered
    once, every answer worth parsing parsed once; and every work stream is drained."""

    async def drained() -> bool:
        states = [(await js.stream_info(names.stream(key))).state for key in WORK_STREAMS]
        return all(state.messages == 0 for state in states)

    # The last acks may trail the job's final event by a moment. And a fetch delivered into a
    # pull request that died with its node is redelivered only after the consumer's ack_wait
    # (60 s): by then the scheduler has dispatched the page again as a new attempt, and the
    # late one is fetched and recorded as a stale attempt. Late, not lost: wait for it.
    try:
        await eventually(drained, timeout=FETCH_ACK_WAIT + 30, what="the work streams drained")
    except AssertionError:
        states = {k: (await js.stream_info(names.stream(k))).state for k in WORK_STREAMS}
        raise AssertionError(f"not drained: {states}") from None
    last = {key: (await js.stream_info(names.stream(key))).state for key in WORK_STREAMS}
    async with pool.acquire() as conn:
        dispatched = await conn.fetchval("SELECT coalesce(sum(attempts), 0) FROM entries")
        answered = await conn.fetchval("SELECT count(*) FROM attempts")
        parseable = await conn.fetchval(
            "SELECT count(*) FROM attempts WHERE outcome = ANY($1::text[])", list(PARSEABLE)
        )
    assert last[n.FETCH].last_seq == dispatched, (last[n.FETCH], dispatched)
    assert last[n.FETCHED].last_seq == answered == dispatched, (last[n.FETCHED], answered)
    assert last[n.PARSED].last_seq == parseable, (last[n.PARSED], parseable)
    for key in WORK_STREAMS:
        for consumer in await js.consumers_info(names.stream(key)):
            assert (consumer.num_pending, consumer.num_ack_pending) == (0, 0), consumer


@pytest.mark.parametrize("victim", ["follower", "leader"])
async def test_node_killed_mid_crawl(
    victim: str,
    cluster: NatsCluster,
    cluster_env: dict[str, str],
    cluster_pool: asyncpg.Pool,
    tmp_path: Path,
) -> None:
    env, pool = cluster_env, cluster_pool
    settings = Settings.from_env(env)
    names = Names(settings.namespace)
    shop = DemoShop(
        hosts=("127.0.0.2", "127.0.0.3"), port=0, products=PRODUCTS, faults=Faults(latency=0.05)
    )
    async with (
        shop,
        Stack(env, tmp_path / "logs", scale="fetcher=2") as stack,
        TrawlClient(settings) as client,
    ):
        await save_shop_source(pool, shop, max_in_flight=2)
        assert client.nc is not None
        js = client.nc.jetstream(timeout=10)

        async def crawled(part: float) -> None:
            async def enough() -> bool:
                return len(shop.request_log) >= PRODUCTS * part

            await eventually(enough, timeout=120, what=f"{part:.0%} of the crawl")

        # Registered is not started: a fault while a service is still in its start-up would
        # test the supervisor's restart, not riding the fault out.
        async def all_started() -> bool:
            logs = [stack.log_dir / f"{c.name}.log" for c in stack.sup.children]
            return all(p.exists() and b'"service_started"' in p.read_bytes() for p in logs)

        await eventually(all_started, timeout=60, what="every service started")
        # (A start-up on a cluster still electing its leaders may time out and be restarted by
        # the supervisor, as by Kubernetes: that is start-up, not the fault under test.)
        restarts = {c.name: c.restarts for c in stack.sup.children}
        reply = await client.trigger("shop", timeout=30)
        assert reply.job_id is not None, reply.error
        await crawled(1 / 3)
        leader = await _leader(js, names)
        dead = (
            cluster.node(leader)
            if victim == "leader"
            else next(node for node in cluster.nodes if node.name != leader)
        )
        await dead.kill()
        await crawled(2 / 3)
        await dead.start()

        summary = await client.wait(reply.job_id, timeout=180, refreshed_timeout=120)
        await check_crawl(client, pool, shop, summary, stack.logs())
        await eventually(lambda: _caught_up(js, names), timeout=60, what="the node caught up")
        await check_no_message_lost(js, names, pool)
        # The services rode the fault out: no process restarted since.
        assert {c.name: c.restarts for c in stack.sup.children} == restarts, stack.logs()
