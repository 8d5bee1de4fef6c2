"""End to end: alert rules over real crawls of the demo shop across an epoch change, delivered
by the notifier process to a webhook receiver on loopback.

- a drop rule fires once per product that fell by 10 % or more, each webhook signed, and a rule
  for one product, written in the source file with its key a ``${TRAWL_SECRET_*}`` reference,
  fires exactly once, signed with the key the notifier's environment holds;
- a webhook the SSRF guard refuses at delivery (a name resolving to loopback) is dead-lettered
  with its reason, never called;
- a delivery worker SIGKILLed while a webhook is in flight loses no alert, and sends again only
  the one it never saw answered (with the same Trawl-Delivery id).
"""

from __future__ import annotations

import asyncio
import os
import signal
from collections import Counter
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path

import msgspec
import pytest
from aiohttp import web

from control.client import TrawlClient
from control.sources import apply_source
from demo.shop import DemoShop
from schemas.messages import ProductChange
from schemas.read import AlertRuleIn
from services.notifier import store as alerts
from services.notifier.alerts import validate
from services.notifier.webhook import verify
from services.scheduler.catalog import save_source
from shared import names as n
from shared.names import Names
from shared.sources import source_from_dict
from tests.support.stack import Stack, eventually
from tests.support.streams import dead_letters

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]

LOOPBACK = ["127.0.0.1/32"]


@dataclass
class Receiver:
    url: str
    calls: list[tuple[dict[str, str], bytes]] = field(default_factory=list)
    # Set: the receiver holds the next request until ``release`` is set.
    hold: asyncio.Event = field(default_factory=asyncio.Event)
    held: asyncio.Event = field(default_factory=asyncio.Event)
    release: asyncio.Event = field(default_factory=asyncio.Event)

    def deliveries(self) -> Counter[str]:
        return Counter(h.get("Trawl-Delivery", "") for h, _ in self.calls)


@asynccontextmanager
async def receiver() -> AsyncIterator[Receiver]:
    app = web.Application()
    runner = web.AppRunner(app)
    box: list[Receiver] = []

    async def hook(request: web.Request) -> web.Response:
        r = box[0]
        r.calls.append((dict(request.headers), await request.read()))
        if r.hold.is_set():
            r.hold.clear()
            r.held.set()
            await r.release.wait()
        return web.Response(status=204)

    app.router.add_post("/hook", hook)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    box.append(Receiver(url=f"http://127.0.0.1:{port}/hook"))
    try:
        yield box[0]
    finally:
        box[0].release.set()
        await runner.cleanup()


async def _crawl(client: TrawlClient, shop: DemoShop, epoch: int, kind: str, stack) -> int:
    shop.set_epoch(epoch)
    reply = await client.trigger("demo-shop", kind=kind)
    assert reply.error is None, reply.error
    summary = await client.wait(reply.job_id, timeout=120)
    assert summary["status"] == "completed" and "refresh" in summary, stack.logs()
    return reply.job_id


async def _rule(pool, **kw) -> tuple[int, str]:
    async with pool.acquire() as conn:
        out = await alerts.add_rule(conn, validate(AlertRuleIn(source="demo-shop", **kw)))
    return out.id, out.secret


async def _file_rule(pool, shop: DemoShop, **rule) -> int:
    """Apply the shop's source with one rule in its ``alerts:``; the rule's id."""
    definition = dict(shop.source_definition("demo-shop"), alerts=[rule])
    async with pool.acquire() as conn:
        applied = await apply_source(conn, source_from_dict(definition))
    [rule_id] = applied.alerts.added
    return rule_id


async def _sent(pool) -> int:
    async with pool.acquire() as conn:
        return await conn.fetchval("SELECT count(*) FROM alert_deliveries WHERE status = 'sent'")


def _drops(before: dict, after: dict, percent: int) -> set[str]:
    out = set()
    for key, now in after.items():
        was, new = Decimal(before[key]["price"]), Decimal(now["price"])
        if new < was and (was - new) / was * 100 >= percent:
            out.add(key)
    return out


