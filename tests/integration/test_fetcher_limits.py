"""Limits, live: a 1 GB response and a gzip bomb are cut off at the size cap while the fetcher
process stays small; a 1 byte/s server times out within the limit; a redirect loop stops.

The fetcher runs as its own process (``python -m services.fetcher``), fed through NATS, so its
peak RSS (VmHWM) is measured alone."""

from __future__ import annotations

import asyncio
import sys
import time
import zlib
from collections.abc import AsyncIterator
from pathlib import Path

import msgspec
import pytest
from aiohttp import web

from schemas.messages import FetchResult
from shared.bus import publish
from shared.names import Names
from shared.provision import provision
from tests.unit.fetcher.loopback import serve, work

GB = 1024**3
CHUNK = 256 * 1024
MAX_RSS = 200 * 1024 * 1024


async def _limits(request: web.BaseRequest) -> web.StreamResponse:
    if request.path == "/huge":  # 1 GB, generated on the fly, no Content-Length
        resp = web.StreamResponse(headers={"Content-Type": "text/html"})
        await resp.prepare(request)
        block = b"<p>" + b"x" * (CHUNK - 3)
        for _ in range(GB // CHUNK):
            await resp.write(block)
        return resp
    if request.path == "/bomb":  # gzip of 1 GB of zeros, compressed while it is sent
        resp = web.StreamResponse(headers={"Content-Type": "text/html", "Content-Encoding": "gzip"})
        await resp.prepare(request)
        packer = zlib.compressobj(9, zlib.DEFLATED, 31)
        zeros = bytes(4 * 1024 * 1024)
        for _ in range(GB // len(zeros)):
            await resp.write(packer.compress(zeros))
        await resp.write(packer.flush())
        return resp
    if request.path == "/slow":  # one byte per second
        resp = web.StreamResponse(headers={"Content-Type": "text/html", "Content-Length": "60"})
        await resp.prepare(request)
        for _ in range(60):
            await resp.write(b"x")
            await asyncio.sleep(1)
        return resp
    if request.path.startswith("/loop/"):
        n = int(request.path.rsplit("/", 1)[1])
        raise web.HTTPFound(f"/loop/{n + 1}")
    return web.Response(text="<html>ok</html>", content_type="text/html")


def _peak_rss(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmHWM")


@pytest.fixture
async def fetcher_process(env: dict[str, str], tmp_path: Path) -> AsyncIterator[int]:
    log = (tmp_path / "fetcher.log").open("wb")
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "services.fetcher", env=env, stdout=log, stderr=log
    )
    try:
        yield proc.pid
    finally:
        proc.terminate()
        await proc.wait()
        log.close()


async def test_caps_hold_and_memory_stays_small(nc, namespace, fetcher_process) -> None:
    names = Names(namespace)
    js = nc.jetstream()
    await provision(js, names)
    results: dict[str, FetchResult] = {}
    done = asyncio.Event()
    decode = msgspec.json.Decoder(FetchResult).decode

    async def on_result(msg) -> None:
        result = decode(msg.data)
        results[result.attempt.url.rsplit("/", 1)[-1]] = result
        if len(results) == 5:
            done.set()

    sub = await nc.subscribe(names.fetched, cb=on_result)
    async with serve(_limits, "127.0.0.2") as base:
        plan = {
            "huge": work(f"{base}/huge", entry_id=1, max_in_flight=8),
            "bomb": work(f"{base}/bomb", entry_id=2, max_in_flight=8),
            "slow": work(f"{base}/slow", entry_id=3, max_in_flight=8, timeout=2.0),
            "0": work(f"{base}/loop/0", entry_id=4, max_in_flight=8, max_redirects=3),
            "ok": work(f"{base}/ok", entry_id=5, max_in_flight=8),
        }
        started = time.monotonic()
        for item in plan.values():
            await publish(js, names.fetch, item)
        await asyncio.wait_for(done.wait(), 60)
        peak = _peak_rss(fetcher_process)
    await sub.unsubscribe()

    assert results["ok"].outcome == "ok"
    for name in ("huge", "bomb"):
        assert results[name].outcome == "rejected", results[name]
        assert "exceeds" in (results[name].error or "")
        assert results[name].payload_ref is None
    slow = results["slow"]
    assert slow.outcome == "timeout", slow
    assert 1500 < slow.elapsed_ms < 3500  # within the 2 s limit, not at the server's pace
    assert results["0"].outcome == "rejected" and "redirects" in (results["0"].error or "")
    assert time.monotonic() - started < 30
    assert peak < MAX_RSS, f"fetcher peak RSS {peak / 2**20:.0f} MiB"
