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

COUNT = "document.querySelectorAll({sel}).length"

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


async def _across_an_epoch(client: TrawlClient, shop: DemoShop) -> tuple[int, int]:
    """A discovery crawl, the shop's next epoch, a refresh: the products have a history."""
    first = await _crawl(client, "discovery")
    shop.set_epoch(1)
    return first, await _crawl(client, "refresh")


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
            first, second = await _across_an_epoch(client, shop)
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
                # Sections only: a section a page leaves out is not printed as "null".
                assert await browser.eval(ONLY_ELEMENTS), hash_

            async def count(sel: str) -> int:
                return await browser.eval(f"document.querySelectorAll({json.dumps(sel)}).length")

            async def shot(name: str) -> None:
                await browser.screenshot(SHOTS / f"{name}.png")

            async def is_false(expr: str) -> bool:
                return not await browser.eval(expr)

            async def tab_to(selector: str) -> None:
                await tab_until(browser, selector)

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
            # Keyboard on the overview: j focuses the first row of its first list with rows
            # (no job runs now, so the queues), k stays there; the focus ring shows.
            await browser.eval("document.activeElement.blur(); true")
            await browser.press("j")
            focused = await browser.eval(
                "document.activeElement.closest('table')?.id + ' ' + document.activeElement.tagName"
            )
            assert focused == "streams TR", focused
            await browser.press("j")
            await browser.press("k")
            assert (
                await browser.eval(
                    "[...document.querySelectorAll('#streams tbody tr')].indexOf("
                    "document.activeElement)"
                )
                == 0
            )
            assert await browser.eval(FOCUS_RING)
            # The overview redraws its tables every 500 ms here: the focus moves to the
            # redrawn row in the same place.
            await browser.eval("document.activeElement.dataset.before = 'redraw'; true")
            await eventually(
                lambda: _truthy(
                    browser,
                    "(r => r && !r.dataset.before && document.activeElement === r)"
                    "(document.querySelector('#streams tbody tr'))",
                ),
                timeout=15,
                what="the focus on the redrawn row",
            )

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

            # Has alerts: a rule on one product; the filter's select narrows the list to it.
            async with pool.acquire() as conn:
                await conn.execute(
                    "INSERT INTO alert_rules (source, product_key, condition, webhook, secret)"
                    " VALUES ('demo-shop', $1, 'change', 'http://127.0.0.9:9/hook', 'x')",
                    changed["key"],
                )
            await go("#/products", "products")
            await browser.eval(
                "document.querySelector('select[name=has_alerts]').value = 'true';"
                "document.querySelector('form.filters').requestSubmit(); true"
            )
            await eventually(
                lambda: _equals(
                    browser,
                    "[...document.querySelectorAll('#products tbody tr')].map(r => "
                    "r.cells[1].textContent).join()",
                    changed["key"],
                ),
                timeout=15,
                what="the has-alerts filter",
            )
            assert "has_alerts=true" in await browser.eval("location.hash")
            await eventually(
                lambda: _equals(
                    browser, "document.querySelector('#products-total').textContent", "1 product"
                ),
                timeout=15,
                what="the filtered count",
            )
            await shot("products-has-alerts")

            # Keyboard alone: Tab reaches the filters and the rows with a visible focus; j
            # focuses the first row's link, Enter opens that product.
            await go("#/products", "products")
            await browser.eval("document.activeElement.blur(); true")
            await tab_to("select[name=has_alerts]")
            await tab_to("#products tbody a")
            await browser.eval("document.activeElement.blur(); true")
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
            await tab_to("#changes button")  # its job links, then its raw and diff buttons
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
            # The diff takes the focus: j walks its hunks, Escape goes back to its button.
            assert await browser.eval("document.activeElement.id") == "page-diff"
            await browser.press("j")
            assert await browser.eval("document.activeElement.classList.contains('hunk')")
            assert await browser.eval(FOCUS_RING)
            await browser.press("Escape")
            assert await browser.eval("document.activeElement.textContent") == "diff"
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
            await tab_to("#changes-feed tbody a")
            shown = await browser.eval(
                "document.querySelector('#changes-verification')?.textContent || ''"
            )
            assert "0 confirmed · 1 cancelled · 0 unknown · 0 pending" in shown, shown
            await shot("changes")

            # Jobs: both crawls with a sparkline each; a job's page with its chart and outcomes.
            await go("#/jobs", "jobs")
            assert await count("#job-history tbody tr") == 2
            assert await count("#job-history canvas.spark") == 2
            await tab_to("#job-history tbody a")
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
            await tab_to("[data-action=disable]")
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
            await tab_to("#match-groups tbody a")
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


ONLY_ELEMENTS = "[...document.querySelector('#view').childNodes].every(n => n.nodeType === 1)"

# The focused element draws a focus ring (an outline of some width).
FOCUS_RING = """(() => {
  const s = getComputedStyle(document.activeElement);
  return s.outlineStyle !== 'none' && parseFloat(s.outlineWidth) > 0;
})()"""


async def tab_until(browser: Browser, selector: str, most: int = 40) -> None:
    """Press Tab until the focus is on ``selector``: every stop on the way shows its focus."""
    stops = []
    for _ in range(most):
        await browser.press("Tab")
        here = await browser.eval(
            "(e => e.tagName + (e.id ? '#' + e.id : '') + ' ' + (e.textContent || e.name || '')"
            ".trim().slice(0, 30))(document.activeElement)"
        )
        stops.append(here)
        assert await browser.eval(FOCUS_RING), f"no focus ring on {here} (after {stops})"
        if await browser.eval(f"document.activeElement.matches({json.dumps(selector)})"):
            return
    raise AssertionError(f"Tab never reached {selector}: {stops}")


