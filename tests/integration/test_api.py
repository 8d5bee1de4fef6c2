"""Admin API against real NATS and Postgres: the scheduler's API app in-process, with the
scheduler's trigger request path so ``POST /api/jobs`` starts real jobs."""

from __future__ import annotations

import asyncio
import contextlib
import re
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import aiohttp
import pytest
from aiohttp import web

from control.api import all_routes, build_app
from control.api.auth import Auth
from schemas.messages import DeadLetter
from services.scheduler.service import Scheduler
from shared import names as n
from shared.bus import publish
from shared.names import Names
from shared.provision import provision
from shared.service import DbRuntime

WRITE, READ = "write-token-0123", "read-token-4567"
PROBLEM = "application/problem+json"


@dataclass
class Api:
    http: aiohttp.ClientSession
    rt: DbRuntime
    base: str

    async def call(
        self, method: str, path: str, *, token: str | None = WRITE, **kw: Any
    ) -> tuple[int, Any, aiohttp.ClientResponse]:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        headers.update(kw.pop("headers", {}))
        async with self.http.request(method, self.base + path, headers=headers, **kw) as resp:
            ctype = resp.content_type
            body = await resp.json(content_type=None) if "json" in ctype else await resp.text()
            return resp.status, body, resp


@contextlib.asynccontextmanager
async def running_api(settings, pool, nc) -> AsyncIterator[Api]:
    """The API app on the test's port, tokens WRITE/READ, and the scheduler's trigger path."""
    js = nc.jetstream(timeout=10)
    names = Names(settings.namespace)
    await provision(js, names, max_deliver=settings.max_deliver)
    rt = DbRuntime("scheduler", settings, names, nc, js, asyncio.Event(), pool=pool)
    sched = Scheduler(rt)
    sub = await nc.subscribe(names.trigger, queue=names.trigger_queue, cb=sched.on_trigger_request)
    runner = web.AppRunner(build_app(rt, auth_conf=Auth(WRITE, READ)), access_log=None)
    await runner.setup()
    host, _, port = settings.api_listen.rpartition(":")
    await web.TCPSite(runner, host, int(port)).start()
    try:
        async with aiohttp.ClientSession() as http:
            yield Api(http, rt, f"http://{settings.api_listen}")
    finally:
        await sub.unsubscribe()
        await runner.cleanup()


@pytest.fixture
async def api(settings, pool, nc) -> AsyncIterator[Api]:
    async with running_api(settings, pool, nc) as a:
        yield a


SOURCE = {
    "name": "shop",
    "seeds": ["http://127.0.0.2:9/c/a?page=1", "http://127.0.0.2:9/c/b"],
    "allow_private": ["127.0.0.2/32"],
    "pacing": {"min_delay": 5, "max_delay": 10, "max_in_flight": 1},
}


def concrete(path: str) -> str:
    return re.sub(r"\{[^}]+\}", "1", path)


# -- auth -------------------------------------------------------------------------------------
async def test_every_write_route_needs_the_write_token(api: Api) -> None:
    writes = [r for r in all_routes() if r.write]
    assert len(writes) >= 20
    for r in writes:
        path = concrete(r.path)
        for token in (None, "wrong-token"):
            status, body, resp = await api.call(r.method, path, token=token, json={})
            assert status == 401, (r.method, r.path, token, body)
            assert resp.content_type == PROBLEM
            assert resp.headers["WWW-Authenticate"].startswith("Bearer")
        status, body, resp = await api.call(r.method, path, token=READ, json={})
        assert status == 403, (r.method, r.path, body)
        assert resp.content_type == PROBLEM and body["status"] == 403


async def test_reads_take_either_token_and_public_routes_none(api: Api) -> None:
    for token in (WRITE, READ):
        status, body, _ = await api.call("GET", "/api/jobs", token=token)
        assert status == 200 and body["items"] == []
    status, _, _ = await api.call("GET", "/api/jobs", token=None)
    assert status == 401
    status, body, _ = await api.call(
        "GET", "/api/jobs", token=None, headers={"Authorization": "Basic x"}
    )
    assert status == 401
    for path in ("/healthz", "/readyz", "/openapi.json", "/"):
        status, body, _ = await api.call("GET", path, token=None)
        assert status == 200, (path, body)
    status, body, _ = await api.call("GET", "/readyz", token=None)
    assert body == {"ready": True, "checks": {"nats": True, "postgres": True}}


