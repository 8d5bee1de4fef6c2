"""One render is bounded as a whole (``render.page.render_in``), in Debian's Chromium: a
Playwright call that is never answered cannot hold a message in progress forever.

A call on a browser killed under it may never be answered (``new_page`` sent as the browser
dies waits forever: seen in about one kill in three in a loop), but when that happens is a race.
A page whose script never yields makes calls without a timeout (reading the DOM) wait just as
long, every time: it stands in for the hung call here.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
import time
from pathlib import Path

import pytest
from multidict import CIMultiDict
from playwright.async_api import Error as PlaywrightError

from schemas.messages import RenderPolicy
from services.fetcher.http import Response
from services.fetcher.render.browser import BrowserPool, RenderSettings
from services.fetcher.render.gate import Gate
from services.fetcher.render.page import BrowserGone, RenderedPage, RenderFailed, render_in

pytestmark = [
    pytest.mark.timeout(120),
    pytest.mark.skipif(shutil.which("chromium") is None, reason="Debian's chromium is missing"),
]

URL = "http://127.0.0.2:9/page"
# Loaded, says so (a request), then busy for good: no Playwright call that needs the page's
# thread is answered.
WEDGED = (
    "<html><body><p id=loaded>loaded</p><script>"
    "document.addEventListener('DOMContentLoaded', () => {"
    " fetch('/loaded'); setTimeout(() => { for (;;) {} }, 50); });"
    "</script></body></html>"
)
PLAIN = "<html><body><p id=loaded>plain</p></body></html>"


@pytest.fixture
async def pool():
    chromium = BrowserPool(RenderSettings.from_env({}))
    await chromium.start()
    yield chromium
    await chromium.close()


def _gate(html: str, policy: RenderPolicy, loaded: asyncio.Event) -> Gate:
    headers: CIMultiDict[str] = CIMultiDict({"Content-Type": "text/html; charset=utf-8"})
    document = Response("ok", URL, status=200, headers=headers, body=html.encode())

    async def fetch(*_: object) -> Response:
        loaded.set()
        return Response("network_error", URL, error="no subrequests here")

    async def allow(_: str) -> bool:
        return True

    return Gate(
        page_url=URL,
        document=document,
        policy=policy,
        fetch=fetch,
        robots_allow=allow,
        same_site_in_flight=1,
        deadline=time.monotonic() + policy.timeout,
    )


async def _render(
    pool: BrowserPool, html: str, policy: RenderPolicy, loaded: asyncio.Event | None = None
) -> RenderedPage:
    gate = _gate(html, policy, loaded or asyncio.Event())
    return await render_in(pool, gate, URL, policy, locale="en-US", user_agent=None, overtime=1.0)


async def test_a_call_that_is_never_answered_ends_the_render_as_a_timeout(pool) -> None:
    # Room for the page to load on a busy machine (a new context and the navigation took 1.5
    # of 2 s once, and the navigation's own timeout fired first): the call that hangs is the
    # one after it.
    policy = RenderPolicy(timeout=6.0)
    with pytest.raises(RenderFailed) as failed:
        await _render(pool, WEDGED, policy)
    assert failed.value.outcome == "timeout"  # the browser lives: the page is what hangs
    assert "did not answer" in str(failed.value)  # not a Playwright timeout: a call without one
    # Its context was let go: the pool renders the next page.
    page = await _render(pool, PLAIN, RenderPolicy(timeout=10.0))
    assert "plain" in page.html


def _chromium_below(pid: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                parent = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
                children.setdefault(parent, []).append(int(entry.name))
    found, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            todo.append(child)
            with contextlib.suppress(OSError):
                if b"chromium" in Path(f"/proc/{child}/cmdline").read_bytes():
                    found.append(child)
    return found


async def test_a_render_whose_browser_is_killed_ends_and_the_next_one_relaunches(pool) -> None:
    loaded = asyncio.Event()
    render = asyncio.create_task(_render(pool, WEDGED, RenderPolicy(timeout=30.0), loaded))
    await asyncio.wait_for(loaded.wait(), 60)  # the page is up and about to hang
    for pid in _chromium_below(os.getpid()):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    # Which of them is a race (the call refused, or never answered); that the render ends is not.
    with pytest.raises((PlaywrightError, BrowserGone, RenderFailed)):
        await render
    page = await _render(pool, PLAIN, RenderPolicy(timeout=10.0))
    assert "plain" in page.html
    assert pool.launches == 2
