"""The admin API under attack (issue 17), as a real ``python -m control.api`` process on real
NATS and Postgres: auth fails closed, every id and query parameter is checked as the OpenAPI
document says, and hostile bodies (deep nesting, alias bombs, control characters, broken
hosts) or a hostile dead letter get a clear 4xx, never a 500."""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import aiohttp
import pytest

from schemas.messages import DeadLetter
from shared import names as n
from shared.bus import publish
from shared.names import Names
from shared.provision import provision
from tests.support.stack import eventually
from tests.unit.test_sources import ALIAS_BOMB

WRITE, READ = "write-token-h13", "read-token-h13"
PROBLEM = "application/problem+json"


@dataclass
class Proc:
    http: aiohttp.ClientSession
    base: str

    async def call(
        self, method: str, path: str, *, token: str | None = None, **kw: Any
    ) -> tuple[int, Any, aiohttp.ClientResponse]:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        headers.update(kw.pop("headers", {}))
        async with self.http.request(method, self.base + path, headers=headers, **kw) as resp:
            text = await resp.text()
            body = json.loads(text) if "json" in resp.content_type and text else text
            return resp.status, body, resp


@contextlib.asynccontextmanager
async def api_process(env: dict[str, str], nc, **tokens: str) -> AsyncIterator[Proc]:
    """``python -m control.api`` with these ``TRAWL_API_*TOKEN`` variables, once healthy."""
    names = Names(env["TRAWL_NAMESPACE"])
    await provision(nc.jetstream(timeout=10), names)
    env = {k: v for k, v in env.items() if not k.startswith("TRAWL_API_") or "LISTEN" in k}
    env.update({f"TRAWL_API_{k.upper()}": v for k, v in tokens.items()})
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "control.api",
        env=env,
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
    )
    base = f"http://{env['TRAWL_API_LISTEN']}"
    try:
        async with aiohttp.ClientSession() as http:

            async def healthy() -> bool:
                if proc.returncode is not None:
                    err = await proc.stderr.read() if proc.stderr else b""
                    raise AssertionError(f"the API process exited: {err.decode()[-3000:]}")
                with contextlib.suppress(aiohttp.ClientError):
                    async with http.get(base + "/readyz") as resp:
                        return resp.status == 200
                return False

            await eventually(healthy, timeout=30, what="the API process")
            yield Proc(http, base)
    finally:
        if proc.returncode is None:
            proc.terminate()
        _, err = await proc.communicate()
        # A handler that crashed logs "API handler failed": none may have.
        assert b"API handler failed" not in err, err.decode(errors="replace")[-4000:]


@pytest.fixture
async def api(env, nc) -> AsyncIterator[Proc]:
    async with api_process(env, nc, token=WRITE, read_token=READ) as proc:
        yield proc


SOURCE = {"name": "shop", "seeds": ["http://127.0.0.2:9/"], "allow_private": ["127.0.0.2/32"]}


# -- auth (defect 6) --------------------------------------------------------------------------
async def test_a_read_token_alone_lets_nobody_write(env, nc) -> None:
    async with api_process(env, nc, read_token=READ) as api:
        writes = [
            ("PUT", "/api/sources/shop", {"json": SOURCE}),
            ("POST", "/api/sources", {"json": SOURCE}),
            ("DELETE", "/api/sources/shop", {}),
            ("POST", "/api/dlq/purge", {"json": {}}),
        ]
        for method, path, kw in writes:
            status, body, resp = await api.call(method, path, **kw)
            assert status == 401 and resp.content_type == PROBLEM, (method, path, body)
            status, body, _ = await api.call(method, path, token=READ, **kw)
            assert status == 403 and "TRAWL_API_TOKEN" in body["detail"], (method, path, body)
            status, body, _ = await api.call(method, path, token="", **kw)
            assert status == 401, (method, path, body)
        status, listed, _ = await api.call("GET", "/api/sources", token=READ)
        assert (status, listed) == (200, [])  # nothing was written
        status, _, _ = await api.call("GET", "/api/sources")
        assert status == 401


async def test_head_on_public_routes_needs_no_token_and_405_says_allow(api: Proc) -> None:
    for path in ("/healthz", "/readyz", "/openapi.json", "/"):
        status, _, _ = await api.call("HEAD", path)
        assert status == 200, path
    status, _, _ = await api.call("HEAD", "/api/jobs")
    assert status == 401
    status, _, _ = await api.call("HEAD", "/api/jobs", token=READ)
    assert status == 200
    status, _, resp = await api.call("PATCH", "/api/sources/shop", token=WRITE)
    assert status == 405 and resp.content_type == PROBLEM
    assert set(resp.headers["Allow"].split(",")) >= {"GET", "PUT", "DELETE"}, resp.headers
    status, _, resp = await api.call("DELETE", "/healthz")
    assert status == 405 and "GET" in resp.headers["Allow"]


# -- ids and query parameters (defects 10, 12) ------------------------------------------------
async def test_ids_are_ascii_digits_only(api: Proc) -> None:
    status, proxy, _ = await api.call(
        "POST", "/api/proxies", token=WRITE, json={"url": "http://127.0.0.9:3128"}
    )
    assert status == 201, proxy
    pid = proxy["id"]
    arabic = "%D9%A" + "0123456789"[pid]  # the Arabic-Indic digit of the same value
    status, _, _ = await api.call("GET", f"/api/proxies/{pid}", token=READ)
    assert status == 200
    for raw in ("%C2%B9", "%C2%B2", arabic, "%EF%BC%91", "1_0", "+1", "%201"):
        for path in (f"/api/proxies/{raw}", f"/api/jobs/{raw}", f"/api/dlq/{raw}"):
            status, body, resp = await api.call("GET", path, token=READ)
            assert status == 404 and resp.content_type == PROBLEM, (path, status, body)
    status, body, _ = await api.call("GET", f"/api/payloads?job_id={arabic}", token=READ)
    assert status == 400 and "job_id" in body["detail"]