# -- jobs ---------------------------------------------------------------------------------------
async def _start(api: Api) -> int:
    status, body, _ = await api.call("PUT", "/api/sources/shop", json=SOURCE)
    assert status == 201, body
    status, body, _ = await api.call("POST", "/api/jobs", json={"source": "shop"})
    assert status == 201, body
    return body["job_id"]


async def test_jobs_lifecycle_through_the_api(api: Api) -> None:
    job_id = await _start(api)
    status, body, _ = await api.call("POST", "/api/jobs", json={"source": "shop"})
    assert (status, body) == (201, {"job_id": job_id, "existing": True})
    status, body, _ = await api.call("POST", "/api/jobs", json={"source": "nope"})
    assert status == 422 and "nope" in body["detail"]

    status, page, _ = await api.call("GET", "/api/jobs?status=running&source=shop&limit=1")
    assert status == 200 and page["total"] == 1 and page["items"][0]["id"] == job_id
    status, page, _ = await api.call("GET", "/api/jobs?status=completed")
    assert page["total"] == 0 and page["items"] == []
    status, job, _ = await api.call("GET", f"/api/jobs/{job_id}")
    assert job["status"] == "running" and job["counters"]["pending"] == 2
    status, stats, _ = await api.call("GET", "/api/jobs/stats")
    assert stats["jobs"] == {"running": 1} and stats["entries"] == {"pending": 2}
    status, entries, _ = await api.call("GET", f"/api/jobs/{job_id}/entries?state=pending")
    assert entries["total"] == 2 and {e["url"] for e in entries["items"]} == set(SOURCE["seeds"])

    status, body, _ = await api.call("POST", f"/api/jobs/{job_id}/boost", json={"amount": 5})
    assert (status, body["affected"]) == (200, 2)
    status, body, _ = await api.call("POST", f"/api/jobs/{job_id}/boost")  # default amount
    assert (status, body["affected"]) == (200, 2)
    status, body, _ = await api.call("POST", f"/api/jobs/{job_id}/boost", json={"amount": 0})
    assert status == 422
    status, body, _ = await api.call("POST", f"/api/jobs/{job_id}/pause")
    assert body["status"] == "paused"
    status, body, _ = await api.call("POST", f"/api/jobs/{job_id}/resume")
    assert body["status"] == "running"

    status, body, _ = await api.call("POST", f"/api/jobs/{job_id}/cancel")
    assert (status, body["status"], body["affected"]) == (200, "cancelled", 2)
    status, body, resp = await api.call("POST", f"/api/jobs/{job_id}/cancel")
    assert status == 409 and resp.content_type == PROBLEM and "cancelled" in body["detail"]

    status, body, _ = await api.call(
        "POST", "/api/jobs/bulk", json={"action": "boost", "ids": [job_id, 424242]}
    )
    assert status == 200
    assert body["results"][0] == {
        "job_id": job_id,
        "ok": True,
        "affected": 0,
        "status": None,
        "error": None,
    }
    assert body["results"][1]["ok"] is False and "not found" in body["results"][1]["error"]
    status, body, _ = await api.call(
        "POST", "/api/jobs/bulk", json={"action": "explode", "ids": []}
    )
    assert status == 422 and body["title"] == "Unprocessable Content"

    for path in (
        "/api/jobs/424242",
        "/api/jobs/0",
        "/api/jobs/abc",
        "/api/jobs/99999999999999999999",
    ):
        status, body, resp = await api.call("GET", path)
        assert status == 404 and resp.content_type == PROBLEM, path
    status, body, resp = await api.call("GET", "/api/jobs?limit=many")
    assert status == 400 and resp.content_type == PROBLEM and "limit" in body["detail"]
    status, body, _ = await api.call("POST", "/api/jobs", data=b"{not json")
    assert status == 400


