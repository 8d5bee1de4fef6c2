"""Link discovery on real pagers: the scorer over ``../shared/datasets/pagination-dev``.

The dataset (real listing, forum and search pages whose pagination links other people
annotated) lives beside the repository, not in it; without it this test is skipped. The floors
sit just under the figures reached (``python -m bench.pagination_score`` prints them), so a
change that loses pagers fails here.
"""

from __future__ import annotations

import pytest

from bench.pagination_score import DATASET, Score, score

pytestmark = pytest.mark.skipif(
    not (DATASET / "expected.json").exists(),
    reason=f"the pagination dataset is not at {DATASET} (../shared/datasets/pagination-dev)",
)


@pytest.fixture(scope="module")
def result() -> Score:
    return score()


def test_pagination_on_real_pages(result: Score) -> None:
    print("\n" + result.summary())
    assert len(result.pages) >= 100
    assert result.precision >= 0.98
    assert result.recall >= 0.95
    assert result.f1 >= 0.97
    assert result.exact >= 0.90
    empty, clean = result.clean
    assert clean == empty  # pages without pagination stay clean


def test_no_product_on_real_listings(result: Score) -> None:
    """A page with a pager is a listing: no product of its own, however much its cards look
    like one (issue 14's catalog-polluting bug, on pages nobody here wrote)."""
    wrong = [(p.name, p.url, p.product) for p in result.listings_with_a_product]
    assert sum(1 for p in result.pages if p.expected) >= 70
    assert wrong == []
