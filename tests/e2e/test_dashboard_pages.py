"""Every dashboard page in headless Chromium against a stack that crawled the demo shop twice,
across an epoch switch (so products have a price history): the DOM has its rows, the charts
have canvases with points drawn, the filters, the keyboard and the buttons work, the dark
scheme applies, and the console has no error. A screenshot of each page goes to
test-artifacts/dashboard/ (the test prints the directory)."""

from __future__ import annotations

import json
from pathlib import Path

import aiohttp
import pytest

from control.client import TrawlClient
from demo.shop import DemoShop
from services.scheduler.catalog import save_source
from shared.sources import source_from_dict
from tests.conftest import ROOT
from tests.support.browser import CHROMIUM, Browser
from tests.support.stack import Stack, eventually

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.timeout(300),
    pytest.mark.skipif(CHROMIUM is None, reason="needs Debian's chromium package"),
]
TOKEN = "pages-token"
SHOTS = ROOT / "test-artifacts" / "dashboard"
GTIN = "4006381333931"

# Non-transparent pixels of a chart's canvas: the chart was drawn, not just laid out.
INKED = """(() => {{
  const c = document.querySelector({sel});
  if (!c) return -1;
  const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
  let n = 0;
  for (let i = 3; i < d.length; i += 4) if (d[i]) n++;
  return n;
}})()"""


async def _crawl(client: TrawlClient, kind: str) -> int:
    reply = await client.trigger("demo-shop", kind=kind)
    assert reply.error is None and reply.job_id is not None, reply.error
    summary = await client.wait(reply.job_id, timeout=120)
    assert summary["status"] == "completed", summary
    return reply.job_id


