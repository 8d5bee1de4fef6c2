"""A listing page yields no product: reached as pagination, or its cards link elsewhere."""

from __future__ import annotations

from pathlib import Path

import msgspec

from schemas.source import Source
from services.parser.formats import parse_payload

CORPUS = Path(__file__).parent / "corpus"
PAGE = (CORPUS / "listing_reached_as_pagination.html").read_bytes()
URL = "https://hearth-goods.example.com/c/kettles?page=3"


def test_the_kind_travels_from_the_fetch_to_the_page_parse() -> None:
    assert parse_payload(PAGE, URL, kind="pagination").product is None
    # Without knowing how it was reached, one card with one buy button reads as a product:
    # that is why the kind matters.
    assert parse_payload(PAGE, URL, kind="page").product is not None


def test_the_source_pagination_pattern_marks_a_listing() -> None:
    source = msgspec.convert(
        {
            "name": "hearth",
            "seeds": ["https://hearth-goods.example.com/c/kettles"],
            "links": {"pagination": {"pattern": r"[?&]page=\d+"}},
        },
        Source,
    )
    assert parse_payload(PAGE, URL, source=source).product is None
