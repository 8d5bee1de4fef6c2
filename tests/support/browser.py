"""Headless Chromium (Debian's ``chromium``) driven over the DevTools protocol: one page, no
extra packages. Console errors and uncaught exceptions are collected in ``errors``."""

from __future__ import annotations

import asyncio
import base64
import itertools
import json
import re
import shutil
from pathlib import Path
from typing import Any

import aiohttp

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


class Browser:
    def __init__(self, profile: Path, *, width: int = 1280, height: int = 1400) -> None:
        self.profile = profile
        self.size = f"{width},{height}"
        self._ids = itertools.count(1)
        self.errors: list[str] = []  # console errors, failed loads, uncaught exceptions

    async def __aenter__(self) -> Browser:
        assert CHROMIUM is not None, "needs Debian's chromium package"
        self.proc = await asyncio.create_subprocess_exec(
            CHROMIUM,
            "--headless=new",
            "--no-sandbox",  # tests may run as root in a container
            "--disable-gpu",
            "--no-first-run",
            f"--window-size={self.size}",
            f"--user-data-dir={self.profile}",
            "--remote-debugging-address=127.0.0.1",
            "--remote-debugging-port=0",
            "about:blank",
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.PIPE,
        )
        assert self.proc.stderr is not None
        port = None
        async with asyncio.timeout(30):
            while port is None:
                line = (await self.proc.stderr.readline()).decode()
                if not line:
                    raise RuntimeError("chromium exited before listening")
                if m := re.search(r"ws://127\.0\.0\.1:(\d+)/", line):
                    port = int(m[1])
        self._drain = asyncio.create_task(self._discard(self.proc.stderr))
        self.http = aiohttp.ClientSession()
        async with self.http.get(f"http://127.0.0.1:{port}/json/list") as resp:
            page = next(t for t in await resp.json() if t["type"] == "page")
        self.ws = await self.http.ws_connect(page["webSocketDebuggerUrl"], max_msg_size=0)
        return self

    @staticmethod
    async def _discard(stream: asyncio.StreamReader) -> None:
        while await stream.readline():
            pass

    async def __aexit__(self, *exc: object) -> None:
        await self.ws.close()
        await self.http.close()
        self.proc.terminate()
        await self.proc.wait()
        self._drain.cancel()

    def _event(self, data: dict[str, Any]) -> None:
        method, params = data.get("method"), data.get("params", {})
        if method == "Runtime.exceptionThrown":
            details = params["exceptionDetails"]
            self.errors.append(details.get("exception", {}).get("description") or details["text"])
        elif method == "Runtime.consoleAPICalled" and params.get("type") == "error":
            self.errors.append(
                " ".join(str(a.get("value", a.get("description"))) for a in params["args"])
            )
        elif method == "Log.entryAdded" and params["entry"]["level"] == "error":
            entry = params["entry"]
            self.errors.append(f"{entry.get('url', '')} {entry['text']}".strip())

    async def send(self, method: str, **params: Any) -> dict[str, Any]:
        msg_id = next(self._ids)
        await self.ws.send_str(json.dumps({"id": msg_id, "method": method, "params": params}))
        async with asyncio.timeout(20):
            while True:
                data = json.loads((await self.ws.receive()).data)
                if data.get("id") == msg_id:
                    if "error" in data:
                        raise RuntimeError(f"{method}: {data['error']}")
                    return data["result"]
                self._event(data)

    async def watch_errors(self) -> None:
        """Start collecting console errors and exceptions (events arrive while ``send`` reads)."""
        for domain in ("Page", "Runtime", "Log"):
            await self.send(f"{domain}.enable")

    async def eval(self, expression: str) -> Any:
        result = await self.send(
            "Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True
        )
        if "exceptionDetails" in result:
            raise RuntimeError(f"{expression[:80]}: {result['exceptionDetails']}")
        return result["result"].get("value")

    async def press(self, key: str, *, shift: bool = False) -> None:
        """A key as the keyboard sends it (down, then up): Tab moves the focus, Enter follows
        a focused link, letters reach the page's key handlers."""
        code, text = _KEYS[key] if key in _KEYS else (ord(key.upper()), key)
        params: dict[str, Any] = {"key": key, "windowsVirtualKeyCode": code}
        if shift:
            params["modifiers"] = 8
        if text:
            await self.send("Input.dispatchKeyEvent", type="keyDown", text=text, **params)
        else:
            await self.send("Input.dispatchKeyEvent", type="rawKeyDown", **params)
        await self.send("Input.dispatchKeyEvent", type="keyUp", **params)

    async def screenshot(self, path: Path) -> Path:
        shot = await self.send("Page.captureScreenshot", format="png", captureBeyondViewport=True)
        await asyncio.to_thread(_write, path, base64.b64decode(shot["data"]))
        return path


# Keys with no text of their own: (virtual key code, text).
_KEYS = {"Enter": (13, "\r"), "Tab": (9, ""), "Escape": (27, "")}


def _write(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
