"""The notifier process against a webhook receiver on loopback, fed change events directly:

- an alert given up on (its event dead-lettered after the last delivery) reached nobody, so it
  does not debounce the product's next event;
- a rule that cannot be delivered at all (an Apprise rule without the package) dead-letters
  the event with its reason, and the other rules of the event are still delivered.
"""

from __future__ import annotations

import importlib.util
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
from aiohttp import web

from schemas.messages import ProductChange, ProductState
from schemas.read import AlertRuleIn
from services.notifier import store as alerts
from services.notifier.alerts import validate
from shared import names as n
from shared.bus import send
from shared.channels import PRODUCT_CHANGES
from shared.names import Names
from tests.support.stack import Stack, eventually
from tests.support.streams import dead_letters

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(120)]

ONLY_NOTIFIER = "scheduler=0,fetcher=0,parser=0,refresher=0,api=0,notifier=1"


@asynccontextmanager
async def receiver(failures: int) -> AsyncIterator[tuple[str, list[str]]]:
    """A webhook answering 500 to its first ``failures`` calls, then 204; yields its URL and
    the Trawl-Delivery ids it answered 204."""
    got: list[str] = []
    calls = [0]

    async def hook(request: web.Request) -> web.Response:
        calls[0] += 1
        if calls[0] <= failures:
            return web.Response(status=500)
        got.append(request.headers["Trawl-Delivery"])
        return web.Response(status=204)

    app = web.Application()
    app.router.add_post("/hook", hook)
    runner = web.AppRunner(app)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    try:
        yield f"http://127.0.0.1:{runner.addresses[0][1]}/hook", got
    finally:
        await runner.cleanup()


def _drop(event_id: int, job_id: int) -> ProductChange:
    return ProductChange(
        id=event_id,
        source="shop",
        kind="price_changed",
        key="p-1",
        url="https://shop.example/p/1",
        before=ProductState(price="100.00", currency="EUR", availability="in_stock"),
        after=ProductState(price="80.00", currency="EUR", availability="in_stock"),
        direction="down",
        percent=-20.0,
        job_id=job_id,
    )


async def _rule(pool, **kw) -> int:
    rule = AlertRuleIn(source="shop", condition="drop", threshold="10", **kw)
    async with pool.acquire() as conn:
        return (await alerts.add_rule(conn, validate(rule))).id


async def _statuses(pool) -> dict[tuple[int, int], str]:
    async with pool.acquire() as conn:
        rows = await conn.fetch("SELECT rule_id, event_id, status FROM alert_deliveries")
    return {(r["rule_id"], r["event_id"]): r["status"] for r in rows}


async def test_an_alert_given_up_does_not_debounce_the_next(env, pool, nc, tmp_path: Path):
    env = dict(env, TRAWL_MAX_DELIVER="2")
    names = Names(env["TRAWL_NAMESPACE"])
    async with receiver(failures=2) as (url, got), Stack(env, tmp_path, ONLY_NOTIFIER):
        rule = await _rule(pool, webhook=url, allow_private=["127.0.0.1/32"], debounce_seconds=3600)
        js = nc.jetstream()
        await send(js, names, PRODUCT_CHANGES, _drop(1, job_id=1))
        [(letter, _)] = await dead_letters(js, names, 1, stream_key=n.EVENTS)
        assert "500" in letter.reason, letter

        async def given_up() -> bool:
            return (await _statuses(pool)).get((rule, 1)) == "given_up"

        await eventually(given_up, what="the first alert given up")
        await send(js, names, PRODUCT_CHANGES, _drop(2, job_id=2))

        async def sent() -> bool:
            return (await _statuses(pool)).get((rule, 2)) == "sent"

        await eventually(sent, what="the next event's alert sent, not debounced")
    assert got == [f"{rule}.2"]


@pytest.mark.skipif(
    importlib.util.find_spec("apprise") is not None, reason="needs apprise to be absent"
)
async def test_an_undeliverable_rule_does_not_hold_back_the_others(env, pool, nc, tmp_path):
    names = Names(env["TRAWL_NAMESPACE"])
    async with receiver(failures=0) as (url, got), Stack(env, tmp_path, ONLY_NOTIFIER):
        apprise = await _rule(pool, apprise="ntfy://trawl-test")
        webhook = await _rule(pool, webhook=url, allow_private=["127.0.0.1/32"])
        js = nc.jetstream()
        await send(js, names, PRODUCT_CHANGES, _drop(7, job_id=1))
        [(letter, _)] = await dead_letters(js, names, 1, stream_key=n.EVENTS)
        assert "apprise is not installed" in letter.reason, letter

        async def settled() -> bool:
            statuses = await _statuses(pool)
            return statuses.get((webhook, 7)) == "sent" and (apprise, 7) in statuses

        await eventually(settled, what="the webhook rule delivered")
        assert (await _statuses(pool))[(apprise, 7)] == "given_up"
    assert got == [f"{webhook}.7"]
