"""Product change events: what a sighting (or a delisting) changed, as the kinds users watch.

The refresher already knows the before and after of every sighting it applies (the locked row,
then each sighting of the batch in order). Where that is a real change it records an event in
``product_events``, in the same transaction, keyed by (source, key, variant, job, kind): a
redelivered or replicated result is no new result (``applied_results``), and a second change of
the same kind in one job is the same event. After the commit the events are published
(``publish_pending``); an event whose publish a crash interrupted is published by the sweep.

Kinds: ``new`` (first sighting), ``price_changed`` (the price paid: the sale price when there
is one, else the price; with direction and percent), ``out_of_stock`` and ``back_in_stock``
(between available and sold out: an unknown availability on either side is no change),
``delisted`` (the misses reached the source's threshold), ``relisted`` (a delisted product seen
again). A replay corrects what was extracted; it observes nothing new, so it emits nothing.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, cast

import msgspec

from schemas.messages import Availability, ChangeKind, Product, ProductChange, ProductState
from services.refresher import store
from shared.bus import send_many
from shared.channels import PRODUCT_CHANGES
from shared.service import Runtime

# Sold out for the stock kinds; anything else known is available.
SOLD_OUT = frozenset({"out_of_stock", "discontinued"})


@dataclass(frozen=True)
class Change:
    """An event to record: the ``product_events`` row."""

    source: str
    key: str
    variant: str
    job_id: int
    kind: ChangeKind
    url: str | None
    before: ProductState | None
    after: ProductState
    direction: str | None = None
    percent: float | None = None
    gtin: str | None = None
    # A candidate (verification.py): recorded 'pending', with the trigger that asks for its
    # re-check and the page to re-fetch.
    verification: str | None = None
    verify_trigger: str | None = None
    verify_url: str | None = None

    def row(self) -> tuple[Any, ...]:
        before = None if self.before is None else msgspec.to_builtins(self.before)
        return (
            self.source,
            self.key,
            self.variant,
            self.job_id,
            self.kind,
            self.url,
            before,
            msgspec.to_builtins(self.after),
            self.direction,
            self.percent,
            self.gtin,
            self.verification,
            self.verify_trigger,
            self.verify_url,
        )

    def confirming(self) -> tuple[Any, ...]:
        """What a verify job's change tells the candidate it confirms
        (``store.confirm_candidates``)."""
        after = msgspec.to_builtins(self.after)
        return (
            self.source,
            self.key,
            self.variant,
            self.kind,
            after,
            self.direction,
            self.percent,
            self.job_id,
        )


def identity(product: Product) -> tuple[str, str]:
    """(product key, variant key) of a sighting: a variant row names the product it belongs to."""
    if product.variant_of:
        return product.variant_of, product.key
    return product.key, ""


def state(
    price: Decimal | None, sale_price: Decimal | None, currency: str | None, availability: Any
) -> ProductState:
    return ProductState(
        price=None if price is None else f"{price:f}",
        sale_price=None if sale_price is None else f"{sale_price:f}",
        currency=currency,
        availability=cast(Availability | None, availability),
    )


def _paid(s: ProductState) -> Decimal | None:
    value = s.sale_price if s.sale_price is not None else s.price
    return None if value is None else Decimal(value)


def _available(availability: str | None) -> bool | None:
    """True available, False sold out, None unknown."""
    if availability is None or availability == "unknown":
        return None
    return availability not in SOLD_OUT


def detect(
    before: ProductState | None, after: ProductState, *, relisted: bool = False
) -> list[tuple[ChangeKind, str | None, float | None]]:
    """The kinds of change from ``before`` (None: never seen) to ``after``, each with its
    direction and percent (price changes only)."""
    if before is None:
        return [("new", None, None)]
    kinds: list[tuple[ChangeKind, str | None, float | None]] = []
    if relisted:
        kinds.append(("relisted", None, None))
    old, new = _paid(before), _paid(after)
    if old is not None and new is not None and old != new:
        percent = float((new - old) / old * 100) if old else None
        kinds.append(
            (
                "price_changed",
                "up" if new > old else "down",
                None if percent is None else round(percent, 2),
            )
        )
    was, now = _available(before.availability), _available(after.availability)
    if was is True and now is False:
        kinds.append(("out_of_stock", None, None))
    elif was is False and now is True:
        kinds.append(("back_in_stock", None, None))
    return kinds


def changes_of(
    source: str,
    job_id: int,
    product: Product,
    before: ProductState | None,
    after: ProductState,
    *,
    relisted: bool = False,
) -> list[Change]:
    key, variant = identity(product)
    return [
        Change(
            source,
            key,
            variant,
            job_id,
            kind,
            product.url,
            before,
            after,
            direction,
            percent,
            product.gtin,
        )
        for kind, direction, percent in detect(before, after, relisted=relisted)
    ]


def delisting(source: str, job_id: int, d: store.Delisted) -> Change:
    key, variant = (d.variant_of, d.key) if d.variant_of else (d.key, "")
    before = state(d.price, d.sale_price, d.currency, d.before)
    after = state(d.price, d.sale_price, d.currency, "out_of_stock")
    return Change(source, key, variant, job_id, "delisted", d.url, before, after, gtin=d.gtin)


def msg_id(change: ProductChange) -> str:
    """The Nats-Msg-Id: the same key as the table's, so a second publish is dropped."""
    c = change
    return f"product-{c.source}-{c.job_id}-{c.kind}-{c.key}-{c.variant}"


async def publish(rt: Runtime, events: Sequence[ProductChange]) -> None:
    """Publish recorded events (in id order); the caller marks them published."""
    if events:
        await send_many(rt.js, rt.names, PRODUCT_CHANGES, [(e, msg_id(e), None) for e in events])


async def publish_pending(rt: Runtime, conn: store.Conn, events: Sequence[ProductChange]) -> None:
    await publish(rt, events)
    await store.mark_events_published(conn, [e.id for e in events])