# -- sources ------------------------------------------------------------------------------------
async def test_sources_crud_and_validation(api: Api) -> None:
    status, body, _ = await api.call(
        "POST", "/api/sources", json={"name": "x", "seeds": ["ftp://a"]}
    )
    assert status == 422 and body["errors"], body
    status, body, _ = await api.call(
        "POST",
        "/api/sources/validate",
        data="name: y\nseeds: [http://a.example/]\nrobots: maybe\n",
        headers={"Content-Type": "application/yaml"},
    )
    assert status == 200 and body["valid"] is False
    assert any("robots" in e for e in body["errors"]), body
    status, body, _ = await api.call("POST", "/api/sources/validate", json=SOURCE)
    assert body["valid"] is True and body["source"]["name"] == "shop"
    status, _, _ = await api.call("GET", "/api/sources/shop")
    assert status == 404

    status, body, _ = await api.call("PUT", "/api/sources/shop", json=SOURCE)
    assert status == 201 and body["definition"]["seeds"] == SOURCE["seeds"]
    status, body, _ = await api.call("PUT", "/api/sources/shop", json={**SOURCE, "locale": "de-DE"})
    assert status == 200 and body["definition"]["locale"] == "de-DE"
    status, body, _ = await api.call("PUT", "/api/sources/other", json=SOURCE)
    assert status == 422
    status, listed, _ = await api.call("GET", "/api/sources")
    assert [s["name"] for s in listed] == ["shop"]

    status, body, _ = await api.call("POST", "/api/jobs", json={"source": "shop"})
    status, body, _ = await api.call("GET", "/api/sources/shop")
    assert body["running_job"] is not None
    status, body, _ = await api.call("DELETE", "/api/sources/shop")
    assert status == 409 and "has jobs" in body["detail"]  # its job is its history
    status, _, _ = await api.call("POST", "/api/sources", json={**SOURCE, "name": "spare"})
    assert status == 201
    status, _, _ = await api.call(
        "POST", "/api/schedules", json={"source": "spare", "spec": "@daily"}
    )
    assert status == 201
    status, _, _ = await api.call("DELETE", "/api/sources/spare")
    assert status == 204  # its schedule goes with it, as with `trawl source delete`
    status, schedules, _ = await api.call("GET", "/api/schedules")
    assert [s for s in schedules if s["source"] == "spare"] == []
    status, _, _ = await api.call("DELETE", "/api/sources/spare")
    assert status == 404


# -- schedules ----------------------------------------------------------------------------------
async def test_schedules(api: Api) -> None:
    await api.call("PUT", "/api/sources/shop", json=SOURCE)
    status, body, _ = await api.call(
        "POST", "/api/schedules", json={"source": "shop", "spec": "@fortnightly"}
    )
    assert status == 422 and "fortnightly" in body["detail"]
    status, body, _ = await api.call(
        "POST", "/api/schedules", json={"source": "no", "spec": "@daily"}
    )
    assert status == 422
    status, sched, _ = await api.call(
        "POST", "/api/schedules", json={"source": "shop", "spec": "@every 4h", "kind": "refresh"}
    )
    assert status == 201 and sched["enabled"] and sched["spec"] == "@every 4h"
    sid = sched["id"]
    status, body, _ = await api.call("POST", f"/api/schedules/{sid}/disable")
    assert body["enabled"] is False
    status, body, _ = await api.call("POST", f"/api/schedules/{sid}/enable")
    assert body["enabled"] is True
    status, body, _ = await api.call("POST", f"/api/schedules/{sid}/run")
    assert status == 202 and body["schedule_id"] == sid
    status, listed, _ = await api.call("GET", "/api/schedules")
    assert [s["id"] for s in listed] == [sid]
    status, _, _ = await api.call("DELETE", f"/api/schedules/{sid}")
    assert status == 204
    status, _, _ = await api.call("GET", f"/api/schedules/{sid}")
    assert status == 404


