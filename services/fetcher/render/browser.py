"""One headless Chromium per renderer, handing out browser contexts under a cap.

The browser is Debian's ``chromium`` (or ``TRAWL_CHROMIUM``), driven by Playwright: nothing is
downloaded at run time. It is launched so that it cannot reach the network by itself: every
request a page makes is intercepted and answered by trawl's own guarded client
(``render.gate``), and anything that slipped past interception would meet a proxy that does not
exist and host names that do not resolve. Recycled after ``recycle_after`` pages (or when its
processes' memory passes ``max_rss``), and relaunched when it crashes.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import shutil
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from pathlib import Path

from playwright.async_api import Browser, BrowserContext, Playwright, async_playwright

from shared.errors import ConfigError

log = logging.getLogger("trawl.renderer.browser")

CLOSE_TIMEOUT = 10.0  # seconds a context gets to close

# Belt and braces behind request interception: no proxy answers on port 1 of the loopback
# (``<-loopback>`` sends loopback through it too), and no host name resolves.
_OFFLINE_ARGS = (
    "--proxy-server=http://127.0.0.1:1",
    "--proxy-bypass-list=<-loopback>",
    "--host-resolver-rules=MAP * ~NOTFOUND",
    "--dns-prefetch-disable",
    "--force-webrtc-ip-handling-policy=disable_non_proxied_udp",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-domain-reliability",
    "--disable-sync",
    "--no-first-run",
    "--no-default-browser-check",
    "--mute-audio",
    "--disable-dev-shm-usage",
)


@dataclass(frozen=True)
class RenderSettings:
    executable: str
    contexts: int = 4  # pages rendered at once by one renderer
    recycle_after: int = 200  # pages, then a fresh browser process
    max_rss: int = 1024 * 1024 * 1024  # bytes over all the browser's processes
    sandbox: bool = False  # Chromium's sandbox needs user namespaces, rare in containers

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> RenderSettings:
        env = os.environ if env is None else env
        executable = env.get("TRAWL_CHROMIUM") or shutil.which("chromium") or ""
        if not executable or not Path(executable).exists():
            raise ConfigError(
                "the renderer needs Chromium: install Debian's package (apt-get install "
                "chromium) or set TRAWL_CHROMIUM to its path"
            )
        return cls(
            executable=executable,
            contexts=_positive(env, "TRAWL_RENDER_CONTEXTS", cls.contexts),
            recycle_after=_positive(env, "TRAWL_RENDER_RECYCLE", cls.recycle_after),
            max_rss=_positive(env, "TRAWL_RENDER_MAX_RSS_MB", cls.max_rss // 2**20) * 2**20,
            sandbox=env.get("TRAWL_RENDER_SANDBOX", "") in ("1", "true"),
        )


def _positive(env: Mapping[str, str], name: str, default: int) -> int:
    raw = env.get(name)
    if not raw:
        return default
    if not raw.isascii() or not raw.isdigit() or int(raw) <= 0:
        raise ConfigError(f"{name}={raw!r} must be a positive whole number")
    return int(raw)


class BrowserPool:
    """The renderer's browser: contexts under a cap, recycling, relaunch after a crash."""

    def __init__(self, settings: RenderSettings) -> None:
        self.settings = settings
        self._slots = asyncio.Semaphore(settings.contexts)
        self._playwright: Playwright | None = None
        self._browser: Browser | None = None
        self._lock = asyncio.Lock()
        self._pages = 0  # pages since the current browser started
        self._open = 0  # contexts in use
        self.launches = 0

    async def start(self) -> None:
        """Nothing yet: the browser starts with the first page, so an idle renderer is light."""

    async def close(self) -> None:
        if self._browser is not None:
            with contextlib.suppress(Exception):
                await self._browser.close()
        if self._playwright is not None:
            with contextlib.suppress(Exception):
                await self._playwright.stop()

    async def _launch(self) -> None:
        args = list(_OFFLINE_ARGS)
        if not self.settings.sandbox:
            args.append("--no-sandbox")
        browser: Browser | None = None
        for attempt in range(2):
            if self._playwright is None:
                self._playwright = await async_playwright().start()
            try:
                browser = await self._playwright.chromium.launch(
                    executable_path=self.settings.executable, args=args, headless=True
                )
                break
            except Exception:
                # Playwright's driver itself may be gone (killed with the browser): start anew.
                with contextlib.suppress(Exception):
                    await self._playwright.stop()
                self._playwright = None
                if attempt:
                    raise
        assert browser is not None
        self._browser = browser
        self._pages = 0
        self.launches += 1
        log.info("browser launched", extra={"action": "browser_launch", "version": browser.version})

    async def _current(self) -> Browser:
        """The browser to open a context in: relaunched when it died, recycled when due."""
        async with self._lock:
            browser = self._browser
            due = self._pages >= self.settings.recycle_after or self._over_memory()
            if browser is None:
                await self._launch()
            elif not browser.is_connected():
                log.warning("browser gone: relaunching", extra={"action": "browser_relaunch"})
                await self._launch()
            elif due and self._open == 0:
                # Recycled between pages only: a context in use keeps its browser.
                with contextlib.suppress(Exception):
                    await browser.close()
                await self._launch()
            assert self._browser is not None
            self._pages += 1
            return self._browser

    async def user_agent(self) -> str:
        """The User-Agent pages are rendered with (the browser starts if it has not yet)."""
        async with self._lock:
            if self._browser is None:
                await self._launch()
            assert self._browser is not None
            return desktop_user_agent(self._browser.version)

    def _over_memory(self) -> bool:
        pid = self._browser_pid()
        return pid is not None and tree_rss(pid) > self.settings.max_rss

    def _browser_pid(self) -> int | None:
        # Playwright keeps the launched process on its private transport; reading it is
        # best effort (no pid: no memory check, the page count still recycles).
        browser = self._browser
        process = getattr(getattr(browser, "_impl_obj", None), "_browser_process", None)
        pid = getattr(process, "pid", None)
        return pid if isinstance(pid, int) else None

    @contextlib.asynccontextmanager
    async def context(
        self, *, locale: str, user_agent: str | None = None
    ) -> AsyncIterator[BrowserContext]:
        """A fresh context (its own cookies, cache and storage: one identity) for one page.

        The identity is the browser's own (headers, client hints, TLS are all Chromium's), with
        the "HeadlessChrome" token of its User-Agent replaced, unless the source pins one.
        """
        async with self._slots:
            browser = await self._current()
            self._open += 1
            try:
                ctx = await browser.new_context(
                    user_agent=user_agent or desktop_user_agent(browser.version),
                    locale=locale,
                    service_workers="block",  # a service worker's requests escape routing
                    java_script_enabled=True,
                    viewport={"width": 1366, "height": 900},
                )
                try:
                    yield ctx
                finally:
                    # Bounded: a call on a browser that died under it may never be answered.
                    with contextlib.suppress(Exception):
                        await asyncio.wait_for(ctx.close(), CLOSE_TIMEOUT)
            finally:
                self._open -= 1


def desktop_user_agent(version: str) -> str:
    """Chromium's reduced User-Agent on Linux for ``version`` (only the major is shown)."""
    major = version.split(".", 1)[0]
    return (
        "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) "
        f"Chrome/{major}.0.0.0 Safari/537.36"
    )


def tree_rss(pid: int) -> int:
    """Resident bytes of ``pid`` and its descendants (Linux /proc; 0 where unreadable)."""
    children: dict[int, list[int]] = {}
    rss: dict[int, int] = {}
    page = os.sysconf("SC_PAGE_SIZE")
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            statm = (entry / "statm").read_text()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        child = int(entry.name)
        children.setdefault(int(fields[1]), []).append(child)
        rss[child] = int(statm.split()[1]) * page
    total, todo = 0, [pid]
    while todo:
        current = todo.pop()
        total += rss.get(current, 0)
        todo.extend(children.get(current, ()))
    return total