@pytest.mark.parametrize(
    ("query", "name"),
    [
        ("/api/jobs?status=bogus", "status"),
        ("/api/jobs?kind=", "kind"),
        ("/api/jobs?limit=%D9%A3", "limit"),
        ("/api/jobs?limit=0", "limit"),
        ("/api/jobs?limit=1&limit=2", "limit"),
        ("/api/jobs?offset=1e3", "offset"),
        ("/api/products?delisted=maybe", "delisted"),
        ("/api/products?min_misses=1.5", "min_misses"),
        ("/api/products?availability=plenty", "availability"),
        ("/api/dlq?stream=nope", "stream"),
        ("/api/payloads/latest", "url"),
    ],
)
async def test_query_parameters_are_checked_as_documented(api: Proc, query: str, name: str):
    status, body, resp = await api.call("GET", query, token=READ)
    assert status == 400 and resp.content_type == PROBLEM, (query, body)
    assert body["detail"].startswith(f"{name}: "), body


async def test_documented_query_values_are_accepted(api: Proc) -> None:
    for query in (
        "/api/jobs?status=running&kind=refresh&limit=500&offset=0",
        "/api/products?delisted=false&min_misses=0&availability=in_stock",
        "/api/dlq?stream=parsed&limit=1",
    ):
        status, body, _ = await api.call("GET", query, token=READ)
        assert status == 200, (query, body)


# -- hostile bodies (defects 9, 10) -----------------------------------------------------------
async def test_hostile_source_bodies_get_a_clear_4xx(api: Proc) -> None:
    status, body, _ = await api.call(
        "POST",
        "/api/sources/validate",
        token=WRITE,
        data=ALIAS_BOMB,
        headers={"Content-Type": "application/yaml"},
    )
    assert status == 422 and "aliases expand" in body["detail"], body
    cases: list[tuple[dict[str, Any], int, str]] = [
        ({"data": "name: a\x95\n", "headers": {"Content-Type": "application/yaml"}}, 422, "U+0095"),
        ({"data": "x: " + "[" * 5000 + "]" * 5000}, 422, "nested deeper than 64"),
    ]
    for kw, want, text in cases:
        kw["headers"] = kw.get("headers") or {"Content-Type": "application/yaml"}
        status, body, _ = await api.call("POST", "/api/sources/validate", token=WRITE, **kw)
        assert status == want and text in body["detail"], body
    deep = '{"name": "shop", "seeds": [], "api": {"body": ' + "[" * 50_000 + "]" * 50_000 + "}}"
    for method, path in (("PUT", "/api/sources/shop"), ("POST", "/api/sources")):
        status, body, _ = await api.call(
            method, path, token=WRITE, data=deep, headers={"Content-Type": "application/json"}
        )
        assert status == 400 and "nested deeper than 64" in body["detail"], body
    fairly_deep = {
        **SOURCE,
        "api": {"url": "http://127.0.0.2:9/a", "body": json.loads("[" * 200 + "]" * 200)},
    }
    status, body, _ = await api.call("PUT", "/api/sources/shop", token=WRITE, json=fairly_deep)
    assert status == 422 and "nested deeper than 64" in body["detail"], body
    status, body, _ = await api.call(
        "PUT", "/api/sources/shop", token=WRITE, json={**SOURCE, "allowed_domains": ["["]}
    )
    assert status == 422 and body["errors"] == [
        'allowed_domains[0]: "[" is not host[:port] (no scheme, no path)'
    ], body
    status, body, _ = await api.call(
        "PUT", "/api/sources/shop", token=WRITE, json={**SOURCE, "max_bytes": 10**12}
    )
    assert status == 422 and body["errors"][0].startswith("max_bytes: 1000000000000 must be")
    deep_json = "[" * 50_000 + "]" * 50_000
    status, body, _ = await api.call(
        "POST",
        "/api/jobs",
        token=WRITE,
        data='{"x": ' + deep_json + "}",
        headers={"Content-Type": "application/json"},
    )
    assert status in (400, 422), body
    status, listed, _ = await api.call("GET", "/api/sources", token=READ)
    assert listed == []


async def test_one_deeply_nested_letter_does_not_break_the_dlq_view(api: Proc, env, nc) -> None:
    names = Names(env["TRAWL_NAMESPACE"])
    js = nc.jetstream(timeout=10)
    deep = '{"a":' * 20_000 + "1" + "}" * 20_000
    for data in (deep, '{"a":' * 900 + "1" + "}" * 900, '{"ok": true}'):
        letter = DeadLetter(stream=n.PARSED, subject=names.parsed, reason="poison", data=data)
        await publish(js, names.dlq(n.PARSED), letter)
    for path in ("/api/dlq", "/api/dlq?stream=parsed", "/api/dlq/1", "/api/dlq/2"):
        status, body, _ = await api.call("GET", path, token=READ)
        assert status == 200, (path, body if isinstance(body, str) else "")
    status, page, _ = await api.call("GET", "/api/dlq", token=READ)
    assert [item["body"] for item in page["items"]] == [{"ok": True}, None, None]
    assert page["items"][2]["data"] == deep  # the original is still there to read
