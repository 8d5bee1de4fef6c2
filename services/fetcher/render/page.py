"""Load one page in a browser context and read back its DOM."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass

from playwright.async_api import Browser, BrowserContext
from playwright.async_api import Error as PlaywrightError
from playwright.async_api import TimeoutError as PlaywrightTimeout

from schemas.messages import RenderPolicy
from services.fetcher.render.browser import BrowserPool
from services.fetcher.render.gate import Gate

SETTLE_QUIET = 0.5  # seconds without a request: the page has finished loading for now
# Past the render's deadline, for what no deadline bounds (reading the DOM, closing the
# context), before a Playwright call that has not returned is given up.
OVERTIME = 10.0


class RenderFailed(Exception):
    """The page could not be rendered; ``outcome`` is the fetch outcome to report."""

    def __init__(self, outcome: str, message: str) -> None:
        super().__init__(message)
        self.outcome = outcome


class BrowserGone(Exception):
    """The browser died under the page (or gave it no context in time): the work goes again."""


@dataclass(frozen=True)
class RenderedPage:
    html: str
    screenshot: bytes | None
    clicks: int
    elapsed_ms: float


async def render_in(
    pool: BrowserPool,
    gate: Gate,
    url: str,
    policy: RenderPolicy,
    *,
    locale: str,
    user_agent: str | None,
    overtime: float = OVERTIME,
) -> RenderedPage:
    """``render`` in a fresh context of ``pool``, the whole of it (context, page, reading,
    closing) ended ``overtime`` seconds after the gate's deadline at the latest.

    Some Playwright calls have no timeout, and one sent as the browser dies may never be
    answered (``new_page`` on a browser killed under it waits forever); meanwhile the fetcher's
    heartbeat would keep the message in progress, never redelivered. Past the deadline: on a
    browser that is gone, ``BrowserGone`` (the work goes to a fresh browser); on a live one the
    page is what hangs (a script that never yields), a ``RenderFailed`` timeout.
    """
    browser: Browser | None = None
    try:
        async with asyncio.timeout(max(0.0, gate.deadline - time.monotonic()) + overtime):
            async with pool.context(locale=locale, user_agent=user_agent) as ctx:
                browser = ctx.browser
                return await render(ctx, gate, url, policy)
    except TimeoutError:
        if browser is not None and browser.is_connected():
            raise RenderFailed(
                "timeout",
                f"render: the page did not answer {overtime:g} s past its {policy.timeout:g} s",
            ) from None
        raise BrowserGone(
            f"render: no answer from the browser {overtime:g} s past the deadline"
        ) from None


async def render(ctx: BrowserContext, gate: Gate, url: str, policy: RenderPolicy) -> RenderedPage:
    """Navigate to ``url`` (its document is served by ``gate``), wait as the source says, click
    and scroll for more content, and return the DOM."""
    started = time.monotonic()
    await ctx.route("**/*", gate.route)
    await ctx.route_web_socket("**/*", gate.websocket)
    page = await ctx.new_page()

    def left_ms() -> float:
        return max(1.0, (gate.deadline - time.monotonic()) * 1000)

    try:
        await page.goto(url, wait_until="domcontentloaded", timeout=left_ms())
        if policy.wait_for:
            await page.wait_for_selector(policy.wait_for, state="attached", timeout=left_ms())
        await gate.settled(SETTLE_QUIET)
        clicks = 0
        if policy.click:
            for _ in range(policy.max_clicks):
                button = page.locator(policy.click).first
                if not await button.count() or not await button.is_visible():
                    break
                await button.click(timeout=left_ms())
                clicks += 1
                await gate.settled(SETTLE_QUIET)
        for _ in range(policy.scrolls):
            await page.evaluate("window.scrollTo(0, document.body.scrollHeight)")
            await gate.settled(SETTLE_QUIET)
        html = await page.content()
        shot = await page.screenshot(type="png", timeout=left_ms()) if policy.screenshot else None
    except PlaywrightTimeout as exc:
        waited = f"{policy.wait_for!r} to appear" if policy.wait_for else "the page"
        raise RenderFailed(
            "timeout", f"render: waited {policy.timeout:g} s for {waited}: {_first_line(exc)}"
        ) from None
    except PlaywrightError as exc:
        if not ctx.browser or not ctx.browser.is_connected():
            raise  # the browser died: the work is redelivered, not failed
        raise RenderFailed("network_error", f"render: {_first_line(exc)}") from None
    return RenderedPage(html, shot, clicks, (time.monotonic() - started) * 1000)


def _first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0][:300]
