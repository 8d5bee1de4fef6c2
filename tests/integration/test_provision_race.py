"""Services of one namespace start at the same moment and each provisions its streams: the
ones that lose the race to create a stream (the server refuses theirs: its subjects overlap
the stream just created) go on with it instead of crashing (a refresher once exited so)."""

from __future__ import annotations

import asyncio
import uuid

import pytest

from shared.bus import connect
from shared.names import Names
from shared.provision import provision, stream_configs, teardown
from tests.conftest import NATS_URL

pytestmark = pytest.mark.timeout(120)

SERVICES = 4
ROUNDS = 5


async def test_services_provisioning_at_once_all_succeed() -> None:
    clients = [await connect(NATS_URL, name=f"test-race-{i}", attempts=3) for i in range(SERVICES)]
    try:
        for _ in range(ROUNDS):
            names = Names(f"t{uuid.uuid4().hex[:12]}")
            try:
                # Every client finds each stream missing and creates it, as services do.
                await asyncio.gather(*(provision(c.jetstream(), names) for c in clients))
                js = clients[0].jetstream()
                for config in stream_configs(names):
                    info = await js.stream_info(str(config.name))
                    assert info.config.subjects == config.subjects
            finally:
                await teardown(clients[0].jetstream(), names)
    finally:
        for c in clients:
            await c.close()