# -- domains ------------------------------------------------------------------------------------
async def test_domains_pacing_and_why_not_fetched(api: Api) -> None:
    job_id = await _start(api)
    status, domains, _ = await api.call("GET", "/api/domains")
    assert status == 200
    (d,) = [d for d in domains if d["domain"] == "127.0.0.2:9"]
    assert d["pending"] == 2 and d["paused"] is False and d["max_in_flight"] == 1

    status, why, _ = await api.call("GET", "/api/domains/127.0.0.2:9/why")
    assert {w["entry_id"] for w in why} and all(w["job_id"] == job_id for w in why)
    assert all("queued behind" in w["reason"] or "pacing" in w["reason"] for w in why), why

    status, body, _ = await api.call("POST", "/api/domains/127.0.0.2:9/pause")
    assert body == {"domain": "127.0.0.2:9", "status": "paused"}
    status, why, _ = await api.call("GET", f"/api/domains/why?url={SOURCE['seeds'][0]}")
    assert [w["reason"] for w in why] == ["domain is paused"]
    status, body, _ = await api.call("POST", "/api/domains/127.0.0.2:9/resume")
    assert body["status"] == "active"

    status, body, _ = await api.call(
        "POST",
        "/api/domains/127.0.0.2:9/pace",
        json={"min_delay": 0, "max_delay": 1, "max_in_flight": 3},
    )
    assert status == 200
    status, d, _ = await api.call("GET", "/api/domains/127.0.0.2:9")
    assert (d["min_delay"], d["max_delay"], d["max_in_flight"]) == (0, 1, 3)
    status, body, _ = await api.call(
        "POST", "/api/domains/127.0.0.2:9/pace", json={"min_delay": 9, "max_delay": 1}
    )
    assert status == 422
    status, _, _ = await api.call("POST", "/api/domains/unknown.example/pause")
    assert status == 404
    await api.call("POST", f"/api/jobs/{job_id}/pause")
    status, why, _ = await api.call("GET", "/api/domains/127.0.0.2:9/why")
    assert {w["reason"] for w in why} == {"job is paused"}


async def test_domains_reset_clears_a_parked_domain(api: Api, pool) -> None:
    """A domain parked by a hostile Retry-After (year 2343, as before the cap) and a retry
    waiting as long: the operator's reset makes both go now; pause and resume did not."""
    await _start(api)
    async with pool.acquire() as conn:
        await conn.execute(
            "UPDATE domains SET next_allowed_at = '2343-01-01', backoff = 16 WHERE domain = $1",
            "127.0.0.2:9",
        )
        waiting = await conn.fetchval(
            """UPDATE entries SET state = 'waiting', not_before = '2343-01-01'
               WHERE id = (SELECT min(id) FROM entries WHERE domain = $1) RETURNING id""",
            "127.0.0.2:9",
        )
    for action in ("pause", "resume"):
        await api.call("POST", f"/api/domains/127.0.0.2:9/{action}")
    status, d, _ = await api.call("GET", "/api/domains/127.0.0.2:9")
    assert d["next_allowed_at"].startswith("2343") and d["backoff"] == 16

    status, body, _ = await api.call("POST", "/api/domains/127.0.0.2:9/reset")
    assert status == 200
    assert body == {"domain": "127.0.0.2:9", "status": "reset", "retries_due": 1}
    async with pool.acquire() as conn:
        row = await conn.fetchrow(
            "SELECT next_allowed_at <= now() AS due, backoff FROM domains WHERE domain = $1",
            "127.0.0.2:9",
        )
        entry_due = await conn.fetchval(
            "SELECT not_before <= now() FROM entries WHERE id = $1", waiting
        )
    assert (row["due"], row["backoff"], entry_due) == (True, 1, True)
    status, _, _ = await api.call("POST", "/api/domains/unknown.example/reset")
    assert status == 404
    status, _, _ = await api.call("POST", "/api/domains/127.0.0.2:9/reset", token=READ)
    assert status in (401, 403)


# -- products -----------------------------------------------------------------------------------
async def test_products_filters_and_history(api: Api, pool) -> None:
    async with pool.acquire() as conn:
        await conn.executemany(
            """INSERT INTO products (source, key, name, price, currency, availability,
                                     consecutive_misses) VALUES ($1, $2, $3, $4, 'EUR', $5, $6)""",
            [
                ("shop", "k1", "Red Kettle", 10.5, "in_stock", 0),
                ("shop", "k2", "Blue Lamp", 20, "out_of_stock", 3),
                ("other", "k1", "Chair", 5, "in_stock", 1),
            ],
        )
        await conn.executemany(
            """INSERT INTO snapshots (source, key, price, currency, availability, observed_at)
               VALUES ('shop', 'k1', $1, 'EUR', $2, now() - make_interval(hours => $3))""",
            [(12, "in_stock", 2), (10.5, "in_stock", 1)],
        )
    status, page, _ = await api.call("GET", "/api/products?source=shop")
    assert page["total"] == 2 and [p["key"] for p in page["items"]] == ["k1", "k2"]
    assert page["items"][0]["price"] == "10.5" and page["items"][0]["currency"] == "EUR"
    status, page, _ = await api.call("GET", "/api/products?availability=in_stock")
    assert {(p["source"], p["key"]) for p in page["items"]} == {("shop", "k1"), ("other", "k1")}
    status, page, _ = await api.call("GET", "/api/products?min_misses=2")
    assert [p["key"] for p in page["items"]] == ["k2"]
    status, page, _ = await api.call("GET", "/api/products?q=kettle&limit=1&offset=0")
    assert [p["name"] for p in page["items"]] == ["Red Kettle"]
    status, one, _ = await api.call("GET", "/api/products/shop/k1")
    assert one["product"]["name"] == "Red Kettle"
    assert [s["price"] for s in one["snapshots"]] == ["12", "10.5"]
    status, _, _ = await api.call("GET", "/api/products/shop/nope")
    assert status == 404


