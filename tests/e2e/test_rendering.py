"""End to end: a source with ``render`` crawls the demo shop's JavaScript-only section through a
renderer (headless Debian Chromium), and a page cannot make the browser reach a forbidden
address."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from control.client import TrawlClient
from demo.shop import DemoShop
from services.scheduler.catalog import save_source
from shared.sources import source_from_dict
from tests.support.stack import Stack, eventually

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.timeout(240),
    pytest.mark.skipif(shutil.which("chromium") is None, reason="Debian's chromium is missing"),
]


@pytest.fixture
async def shop():
    async with DemoShop(hosts=("127.0.0.2", "127.0.0.3"), port=0, products=24) as s:
        yield s


@pytest.fixture
async def forbidden():
    """A server on a loopback address no source allows, logging every request it gets."""
    seen: list[str] = []

    async def record(request: web.Request) -> web.StreamResponse:
        seen.append(request.path_qs)
        return web.Response(text="secret")

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", record)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.9", 0)
    await site.start()
    port = runner.addresses[0][1]
    try:
        yield f"http://127.0.0.9:{port}", seen
    finally:
        await runner.cleanup()


@pytest.fixture
def env(env: dict[str, str]) -> dict[str, str]:
    # Two pages at a time per renderer: the suite shares two cores with other stacks.
    return {**env, "TRAWL_RENDER_CONTEXTS": "2"}


async def _crawl(
    definition: dict[str, Any], env: dict[str, str], settings: Any, pool: Any, logs: Path
) -> tuple[dict[str, Any], dict[str, dict[str, Any]], str]:
    async with pool.acquire() as conn:
        await save_source(conn, source_from_dict(definition))
    async with Stack(env, logs, scale="renderer=1") as stack, TrawlClient(settings) as client:
        reply = await client.trigger(definition["name"])
        assert reply.error is None, reply.error
        summary = await client.wait(reply.job_id, timeout=180)
        assert summary["status"] == "completed", stack.logs()
        job = await client.job(reply.job_id)
        products = {p["key"]: p for p in await client.products(definition["name"])}
    # The whole renderer log (stack.logs() keeps only each log's tail).
    return job or {}, products, (logs / "renderer-0.log").read_text()


async def test_rendered_crawl_of_the_javascript_section(
    shop, env, settings, pool, tmp_path: Path
) -> None:
    job, products, _ = await _crawl(shop.js_source_definition(), env, settings, pool, tmp_path)

    truth = {p["key"]: p for p in shop.truth()}
    assert set(products) == set(truth)
    for key, expected in truth.items():
        got = products[key]
        assert (got["name"], got["price"], got["currency"], got["availability"]) == (
            expected["name"],
            expected["price"],
            expected["currency"],
            expected["availability"],
        ), key
    paths = [r["path"] for r in shop.request_log]
    # The products came from what scripts loaded: the API calls were made (by the renderer's
    # client on the page's behalf), the static pages never fetched.
    assert any(p.startswith("/js/api/p/") for p in paths)
    assert sum(p.startswith("/js/api/c/") and "offset=0" not in p for p in paths) >= 1  # clicks
    assert not [p for p in paths if p.startswith(("/p/", "/c/"))]
    assert job["counters"].get("failed", 0) == 0


async def test_a_rendered_page_cannot_reach_a_forbidden_address(
    shop, forbidden, env, settings, pool, tmp_path: Path
) -> None:
    target, seen = forbidden
    definition = shop.js_source_definition("probe")
    definition["seeds"] = [f"{shop.base_urls[0]}/js/probe?target={target}/secret"]
    definition["render"] = {"wait_for": "#probed"}
    job, _, logs = await _crawl(definition, env, settings, pool, tmp_path)

    assert seen == [], f"the forbidden server was reached: {seen}"
    assert job["counters"].get("outcome_ok", 0) == 1, job["counters"]
    # Refused by the guard (not merely unreachable): fetch, image and iframe of the target,
    # the redirect through the shop, and the metadata address.
    refused = [line for line in logs.splitlines() if "render_refused" in line]
    assert any("127.0.0.9" in line and "/secret" in line for line in refused), logs[-4000:]
    assert any("169.254.169.254" in line for line in refused)
    assert any("/js/redirect" in line for line in refused)
    redirects = [r for r in shop.request_log if r["path"].startswith("/js/redirect")]
    assert redirects, "the redirect hop itself is a same-site request the guard lets through"


def _descendants(pid: int) -> list[int]:
    """Every process below ``pid`` (from /proc)."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            parent = int(stat.rsplit(")", 1)[1].split()[1])
            children.setdefault(parent, []).append(int(entry.name))
    found, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def _is_chromium(pid: int) -> bool:
    try:
        return b"chromium" in Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False


