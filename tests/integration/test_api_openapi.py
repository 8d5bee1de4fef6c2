"""The OpenAPI document matches the routes, and schemathesis finds no 5xx and no response
that breaks the document."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from aiohttp import web

from control.api import build_app
from tests.integration.test_api import WRITE, Api, running_api

ST = Path(sys.executable).with_name("st")


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


@pytest.mark.timeout(240)
async def test_schemathesis_finds_no_server_error(api: Api, tmp_path: Path) -> None:
    await api.call(
        "PUT", "/api/sources/shop", json={"name": "shop", "seeds": ["http://127.0.0.2:9/"]}
    )
    proc = await asyncio.create_subprocess_exec(
        str(ST),
        "run",
        f"{api.base}/openapi.json",
        "--header",
        f"Authorization: Bearer {WRITE}",
        "--checks",
        "not_a_server_error,status_code_conformance,content_type_conformance,"
        "response_headers_conformance,response_schema_conformance",
        "--phases",
        "coverage,fuzzing",
        "--max-examples",
        "5",
        "--workers",
        "2",
        "--request-timeout",
        "15",
        "--suppress-health-check",
        "all",
        "--seed",
        "1",
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
        cwd=tmp_path,
    )
    out, _ = await proc.communicate()
    text = out.decode(errors="replace")
    assert proc.returncode == 0, text[-12000:]