async def test_every_page_against_crawled_data(env, settings, pool, tmp_path: Path) -> None:
    env = {**env, "TRAWL_API_TOKEN": TOKEN}
    base = f"http://{env['TRAWL_API_LISTEN']}"
    auth = {"Authorization": f"Bearer {TOKEN}"}
    async with DemoShop(hosts=("127.0.0.2", "127.0.0.3"), port=0, products=24) as shop:
        async with pool.acquire() as conn:
            await save_source(conn, source_from_dict(shop.source_definition("demo-shop")))
        async with (
            Stack(env, tmp_path / "logs") as stack,
            TrawlClient(settings) as client,
            aiohttp.ClientSession(headers=auth) as http,
            Browser(tmp_path / "chromium") as browser,
        ):
            first = await _crawl(client, "discovery")
            shop.set_epoch(1)
            second = await _crawl(client, "refresh")
            async with pool.acquire() as conn:
                changed = await conn.fetchrow(
                    "SELECT key, count(*) AS n FROM snapshots WHERE source = 'demo-shop'"
                    " GROUP BY key HAVING count(DISTINCT price) > 1 ORDER BY key LIMIT 1"
                )
                assert changed is not None, stack.logs()
                # The demo shop prints no GTINs: give one product one, and a rival shop the
                # same item cheaper, so the Match page has a pair to compare.
                await conn.execute(
                    "UPDATE products SET gtin = $1 WHERE source = 'demo-shop' AND key = $2",
                    GTIN,
                    changed["key"],
                )
                await conn.execute(
                    "INSERT INTO sources (name, definition) VALUES ('rival', $1)",
                    {"name": "rival", "seeds": ["http://127.0.0.9:9/"]},
                )
                await conn.execute(
                    "INSERT INTO products (source, key, name, price, currency, availability, gtin)"
                    " VALUES ('rival', 'r1', 'Rival copy', 0.5, 'EUR', 'in_stock', $1)",
                    GTIN,
                )
                total = await conn.fetchval("SELECT count(*) FROM products")
            async with http.post(
                f"{base}/api/schedules", json={"source": "demo-shop", "spec": "@daily"}
            ) as resp:
                assert resp.status == 201, await resp.text()

            await browser.watch_errors()
            await browser.send("Page.navigate", url=f"{base}/?interval=500")

            async def at(name: str) -> None:
                async def shown() -> bool:
                    return await browser.eval("document.body.dataset.ready") == name

                await eventually(shown, timeout=20, what=f"the {name} page")

            async def go(hash_: str, name: str) -> None:
                await browser.eval(f"location.hash = {json.dumps(hash_)}; true")
                await at(name)

            async def count(sel: str) -> int:
                return await browser.eval(f"document.querySelectorAll({json.dumps(sel)}).length")

            async def shot(name: str) -> None:
                await browser.screenshot(SHOTS / f"{name}.png")

            async def is_false(expr: str) -> bool:
                return not await browser.eval(expr)

            await eventually(
                lambda: is_false("document.querySelector('#login')?.hidden ?? true"),
                timeout=15,
                what="the token form",
            )
            await browser.eval(
                f"document.querySelector('#token').value = {json.dumps(TOKEN)};"
                "document.querySelector('#login').requestSubmit(); true"
            )
            await at("overview")
            # Before the token, every call answered 401 and Chromium logged each: by design.
            assert browser.errors and all("401" in e for e in browser.errors), browser.errors
            browser.errors.clear()
            await shot("overview")

            # Products: every product on one page, the total, then a search that finds one.
            await go("#/products", "products")
            assert await count("#products tbody tr") == total
            await eventually(
                lambda: _equals(
                    browser,
                    "document.querySelector('#products-total').textContent",
                    f"{total} products",
                ),
                timeout=15,
                what="the product count",
            )
            await shot("products")
            name = await browser.eval(
                f"[...document.querySelectorAll('#products tbody tr')].find(r => "
                f"r.cells[1].textContent === {json.dumps(changed['key'])}).cells[2].textContent"
            )
            await browser.eval(
                f"document.querySelector('input[name=q]').value = {json.dumps(name)};"
                "document.querySelector('form.filters').requestSubmit(); true"
            )
            await eventually(
                lambda: _equals(
                    browser, "document.querySelectorAll('#products tbody tr').length", 1
                ),
                timeout=15,
                what="the search to narrow the list",
            )
            await at("products")
            # Sorting by price: the prices shown rise.
            await go("#/products?sort=price", "products")
            prices = await browser.eval(
                "[...document.querySelectorAll('#products tbody tr')].map(r => "
                "parseFloat(r.cells[3].textContent)).filter(x => !isNaN(x))"
            )
            assert prices and prices == sorted(prices)

            # Keyboard: j focuses the first row's link, Enter opens that product.
            await go("#/products", "products")
            for key in ("j", "Enter"):
                await browser.send(
                    "Input.dispatchKeyEvent",
                    type="keyDown",
                    key=key,
                    text="\r" if key == "Enter" else key,
                    windowsVirtualKeyCode=13 if key == "Enter" else 74,
                )
                await browser.send("Input.dispatchKeyEvent", type="keyUp", key=key)
            await at("product")

            # Product: the history chart with points and drawn pixels, its changes linked.
            await go(f"#/product/demo-shop/{changed['key']}", "product")
            points = int(
                await browser.eval("document.querySelector('#price-chart').dataset.points")
            )
            assert points >= changed["n"] + 1, points  # each change, and the price now
            assert await browser.eval(INKED.format(sel=json.dumps("#price-chart canvas"))) > 500
            assert await count("#changes tbody tr") == changed["n"]
            jobs_linked = await browser.eval(
                "[...document.querySelectorAll('#changes a')].map(a => a.textContent)"
            )
            assert set(jobs_linked) == {f"#{first}", f"#{second}"}
            await shot("product")
            await browser.eval("document.querySelector('#changes button').click(); true")
            await eventually(
                lambda: _truthy(
                    browser, "document.querySelector('#raw-page')?.textContent.includes('<')"
                ),
                timeout=15,
                what="the stored page",
            )
            await browser.eval(
                "[...document.querySelectorAll('#changes button')].find(b => "
                "b.textContent === 'diff').click(); true"
            )
            await eventually(
                lambda: _truthy(browser, "document.querySelector('#page-diff')"),
                timeout=15,
                what="the diff against the previous crawl",
            )
            await shot("product-diff")
            await browser.send(
                "Emulation.setEmulatedMedia",
                features=[{"name": "prefers-color-scheme", "value": "dark"}],
            )
            await go(f"#/product/demo-shop/{changed['key']}?dark", "product")
            background = await browser.eval("getComputedStyle(document.body).backgroundColor")
            assert background == "rgb(15, 20, 27)", background
            await shot("product-dark")
            await browser.send("Emulation.setEmulatedMedia", features=[])

            # Changes: the epoch switch's price and stock changes, newest first; and what
            # verification before alerting did (this epoch sells nothing out: one planted).
            async with pool.acquire() as conn:
                await conn.execute(
                    "INSERT INTO product_events (source, key, job_id, kind, after, verification)"
                    " VALUES ('demo-shop', 'planted', $1, 'out_of_stock', '{}', 'cancelled')",
                    second,
                )
            await go("#/changes", "changes")
            assert await count("#changes-unavailable") == 0
            assert await count("#changes-feed tbody tr:not(.empty)") >= 1
            shown = await browser.eval(
                "document.querySelector('#changes-verification')?.textContent || ''"
            )
            assert "0 confirmed · 1 cancelled · 0 unknown · 0 pending" in shown, shown
            await shot("changes")

            # Jobs: both crawls with a sparkline each; a job's page with its chart and outcomes.
            await go("#/jobs", "jobs")
            assert await count("#job-history tbody tr") == 2
            assert await count("#job-history canvas.spark") == 2
            await shot("jobs")
            await go(f"#/job/{second}", "job")
            assert (
                int(await browser.eval("document.querySelector('#job-chart').dataset.points")) > 0
            )
            assert await browser.eval(INKED.format(sel=json.dumps("#job-chart canvas"))) > 500
            assert await count("#outcomes tbody tr:not(.empty)") >= 1
            await shot("job")

            # Sources and schedules: disable the schedule from the page.
            await go("#/sources", "sources")
            assert await count("#sources tbody tr") == 2
            await browser.eval("document.querySelector('[data-action=disable]').click(); true")
            await eventually(
                lambda: _truthy(browser, "document.querySelector('[data-action=enable]')"),
                timeout=15,
                what="the schedule to show as disabled",
            )
            async with http.get(f"{base}/api/schedules") as resp:
                assert [s["enabled"] for s in await resp.json()] == [False]
            await shot("sources")

            # Match: the shared GTIN, then both offers side by side, the rival's the cheapest.
            await go("#/match", "match")
            assert await count("#match-groups tbody tr") == 1
            await go(f"#/match?gtin={GTIN}", "match")
            assert await count("#match-side .card") == 2
            cheapest = await browser.eval(
                "document.querySelector('#match-side .card.cheapest').textContent"
            )
            assert "rival" in cheapest
            await shot("match")

            errors = list(browser.errors)
            assert not errors, errors
    print(f"dashboard screenshots: {SHOTS}")


async def _equals(browser: Browser, expr: str, value: object) -> bool:
    return await browser.eval(expr) == value


async def _truthy(browser: Browser, expr: str) -> bool:
    return bool(await browser.eval(f"!!({expr})"))