async def test_changes_cursor_and_filters(api: Api, pool) -> None:
    async with pool.acquire() as conn:
        await conn.executemany(
            """INSERT INTO product_events (source, key, job_id, kind, after, direction, percent)
               VALUES ($1, $2, 1, $3, '{"price": "9"}', $4, $5)""",
            [
                ("shop", "k1", "new", None, None),
                ("shop", "k1", "price_changed", "down", -10.0),
                ("other", "k9", "new", None, None),
                ("shop", "k2", "out_of_stock", None, None),
            ],
        )
    status, page, _ = await api.call("GET", "/api/changes?source=shop&limit=2", token=READ)
    assert status == 200 and page["more"] is True
    assert [(e["key"], e["kind"]) for e in page["items"]] == [
        ("k1", "new"),
        ("k1", "price_changed"),
    ]
    assert page["items"][1]["percent"] == -10.0 and page["items"][1]["after"]["price"] == "9"
    status, rest, _ = await api.call("GET", f"/api/changes?source=shop&after={page['next']}")
    assert [e["key"] for e in rest["items"]] == ["k2"] and rest["more"] is False
    status, empty, _ = await api.call("GET", f"/api/changes?source=shop&after={rest['next']}")
    assert empty["items"] == [] and empty["next"] == rest["next"]
    status, kinds, _ = await api.call("GET", "/api/changes?kind=new")
    assert [e["key"] for e in kinds["items"]] == ["k1", "k9"]
    status, problem, _ = await api.call("GET", "/api/changes?kind=bogus")
    assert status == 400 and "bogus" in problem["detail"]
    status, problem, _ = await api.call("GET", "/api/changes?since=yesterday")
    assert status == 400
    status, recent, _ = await api.call("GET", "/api/changes?since=2000-01-01T00:00:00Z")
    assert len(recent["items"]) == 4
    # Newest first (the dashboard's feed), paged backwards by the oldest id shown.
    status, newest, _ = await api.call("GET", "/api/changes?source=shop&before=0&limit=2")
    assert [e["key"] for e in newest["items"]] == ["k2", "k1"] and newest["more"] is True
    status, older, _ = await api.call("GET", f"/api/changes?source=shop&before={newest['next']}")
    assert [(e["key"], e["kind"]) for e in older["items"]] == [("k1", "new")]
    assert older["more"] is False and older["next"] == 0
    status, problem, _ = await api.call("GET", "/api/changes?after=1&before=5")
    assert status == 422


async def test_changes_held_for_verification(api: Api, pool) -> None:
    async with pool.acquire() as conn:
        await conn.executemany(
            """INSERT INTO product_events (source, key, job_id, kind, after, verification)
               VALUES ('shop', $1, 1, $2, '{"availability": "out_of_stock"}', $3)""",
            [
                ("k1", "out_of_stock", None),  # needed no verification
                ("k2", "out_of_stock", "confirmed"),
                ("k3", "out_of_stock", "cancelled"),
                ("k4", "delisted", "cancelled"),
                ("k5", "delisted", "unknown"),
                ("k6", "out_of_stock", "pending"),
            ],
        )
    status, page, _ = await api.call("GET", "/api/changes?source=shop", token=READ)
    assert status == 200 and [e["key"] for e in page["items"]] == ["k1", "k2"]  # emitted only
    status, page, _ = await api.call("GET", "/api/changes?verification=cancelled")
    assert status == 200, page
    assert [e["key"] for e in page["items"]] == ["k3", "k4"]
    status, problem, _ = await api.call("GET", "/api/changes?verification=maybe")
    assert status == 400 and "maybe" in problem["detail"]
    status, counts, _ = await api.call("GET", "/api/changes/verification?source=shop", token=READ)
    assert status == 200
    assert counts == {"pending": 1, "confirmed": 1, "cancelled": 2, "unknown": 1}
    status, counts, _ = await api.call("GET", "/api/changes/verification?source=other")
    assert counts == {"pending": 0, "confirmed": 0, "cancelled": 0, "unknown": 0}


