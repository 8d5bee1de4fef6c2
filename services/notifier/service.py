"""Notifier: product change events → alert rules → signed webhooks (or Apprise).

It reads the change events with its own durable consumer (``notifier-events``), so replicas
share the work like the other services. For each event, each rule the event meets is claimed in
``alert_deliveries`` (one row per rule and event, under a per-product lock that also applies
the debounce), then delivered, then marked sent. A redelivered event finds the rows of alerts
already sent and sends only what is left; a failed delivery is retried with jittered backoff
and dead-lettered with its reason at the last delivery; a target the SSRF guard refuses is
dead-lettered at once.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Coroutine
from typing import Any

import msgspec

from schemas.messages import ProductChange
from schemas.read import AlertRuleOut
from services.notifier import store
from services.notifier.rules import matches
from services.notifier.webhook import DeliveryFailed, post
from shared.channels import PRODUCT_CHANGES
from shared.consumer import Delivery
from shared.errors import Poison, Retry
from shared.guard import UnsafeURL
from shared.metrics import Metrics
from shared.secrets import MissingSecret, expand, redact, references
from shared.service import DbRuntime

log = logging.getLogger("trawl.notifier")

CONCURRENCY = 32
BACKOFF_BASE = 1.0  # seconds before the first retry; doubled per delivery, jittered ±50 %
BACKOFF_MAX = 60.0


class Counts:
    def __init__(self, metrics: Metrics) -> None:
        count = metrics.counter
        self.sent = count(
            "trawl.notifier.sent", "Alerts delivered.", unit="{alert}", stat="alerts_sent"
        )
        self.failed = count(
            "trawl.notifier.failed",
            "Alert deliveries that failed (each attempt).",
            unit="{attempt}",
            stat="alerts_failed",
        )
        self.debounced = count(
            "trawl.notifier.debounced",
            "Alerts not sent: the rule alerted on the product within its window.",
            unit="{alert}",
            stat="alerts_debounced",
        )
        self.already_sent = count(
            "trawl.notifier.already_sent",
            "Alerts of a redelivered event that were sent before: not sent again.",
            unit="{alert}",
            stat="alerts_already_sent",
        )


def backoff(delivered: int) -> float:
    """The jittered delay before the next delivery (jitter: receivers recovering from an
    outage are not hit by every replica's retries at once)."""
    base = min(BACKOFF_MAX, BACKOFF_BASE * 2 ** max(0, delivered - 1))
    return base * random.uniform(0.5, 1.5)


class Notifier:
    def __init__(self, rt: DbRuntime) -> None:
        self.rt = rt
        self.pool = rt.pool
        self.counts = Counts(rt.metrics)
        self._encode = msgspec.json.Encoder().encode

    async def on_change(self, d: Delivery[ProductChange]) -> None:
        event = d.body
        async with self.pool.acquire() as conn:
            rules = await store.rules_for(conn, event.source, event.key, event.variant, event.gtin)
        failed: list[str] = []
        refused: list[str] = []
        last = d.num_delivered >= self.rt.settings.max_deliver  # a failure now dead-letters
        for rule in rules:
            if not matches(rule, event):
                continue
            async with self.pool.acquire() as conn, conn.transaction():
                fate = await store.claim(conn, rule, event.id, event.key, event.variant)
            if fate == "debounced":
                self.counts.debounced.add()
                continue
            if fate == "sent":
                self.counts.already_sent.add()
                continue
            hidden = self._secrets_of(rule)
            try:
                await self.deliver(rule, event)
            except (UnsafeURL, MissingSecret, Poison) as exc:  # no retry helps; others still go
                reason = redact(str(exc), hidden)
                refused.append(f"rule {rule.id}: {reason}")
                await self._failed(rule, event, f"refused: {reason}", final=True)
            except DeliveryFailed as exc:
                reason = redact(str(exc), hidden)
                failed.append(f"rule {rule.id}: {reason}")
                await self._failed(rule, event, reason, final=last)
            else:
                async with self.pool.acquire() as conn:
                    await store.delivered(conn, rule.id, event.id)
                self.counts.sent.add()
                log.info(
                    "alert sent",
                    extra={
                        "action": "alert_sent",
                        "rule": rule.id,
                        "event": event.id,
                        "source": event.source,
                        "key": event.key,
                        "variant": event.variant,
                        "kind": event.kind,
                        "job_id": event.job_id,
                    },
                )
        if failed:  # retried (alerts already sent are not sent again), dead-lettered at last
            raise Retry("; ".join(failed + refused), delay=backoff(d.num_delivered))
        if refused:
            raise Poison("; ".join(refused))

    async def _failed(
        self, rule: AlertRuleOut, event: ProductChange, error: str, *, final: bool
    ) -> None:
        self.counts.failed.add()
        async with self.pool.acquire() as conn:
            await store.delivery_failed(conn, rule.id, event.id, error, final=final)
        log.warning(
            "alert not delivered",
            extra={"action": "alert_failed", "rule": rule.id, "event": event.id, "error": error},
        )

    def _secrets_of(self, rule: AlertRuleOut) -> list[str]:
        """The values of the secrets the rule references: never in an error or a log."""
        names = [n for v in (rule.webhook, rule.secret, rule.apprise) if v for n in references(v)]
        return [self.rt.settings.secrets[n] for n in names if n in self.rt.settings.secrets]

    async def deliver(self, rule: AlertRuleOut, event: ProductChange) -> None:
        """Send one alert; ``${TRAWL_SECRET_*}`` references in the rule are filled in from
        this notifier's environment (``MissingSecret`` when one is not set)."""
        secrets = self.rt.settings.secrets
        body = self._encode(event)
        if rule.webhook:
            await post(
                expand(rule.webhook, secrets),
                body,
                secret=expand(rule.secret, secrets),
                delivery=f"{rule.id}.{event.id}",
                allow_private=list(rule.allow_private),
            )
        if rule.apprise:
            await _apprise(expand(rule.apprise, secrets), event, body)


async def _apprise(url: str, event: ProductChange, body: bytes) -> None:
    """Apprise (the ``alerts`` extra): mail, Slack, Telegram, ntfy... from one URL."""
    try:
        import apprise  # type: ignore[import-not-found, unused-ignore]
    except ImportError:
        raise Poison(
            "an apprise rule, but apprise is not installed (pip install trawl[alerts])"
        ) from None
    notifier = apprise.Apprise()
    if not notifier.add(url):
        raise Poison(f"apprise does not understand the URL of {event.source}'s rule")
    title = f"{event.source}: {event.kind.replace('_', ' ')} {event.key} {event.variant}".strip()
    if not await notifier.async_notify(body=body.decode(), title=title):
        raise DeliveryFailed("apprise could not notify")


async def start(rt: DbRuntime) -> list[Coroutine[Any, Any, None]]:
    notifier = Notifier(rt)
    return [rt.consumer(PRODUCT_CHANGES, notifier.on_change, concurrency=CONCURRENCY).run()]