async def test_a_killed_browser_is_relaunched_and_loses_no_page(
    shop, env, settings, pool, tmp_path: Path
) -> None:
    definition = shop.js_source_definition()
    async with pool.acquire() as conn:
        await save_source(conn, source_from_dict(definition))
    async with (
        Stack(env, tmp_path, scale="renderer=1") as stack,
        TrawlClient(settings) as client,
    ):
        renderer = next(c for c in stack.sup.children if c.name == "renderer-0")
        assert renderer.proc is not None
        reply = await client.trigger(definition["name"])
        log = tmp_path / "renderer-0.log"

        async def first_render() -> bool:
            return log.exists() and '"render_done"' in log.read_text()

        await eventually(first_render, timeout=60)
        # SIGKILL the browser (its processes under the renderer), pages still to come.
        browsers = [p for p in _descendants(renderer.proc.pid) if _is_chromium(p)]
        assert browsers, "the renderer runs no browser"
        for pid in browsers:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        summary = await client.wait(reply.job_id, timeout=180)
        assert summary["status"] == "completed", _whole(stack, log)
        job = await client.job(reply.job_id)
        products = {p["key"]: p for p in await client.products(definition["name"])}

    truth = {p["key"]: p for p in shop.truth()}
    assert set(products) == set(truth), _whole(stack, log)
    assert all(products[k]["price"] == truth[k]["price"] for k in truth)
    assert job is not None and job["counters"].get("failed", 0) == 0, _whole(stack, log)
    launches = log.read_text().count('"browser_launch"')
    assert launches >= 2, "the browser was not relaunched"


def _whole(stack: Stack, renderer_log: Path) -> str:
    """Every service's tail, then the renderer's whole log: what a page in flight at the kill
    did is far from the tail by the time a wait runs out."""
    whole = renderer_log.read_text() if renderer_log.exists() else "(no renderer log)"
    return f"{stack.logs()}\n--- {renderer_log.name}, whole\n{whole}"


async def test_render_auto_renders_only_the_pages_that_need_it(
    shop, env, settings, pool, tmp_path: Path
) -> None:
    """One source over both sections: the JavaScript shells are rendered, the static pages are
    stored as fetched, and every product is found either way."""
    definition = shop.source_definition("auto-mix")
    definition["seeds"] += shop.js_source_definition()["seeds"]
    definition["links"]["product"] = {
        "css": "a.product-card, .related a",
        "pattern": "/(js/)?p/[^/?#]+",
    }
    definition["render"] = {"auto": True, "click": "button.load-more", "max_clicks": 20}
    _, products, logs = await _crawl(definition, env, settings, pool, tmp_path)

    truth = {p["key"]: p for p in shop.truth()}
    assert set(products) == set(truth)
    assert all(products[k]["price"] == truth[k]["price"] for k in truth)

    records = [json.loads(line) for line in logs.splitlines() if line.startswith("{")]

    def urls(action: str, why: str | None = None, before: int | None = None) -> set[str]:
        return {
            r["url"]
            for r in records[:before]
            if r.get("action") == action and (why is None or r.get("why") == why)
        }

    rendered, fetched = urls("render_done"), urls("fetch_done")
    static_products = {u for u in fetched if "/p/" in u and "/js/" not in u}
    js_pages = {u for u in fetched if "/js/" in u}
    # Static product pages show their JSON-LD: never rendered as shells. Once a shell's render
    # found content the domain is learnt and its later pages are rendered without the test;
    # which pages come before that depends on the crawl's order (the decision itself:
    # tests/unit/fetcher/test_render_decision.py).
    assert static_products and not static_products & urls("render_done", "shell")
    assert rendered == urls("render_done", "shell") | urls("render_done", "learnt")
    first_shell = next(i for i, r in enumerate(records) if r.get("why") == "shell")
    assert not urls("render_done", "learnt", before=first_shell)  # learnt from a shell only
    assert js_pages and js_pages <= rendered  # shells: rendered