async def test_alert_rules_crud_and_refusals(api: Api) -> None:
    body = {
        "source": "shop",
        "condition": "drop",
        "threshold": "10",
        "webhook": "https://h.example/x",
    }
    status, rule, _ = await api.call("POST", "/api/alerts", json=body)
    assert status == 201 and rule["condition"] == "drop" and len(rule["secret"]) == 64
    status, _, _ = await api.call("POST", "/api/alerts", json=body, token=READ)
    assert status == 403
    unsafe = {**body, "webhook": "https://127.0.0.1/x"}
    status, problem, _ = await api.call("POST", "/api/alerts", json=unsafe)
    assert status == 422 and "loopback" in problem["detail"]
    status, problem, _ = await api.call("POST", "/api/alerts", json={**body, "condition": "x"})
    assert status == 422
    status, rules, _ = await api.call("GET", "/api/alerts?source=shop", token=READ)
    assert [(r["id"], r["secret"]) for r in rules] == [(rule["id"], "")]  # shown once only
    status, _, _ = await api.call("DELETE", f"/api/alerts/{rule['id']}")
    assert status == 204
    status, _, _ = await api.call("DELETE", f"/api/alerts/{rule['id']}")
    assert status == 404


async def test_a_sources_alerts_are_its_file_rules(api: Api) -> None:
    rule = {"name": "cheaper", "condition": "drop", "threshold": "10%",
            "webhook": "https://h.example/x", "secret": "${TRAWL_SECRET_HOOK}"}  # fmt: skip
    status, _, _ = await api.call("POST", "/api/sources", json={**SOURCE, "alerts": [rule]})
    assert status == 201
    status, rules, _ = await api.call("GET", "/api/alerts?source=shop", token=READ)
    [made] = rules
    assert made["origin"] == "source" and made["threshold"] == "10.0"
    status, problem, _ = await api.call("DELETE", f"/api/alerts/{made['id']}")
    assert status == 409 and "source file" in problem["detail"]
    literal = {**rule, "secret": "k3y-value"}
    status, problem, _ = await api.call(
        "PUT", "/api/sources/shop", json={**SOURCE, "alerts": [literal]}
    )
    assert status == 422 and "alerts[0].secret" in problem["detail"]
    assert "k3y-value" not in problem["detail"]
    status, _, _ = await api.call("PUT", "/api/sources/shop", json=SOURCE)
    assert status == 200
    status, rules, _ = await api.call("GET", "/api/alerts?source=shop", token=READ)
    assert rules == []


# -- proxies ------------------------------------------------------------------------------------
async def test_proxies_never_show_credentials(api: Api) -> None:
    status, body, _ = await api.call("POST", "/api/proxies", json={"url": "ftp://u:secret@h:1"})
    assert status == 422 and "secret" not in str(body)
    status, proxy, _ = await api.call(
        "POST", "/api/proxies", json={"url": "http://user:s3cret@127.0.0.9:3128"}
    )
    assert status == 201, proxy
    assert "s3cret" not in str(proxy) and proxy["active"] and proxy["healthy"]
    pid = proxy["id"]
    status, body, _ = await api.call("POST", f"/api/proxies/{pid}/disable")
    assert body["active"] is False and body["healthy"] is False
    status, body, _ = await api.call("POST", f"/api/proxies/{pid}/enable")
    assert body["active"] is True
    status, listed, _ = await api.call("GET", "/api/proxies")
    assert [p["id"] for p in listed] == [pid] and "s3cret" not in str(listed)
    status, _, _ = await api.call("DELETE", f"/api/proxies/{pid}")
    assert status == 204
    status, _, _ = await api.call("GET", f"/api/proxies/{pid}")
    assert status == 404


