"""A worker's health endpoint as an orchestrator's probes see it: a real parser process on a
private NATS server. Ready once connected and consuming, not ready while NATS is down (alive
all along: a restart would not help), ready again after it reconnects, and draining at SIGTERM
ends the process cleanly."""

from __future__ import annotations

import asyncio
import signal
import sys
from pathlib import Path

import aiohttp
import pytest

from tests.conftest import free_port
from tests.support.private_servers import PrivateNats
from tests.support.stack import eventually

pytestmark = [pytest.mark.faults, pytest.mark.timeout(120)]


async def _probe(session: aiohttp.ClientSession, url: str) -> tuple[int, dict]:
    async with session.get(url) as resp:
        return resp.status, await resp.json()


async def test_parser_probes_follow_nats(
    private_env: dict[str, str], private_nats: PrivateNats, tmp_path: Path
) -> None:
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    env = {**private_env, "TRAWL_HEALTH_LISTEN": f"127.0.0.1:{port}"}
    log = (tmp_path / "parser.log").open("wb")
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "services.parser", env=env, stdout=log, stderr=log
    )
    try:
        async with aiohttp.ClientSession() as session:

            async def answers(path: str, status: int) -> bool:
                try:
                    return (await _probe(session, base + path))[0] == status
                except aiohttp.ClientConnectionError:
                    return False

            await eventually(lambda: answers("/readyz", 200), timeout=60, what="ready")
            _, body = await _probe(session, base + "/readyz")
            assert body["nats_connected"] and body["started"] and not body["tasks_ended"]
            assert (await _probe(session, base + "/livez"))[0] == 200

            await private_nats.kill()
            await eventually(lambda: answers("/readyz", 503), timeout=30, what="not ready")
            assert (await _probe(session, base + "/readyz"))[1]["nats_connected"] is False
            assert (await _probe(session, base + "/livez"))[0] == 200

            await private_nats.start()
            await eventually(lambda: answers("/readyz", 200), timeout=60, what="ready again")

        proc.send_signal(signal.SIGTERM)
        assert await asyncio.wait_for(proc.wait(), 40) == 0
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
        log.close()
