"""Product extraction on real shop pages (``product-pages-dev``) stays above its floor.

The dataset lives beside the checkout (``../shared/datasets/``), not in the repository; the
test is skipped where it is absent. ``python -m bench.product_score -v`` prints the figures
and every wrong field.
"""

from __future__ import annotations

import pytest

from bench.product_score import DATASET, Report, score

# Just under what the extraction reaches (price 0.942, sku 1.000, availability 0.957; a
# product on 69 of 69 pages), so that a change cannot silently lose it. Four pages' price
# annotations misread a thousands separator ("$24.990" as 24.99): 65/69 is the ceiling.
# Availability's three misses are annotations the pages contradict (two JSON-LD OutOfStock
# with a stock level of 0 annotated InStock; a classified ad whose status reads "NOT SOLD"
# annotated OutOfStock): 66/69.
FLOORS = {"price": 0.94, "sku": 0.99, "availability": 0.95}
MIN_FOUND = 0.99
# The visible reader alone (structured data stripped): price 0.902, sku 0.848, availability
# 0.971, a product on 64 of 69 pages. Pages without markup depend on it. Four of its price
# misses are the thousands-separator annotations above; the five pages without a product: a
# classified ad whose title <h1> also holds the price and a login link (2), two
# price-comparison pages bought through their offers (no buy control: left out on purpose,
# see docs/architecture.md), and a sold-out page that shows no price.
VISIBLE_FLOORS = {"price": 0.90, "sku": 0.84, "availability": 0.97}
VISIBLE_MIN_FOUND = 0.92


def _dataset() -> None:
    if not (DATASET / "ground-truth.json").is_file():
        pytest.skip(f"dataset not found at {DATASET} (it sits beside the checkout, not in it)")


@pytest.fixture(scope="module")
def report() -> Report:
    _dataset()
    return score(DATASET)


@pytest.fixture(scope="module")
def visible_report() -> Report:
    _dataset()
    return score(DATASET, visible_only=True)


def test_fields_stay_above_their_floor(report: Report) -> None:
    f1 = {name: round(report.fields[name].f1, 3) for name in FLOORS}
    assert all(f1[name] >= floor for name, floor in FLOORS.items()), "\n".join(report.lines())


def test_products_are_found(report: Report) -> None:
    assert report.found_rate >= MIN_FOUND, "\n".join(report.lines())


def test_the_visible_reader_alone_stays_above_its_floor(visible_report: Report) -> None:
    f1 = {name: round(visible_report.fields[name].f1, 3) for name in VISIBLE_FLOORS}
    lines = "\n".join(visible_report.lines())
    assert all(f1[name] >= floor for name, floor in VISIBLE_FLOORS.items()), lines
    assert visible_report.found_rate >= VISIBLE_MIN_FOUND, lines