async def test_proxies_at_forbidden_places_are_refused(api: Api) -> None:
    """The API refuses a proxy the fetcher would have to refuse (issue 17, defect 8): the
    metadata address in any spelling, our own Postgres/NATS/API ports even on the loopback
    network this test deployment lists, and private networks it does not list."""
    api_port = api.base.rpartition(":")[2]
    refused = {
        "http://169.254.169.254:80": "metadata",
        "http://[::169.254.169.254]:3128": "metadata",
        "http://metadata.google.internal:80": "metadata",
        "http://u:s3cret@127.0.0.1:5432": "port 5432",
        "http://127.0.0.1:4222": "port 4222",
        f"http://127.0.0.1:{api_port}": f"port {api_port}",
        "http://10.0.0.1:3128": "private",
        "http://[fd00::1]:3128": "unique-local",
    }
    for url, reason in refused.items():
        status, body, _ = await api.call("POST", "/api/proxies", json={"url": url})
        assert status == 422, (url, body)
        assert reason in body["detail"] and "s3cret" not in str(body), (url, body)
    status, listed, _ = await api.call("GET", "/api/proxies")
    assert listed == []


# -- dlq ----------------------------------------------------------------------------------------
async def _dead_letter(api: Api, key: str, subject: str, data: str, headers: dict) -> None:
    letter = DeadLetter(
        stream=key, subject=subject, reason="boom", num_delivered=5, data=data, headers=headers
    )
    await publish(api.rt.js, api.rt.names.dlq(key), letter)


async def test_dlq_list_inspect_requeue_purge(api: Api) -> None:
    names, js = api.rt.names, api.rt.js
    work = '{"type":"fetch_work","attempt_id":"7.1","job_id":1,"entry_id":7,"source":"s","url":"http://x/","domain":"x"}'
    await _dead_letter(api, n.FETCH, names.fetch, work, {"Nats-Msg-Id": "fetch-7.1", "X-Keep": "1"})
    await _dead_letter(api, n.TRIGGER, names.trigger, '{"source":"shop"}', {"X-From": "cli"})
    await _dead_letter(api, n.PARSED, names.parsed, "{}", {})

    status, page, _ = await api.call("GET", "/api/dlq")
    assert page["total"] == 3 and [i["stream"] for i in page["items"]] == [
        "parsed",
        "trigger",
        "fetch",
    ]
    status, page, _ = await api.call("GET", "/api/dlq?stream=fetch")
    (fetch_letter,) = page["items"]
    assert fetch_letter["body"]["attempt_id"] == "7.1" and fetch_letter["reason"] == "boom"
    status, one, _ = await api.call("GET", f"/api/dlq/{fetch_letter['seq']}")
    assert one["headers"]["X-Keep"] == "1"

    before = (await js.stream_info(names.stream(n.FETCH))).state.messages
    status, body, _ = await api.call("POST", f"/api/dlq/{fetch_letter['seq']}/requeue")
    assert status == 200 and body["subject"] == names.fetch
    info = await js.stream_info(names.stream(n.FETCH))
    assert info.state.messages == before + 1
    msg = await js.get_msg(names.stream(n.FETCH), info.state.last_seq)
    assert msg.data.decode() == work and msg.headers["X-Keep"] == "1"
    status, _, _ = await api.call("GET", f"/api/dlq/{fetch_letter['seq']}")
    assert status == 404

    status, page, _ = await api.call("GET", "/api/dlq?stream=trigger")
    trig_before = (await js.stream_info(names.stream(n.TRIGGER))).state.messages
    status, body, _ = await api.call("POST", f"/api/dlq/{page['items'][0]['seq']}/requeue")
    assert status == 200 and body["subject"] == names.trigger
    info = await js.stream_info(names.stream(n.TRIGGER))
    assert info.state.messages == trig_before + 1
    msg = await js.get_msg(names.stream(n.TRIGGER), info.state.last_seq)
    assert msg.data == b'{"source":"shop"}' and msg.headers["X-From"] == "cli"

    status, body, _ = await api.call("POST", "/api/dlq/purge", json={"stream": "parsed"})
    assert body == {"purged": 1}
    status, page, _ = await api.call("GET", "/api/dlq")
    assert page["total"] == 0
    status, _, _ = await api.call("POST", "/api/dlq/999/requeue")
    assert status == 404


async def test_workers_and_streams_in_process(api: Api) -> None:
    status, workers, _ = await api.call("GET", "/api/workers")
    assert status == 200 and workers == []  # no service registered in this test
    status, streams, _ = await api.call("GET", "/api/streams")
    by_key = {s["key"]: s for s in streams}
    assert {"trigger", "fetch", "fetched", "parsed", "events", "dlq"} <= set(by_key)
    assert {c["name"] for c in by_key["fetched"]["consumers"]} == {
        "scheduler-fetched",
        "parser-fetched",
    }
