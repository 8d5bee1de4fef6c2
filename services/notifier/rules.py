"""Whether a change event meets an alert rule's condition (the rule's source, product, variant
and GTIN are matched by the store's query).

- ``below``: the price paid fell under the threshold (it was at or above it, or unknown, before);
- ``drop``: a price fall of at least threshold %;
- ``change``: any price change;
- ``back_in_stock``, ``out_of_stock``, ``delisted``: the event of that kind.

``min_change`` (in %) is the least price change any price condition alerts on.
"""

from __future__ import annotations

from decimal import Decimal, InvalidOperation

from schemas.messages import ProductChange, ProductState
from schemas.read import AlertRuleOut

STOCK_KINDS = frozenset({"back_in_stock", "out_of_stock", "delisted"})


def _paid(state: ProductState | None) -> Decimal | None:
    if state is None:
        return None
    value = state.sale_price if state.sale_price is not None else state.price
    try:
        return None if value is None else Decimal(value)
    except InvalidOperation:
        return None


def _threshold(rule: AlertRuleOut) -> Decimal | None:
    try:
        return None if rule.threshold is None else Decimal(rule.threshold)
    except InvalidOperation:
        return None


def matches(rule: AlertRuleOut, event: ProductChange) -> bool:
    if rule.condition in STOCK_KINDS:
        return event.kind == rule.condition
    percent = abs(event.percent) if event.percent is not None else None
    if event.kind == "price_changed" and percent is not None and percent < rule.min_change:
        return False
    threshold = _threshold(rule)
    if rule.condition == "below":
        if threshold is None or event.kind not in ("new", "price_changed", "relisted"):
            return False
        now, was = _paid(event.after), _paid(event.before)
        return now is not None and now < threshold and (was is None or was >= threshold)
    if event.kind != "price_changed":
        return False
    if rule.condition == "change":
        return True
    if rule.condition == "drop":
        return (
            event.direction == "down"
            and percent is not None
            and threshold is not None
            and percent >= threshold
        )
    return False
