"""Which changes are verified before their event: the source's ``verify`` setting, read as a
job's policy."""

from __future__ import annotations

import pytest

from schemas.messages import ProductState
from services.refresher.changes import Change
from services.refresher.store import FrontierJob
from services.refresher.verification import JobPolicy, policy_of
from shared.sources import source_from_dict, source_to_dict

BASE = {"name": "s", "seeds": ["https://s/"]}


def _change(kind: str, percent: float | None = None) -> Change:
    state = ProductState(price="10", availability="in_stock")
    return Change("s", "A", "", 1, kind, None, state, state, percent=percent)  # type: ignore[arg-type]


def _policy(verify: object = None, kind: str = "refresh", **extra: object) -> JobPolicy:
    definition = {**BASE, **extra} | ({} if verify is None else {"verify": verify})
    source = source_from_dict(definition)
    return policy_of(FrontierJob(1, "s", kind, "running", False, source_to_dict(source)))


@pytest.mark.parametrize(
    ("verify", "change", "held"),
    [
        (None, _change("out_of_stock"), True),
        (None, _change("delisted"), False),  # delistings are held where misses are counted
        (None, _change("price_changed", -30.0), True),  # the default threshold, 30 %
        (None, _change("price_changed", 29.99), False),
        (None, _change("price_changed", None), False),  # from a price of 0: no percent
        (None, _change("back_in_stock"), False),
        (None, _change("new"), False),
        ({"price_change": "10%"}, _change("price_changed", 12.5), True),
        ({"price_change": 50}, _change("price_changed", -40.0), False),
        ({"out_of_stock": False}, _change("out_of_stock"), False),
        (False, _change("out_of_stock"), False),
        (False, _change("price_changed", -90.0), False),
    ],
)
def test_what_a_crawl_holds(verify: object, change: Change, held: bool) -> None:
    assert _policy(verify).holds(change) is held


def test_a_verify_job_and_an_api_source_hold_nothing() -> None:
    assert not _policy(kind="verify").holds(_change("out_of_stock"))
    api = {"api": {"preset": "shopify", "url": "https://s/products.json?page={page}"}}
    assert not _policy(**api).holds(_change("out_of_stock"))
    assert source_from_dict({**BASE, **api}).verification() is None
