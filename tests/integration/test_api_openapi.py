"""The OpenAPI document matches the routes, and schemathesis finds no 5xx and no response
that breaks the document."""

from __future__ import annotations

import asyncio
import re
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from aiohttp import web

from control.api import build_app
from schemas.messages import DeadLetter
from shared import names as n
from shared.bus import publish
from tests.integration.test_api import WRITE, Api, running_api


@pytest.fixture
async def api(settings, pool, nc) -> AsyncIterator[Api]:
    async with running_api(settings, pool, nc) as a:
        yield a


def _served(app: web.Application) -> set[tuple[str, str]]:
    out = set()
    for route in app.router.routes():
        if route.method == "HEAD" or route.resource is None:
            continue
        if route.resource.canonical.startswith("/static"):
            continue
        out.add((route.method, route.resource.canonical))
    return out


async def test_every_route_documented_and_every_documented_route_served(api: Api) -> None:
    status, doc, _ = await api.call("GET", "/openapi.json", token=None)
    assert status == 200 and doc["openapi"].startswith("3.1")
    documented = {(m.upper(), p) for p, ops in doc["paths"].items() for m in ops}
    served = _served(build_app(api.rt))
    assert documented == served
    # Every operation documents its errors as problem+json.
    for path, ops in doc["paths"].items():
        for method, op in ops.items():
            for code, resp in op["responses"].items():
                if code.startswith(("4", "5")) and path != "/readyz":
                    assert "application/problem+json" in resp["content"], (method, path, code)
            if method != "get":
                assert {"401", "403"} <= set(op["responses"]), (method, path)


CONFIG = Path(__file__).with_name("schemathesis.toml")


@pytest.mark.timeout(600)  # ~4 min on a loaded 2-core machine
async def test_schemathesis_finds_no_server_error_and_no_disagreement(
    api: Api, tmp_path: Path
) -> None:
    """Every check but object-level authorization (one token sees everything by design), on
    every phase, stateful through the links schemathesis infers from the document: no 5xx,
    no response outside the document, no schema-valid request refused as malformed, no
    schema-invalid one accepted, no write or read let through without the token."""
    await _seed(api)
    report = tmp_path / "report.ndjson"
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        # schemathesis imported up front: its lazy import of the ASGI transport from two worker
        # threads at once tripped CPython 3.11's AST recursion check (a SystemError).
        "import sys, schemathesis.transport.asgi\n"
        "from schemathesis.cli import schemathesis\n"
        "sys.argv[0] = 'st'\n"
        "sys.exit(schemathesis())",
        "--config-file",
        str(CONFIG),
        "run",
        f"{api.base}/openapi.json",
        "--header",
        f"Authorization: Bearer {WRITE}",
        "--checks",
        "all",
        "--exclude-checks",
        "object_level_authorization",
        "--phases",
        "examples,coverage,fuzzing,stateful",
        "--max-examples",
        "3",  # per operation and phase: with the coverage phase's boundaries, ~3000 requests
        "--workers",
        "2",
        "--request-timeout",
        "15",
        "--suppress-health-check",
        "all",
        "--seed",
        "1",
        "--generation-deterministic",  # no example database either: the same run every time
        "--report",
        "ndjson",
        "--report-ndjson-path",
        str(report),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
        cwd=tmp_path,
    )
    out, _ = await proc.communicate()
    text = out.decode(errors="replace")
    assert report.exists(), text[-4000:]
    requests, server_errors = _count(report)
    print(f"schemathesis: {requests} requests, {server_errors} answered 5xx")
    assert proc.returncode == 0, text[-12000:]
    assert server_errors == 0 and requests > 1000, text[-4000:]


async def _seed(api: Api) -> None:
    """One object of each kind, id 1, so the ids the coverage phase tries (the minimum, 1)
    reach real objects, and the inferred links have something to follow."""
    calls = [
        ("PUT", "/api/sources/shop", {"name": "shop", "seeds": ["http://127.0.0.2:9/"]}),
        ("POST", "/api/jobs", {"source": "shop"}),
        ("POST", "/api/proxies", {"url": "http://127.0.0.9:3128"}),
        ("POST", "/api/schedules", {"source": "shop", "spec": "@daily"}),
    ]
    for method, path, body in calls:
        status, answer, _ = await api.call(method, path, json=body)
        assert status in (200, 201), (path, answer)
    letter = DeadLetter(stream=n.PARSED, subject=api.rt.names.parsed, reason="seed", data="{}")
    await publish(api.rt.js, api.rt.names.dlq(n.PARSED), letter)


def _count(report: Path) -> tuple[int, int]:
    """(requests sent, 5xx answers) from schemathesis's NDJSON event log."""
    requests = server_errors = 0
    for line in report.read_text().splitlines():
        for status in re.findall(r'"status_code":\s*(\d+)', line):
            requests += 1
            server_errors += status.startswith("5")
    return requests, server_errors