async def _equals(browser: Browser, expr: str, value: object) -> bool:
    return await browser.eval(expr) == value


async def _truthy(browser: Browser, expr: str) -> bool:
    return bool(await browser.eval(f"!!({expr})"))


async def test_product_with_variants_draws_a_series_each(
    env, settings, pool, tmp_path: Path
) -> None:
    """The demo shop's product groups: the product page lists the variants, draws the
    product's price and sale price and one line per variant, and each variant's change links
    its job and its stored page (raw and diff)."""
    env = {**env, "TRAWL_API_TOKEN": TOKEN}
    base = f"http://{env['TRAWL_API_LISTEN']}"
    async with DemoShop(hosts=("127.0.0.2",), port=0, products=12, variants=True) as shop:
        async with pool.acquire() as conn:
            await save_source(conn, source_from_dict(shop.source_definition("demo-shop")))
        async with (
            Stack(env, tmp_path / "logs") as stack,
            TrawlClient(settings) as client,
            Browser(tmp_path / "chromium") as browser,
        ):
            first, second = await _across_an_epoch(client, shop)
            async with pool.acquire() as conn:
                # A product whose variants changed in the second crawl.
                group = await conn.fetchrow(
                    "SELECT p.variant_of AS key, count(DISTINCT p.key) AS variants"
                    " FROM products p JOIN snapshots s ON s.source = p.source AND s.key = p.key"
                    " WHERE p.source = 'demo-shop' AND s.job_id = $1 AND p.variant_of IS NOT NULL"
                    " GROUP BY p.variant_of ORDER BY p.variant_of LIMIT 1",
                    second,
                )
                assert group is not None, stack.logs()
                variants = await conn.fetchval(
                    "SELECT count(*) FROM products WHERE source = 'demo-shop' AND variant_of = $1",
                    group["key"],
                )
                snapshots = await conn.fetchval(
                    "SELECT count(*) FROM snapshots s JOIN products p"
                    " ON p.source = s.source AND p.key = s.key"
                    " WHERE p.source = 'demo-shop' AND (p.key = $1 OR p.variant_of = $1)",
                    group["key"],
                )
            await browser.watch_errors()
            await browser.send("Page.navigate", url=f"{base}/?interval=500")

            async def loaded() -> bool:
                return bool(
                    await browser.eval(
                        f"location.href.startsWith({json.dumps(base)})"
                        " && document.readyState === 'complete'"
                    )
                )

            await eventually(loaded, timeout=20, what="the dashboard")
            await browser.eval(f"localStorage.setItem('trawl-token', {json.dumps(TOKEN)}); true")
            await browser.eval(
                "location.hash = " + json.dumps(f"#/product/demo-shop/{group['key']}") + "; true"
            )

            async def shown() -> bool:
                return await browser.eval("document.body?.dataset.ready") == "product"

            await eventually(shown, timeout=20, what="the product page")
            assert await browser.eval(ONLY_ELEMENTS)
            assert (
                await browser.eval(COUNT.format(sel=json.dumps("#variants tbody tr"))) == variants
            )
            # The product's price and sale price, then a line per variant with its label.
            series = int(
                await browser.eval("document.querySelector('#price-chart').dataset.series")
            )
            assert series == 2 + variants, series
            legend = await browser.eval(
                "document.querySelector('#price-chart .u-legend').textContent"
            )
            labels = await browser.eval(
                "[...document.querySelectorAll('#variants tbody tr')]"
                ".map(r => r.cells[0].textContent)"
            )
            assert labels and all(label in legend for label in labels), (labels, legend)
            assert await browser.eval(INKED.format(sel=json.dumps("#price-chart canvas"))) > 500
            assert (
                await browser.eval(COUNT.format(sel=json.dumps("#changes tbody tr"))) == snapshots
            )
            # A variant's change of the second crawl: its job, its stored page and the diff.
            row = (
                "[...document.querySelectorAll('#changes tbody tr')].find(r => "
                f"r.cells[5].textContent && r.cells[1].textContent === '#{second}')"
            )
            assert await browser.eval(f"!!{row}")
            await browser.eval(
                f"[...{row}.querySelectorAll('button')].find(b => "
                "b.textContent === 'diff').click(); true"
            )

            async def diffed() -> bool:
                return bool(await browser.eval("!!document.querySelector('#page-diff .hunk')"))

            await eventually(diffed, timeout=15, what="the variant's diff")
            await browser.eval(f"{row}.querySelector('button').click(); true")

            async def raw() -> bool:
                return bool(
                    await browser.eval(
                        "!!document.querySelector('#raw-page')?.textContent.includes('<')"
                    )
                )

            await eventually(raw, timeout=15, what="the variant's stored page")
            jobs = await browser.eval(
                "[...document.querySelectorAll('#changes a')].map(a => a.textContent)"
            )
            assert set(jobs) == {f"#{first}", f"#{second}"}
            await browser.screenshot(SHOTS / "product-variants.png")
            errors = [e for e in browser.errors if "401" not in e]
            assert not errors, errors