async def test_drop_rule_fires_once_signed_and_unsafe_targets_dead_letter(
    env, settings, pool, nc, tmp_path: Path
) -> None:
    # The narrow rule is written in the source file, its HMAC key a reference to the
    # notifier's environment: only the reference is stored.
    file_key = "file-rule-hmac-key"
    env = dict(env, TRAWL_SECRET_HOOK_KEY=file_key)
    async with (
        DemoShop(hosts=("127.0.0.2",), port=0, products=80) as shop,  # two drops of 10 %+
        receiver() as hook,
    ):
        async with pool.acquire() as conn:
            await save_source(conn, source_from_dict(shop.source_definition("demo-shop")))
        before = {p["key"]: p for p in shop.truth()}
        shop.set_epoch(1)
        dropped = _drops(before, {p["key"]: p for p in shop.truth()}, 10)
        assert dropped, "the epoch dropped no price by 10 %"
        one = sorted(dropped)[0]
        async with Stack(env, tmp_path / "logs") as stack, TrawlClient(settings) as client:
            await _crawl(client, shop, 0, "discovery", stack)
            wide, secret = await _rule(
                pool, condition="drop", threshold="10", webhook=hook.url, allow_private=LOOPBACK
            )
            narrow = await _file_rule(
                pool,
                shop,
                condition="drop",
                threshold="10%",
                product=one,
                webhook=hook.url,
                secret="${TRAWL_SECRET_HOOK_KEY}",
                allow_private=LOOPBACK,
            )
            # A name, not an IP: it passes the check at creation and is refused at delivery.
            await _rule(pool, condition="drop", threshold="10", webhook="https://localhost:9/x")
            job = await _crawl(client, shop, 1, "refresh", stack)

            want = len(dropped) + 1

            async def all_sent() -> bool:
                return await _sent(pool) >= want

            await eventually(all_sent, timeout=60, what=f"{want} alerts", interval=0.2)
            names = Names(env["TRAWL_NAMESPACE"])
            letters = await dead_letters(nc.jetstream(), names, len(dropped), stream_key=n.EVENTS)
            assert all("localhost" in letter.reason for letter, _ in letters), letters
            assert all("loopback" in letter.reason for letter, _ in letters), letters

        secrets_by_rule = {str(wide): secret, str(narrow): file_key}
        by_rule: Counter[str] = Counter()
        keys: list[str] = []
        for headers, body in hook.calls:
            rule_id = headers["Trawl-Delivery"].split(".")[0]
            assert verify(secrets_by_rule[rule_id], headers, body), headers
            event = msgspec.json.decode(body, type=ProductChange)
            assert event.kind == "price_changed" and event.direction == "down"
            assert event.percent is not None and event.percent <= -10 and event.job_id == job
            by_rule[rule_id] += 1
            if rule_id == str(wide):
                keys.append(event.key)
        assert by_rule == {str(wide): len(dropped), str(narrow): 1}
        assert sorted(keys) == sorted(dropped)  # each once
        assert max(hook.deliveries().values()) == 1
        tampered = dict(hook.calls[0][0], **{"Trawl-Signature": "sha256=" + "0" * 64})
        assert not verify(secret, tampered, hook.calls[0][1])


async def test_a_killed_delivery_worker_loses_and_repeats_nothing(
    env, settings, pool, tmp_path: Path
) -> None:
    async with (
        DemoShop(hosts=("127.0.0.2",), port=0, products=40) as shop,
        receiver() as hook,
    ):
        async with pool.acquire() as conn:
            await save_source(conn, source_from_dict(shop.source_definition("demo-shop")))
        async with Stack(env, tmp_path / "logs") as stack, TrawlClient(settings) as client:
            await _crawl(client, shop, 0, "discovery", stack)
            await _rule(pool, condition="change", webhook=hook.url, allow_private=LOOPBACK)
            hook.hold.set()  # the first webhook of the next crawl is held in flight
            await _crawl(client, shop, 1, "refresh", stack)
            async with pool.acquire() as conn:
                want = await conn.fetchval(
                    "SELECT count(*) FROM product_events WHERE kind = 'price_changed'"
                )
            assert want >= 2
            await asyncio.wait_for(hook.held.wait(), timeout=60)
            [worker] = [c for c in stack.sup.children if c.name.startswith("notifier-")]
            assert worker.proc is not None
            killed = worker.proc.pid
            os.kill(killed, signal.SIGKILL)
            held = hook.calls[0][0]["Trawl-Delivery"]
            hook.release.set()

            async def all_sent() -> bool:
                return await _sent(pool) >= want

            # The killed worker's unacked event comes back after its ack_wait (60 s).
            await eventually(all_sent, timeout=150, what=f"{want} alerts", interval=0.5)
            assert worker.proc is not None and worker.proc.pid != killed  # restarted
        got = hook.deliveries()
        assert len(got) == want, got  # no alert lost
        # Only the webhook in flight at the kill, never answered to the worker, came again,
        # with the same delivery id (the receiver's idempotency key).
        assert {d for d, count in got.items() if count > 1} <= {held}, got
