"""The extraction corpus: every page's product fields and link sets, with precision/recall.

Each ``corpus/<name>.html`` (raw bytes, any encoding) has a ``<name>.json``: the fetched
``url``, optional ``content_type``, ``source`` and ``kind`` (how the page was reached), the
expected ``product`` (fields not listed are null; ``null`` = not a product page; its
``found_by``, when listed, is checked too), optional ``min_confidence``/``max_confidence``
and ``attributes`` the product must carry and, for listings, the expected ``pagination`` and
``product`` link sets, and optional ``variants``: the product's variant rows (key, sku, price,
sale price, availability, attributes), checked exactly when given (``[]``: none). Run with
``-s`` to see the per-field scores.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import msgspec
import pytest

from schemas.messages import Product
from schemas.source import Source
from services.parser.page import PageParse, parse_page

CORPUS = Path(__file__).parent / "corpus"
# Named price lists come from API mappings, never from HTML pages; attributes (a reported
# conflict, a replaced structured sku), how a product was found and how sure the parser is
# are checked where a case names them.
PROVENANCE = ("found_by", "confidence")
FIELDS = tuple(
    f for f in Product.__struct_fields__ if f not in ("prices", "attributes", *PROVENANCE)
)
CASES = sorted(p.stem for p in CORPUS.glob("*.json"))
VARIANT_FIELDS = ("key", "sku", "price", "sale_price", "availability", "attributes")


@dataclass
class Score:
    tp: int = 0
    fp: int = 0
    fn: int = 0
    misses: list[str] = field(default_factory=list)

    def add(self, case: str, expected: object, got: object) -> None:
        if expected is not None and got == expected:
            self.tp += 1
            return
        if got is not None:
            self.fp += 1
        if expected is not None:
            self.fn += 1
        if got != expected:
            self.misses.append(f"{case}: expected {expected!r}, got {got!r}")

    def line(self, name: str) -> str:
        p = self.tp / (self.tp + self.fp) if self.tp + self.fp else 1.0
        r = self.tp / (self.tp + self.fn) if self.tp + self.fn else 1.0
        counts = f"tp={self.tp} fp={self.fp} fn={self.fn}"
        return f"{name:<14} precision {p:6.1%}  recall {r:6.1%}  ({counts})"


def _run(case: str) -> tuple[dict, PageParse]:
    spec = json.loads((CORPUS / f"{case}.json").read_text())
    source = msgspec.convert(spec["source"], Source) if spec.get("source") else None
    body = (CORPUS / f"{case}.html").read_bytes()
    parsed = parse_page(
        body,
        spec["url"],
        content_type=spec.get("content_type"),
        source=source,
        kind=spec.get("kind"),
    )
    return spec, parsed


def test_corpus_size() -> None:
    specs = [json.loads((CORPUS / f"{c}.json").read_text()) for c in CASES]
    assert sum("links" not in s for s in specs) >= 40
    assert sum("links" in s for s in specs) >= 10


def test_corpus_scores() -> None:
    scores = {name: Score() for name in ("is_product", *FIELDS, "pagination", "product_link")}
    for case in CASES:
        spec, parsed = _run(case)
        expected = spec["product"]
        got = msgspec.to_builtins(parsed.product) if parsed.product else None
        if "links" not in spec or expected is not None or got is not None:
            scores["is_product"].add(case, expected is not None or None, got is not None or None)
        if expected is not None or got is not None:
            for name in FIELDS:
                scores[name].add(
                    case,
                    (expected or {}).get(name),
                    (got or {}).get(name) if expected is not None else None,
                )
        if "links" in spec:
            for kind, score_name in (("pagination", "pagination"), ("product", "product_link")):
                want = set(spec["links"].get(kind, []))
                have = {link.url for link in parsed.links if link.kind == kind}
                score = scores[score_name]
                score.tp += len(want & have)
                score.fp += len(have - want)
                score.fn += len(want - have)
                for url in sorted(want ^ have):
                    side = "missing" if url in want else "unexpected"
                    score.misses.append(f"{case}: {side} {kind} {url}")
    print(f"\nparser corpus: {len(CASES)} pages")
    for name, score in scores.items():
        print(score.line(name))
    misses = [m for s in scores.values() for m in s.misses]
    for miss in misses:
        print("  MISS", miss)
    assert not misses


@pytest.mark.parametrize("case", CASES)
def test_corpus_page(case: str) -> None:
    spec, parsed = _run(case)
    expected = spec["product"]
    if expected is None:
        assert parsed.product is None
    else:
        want = {name: expected.get(name) for name in FIELDS}
        got = msgspec.to_builtins(parsed.product)
        assert {name: got.get(name) for name in FIELDS} == want
        if "found_by" in expected:
            assert got["found_by"] == expected["found_by"]
        assert got["confidence"] >= spec.get("min_confidence", 0.0)
        assert got["confidence"] <= spec.get("max_confidence", 1.0)
        for name, value in spec.get("attributes", {}).items():
            assert got["attributes"].get(name) == value, name
    if "links" in spec:
        for kind in ("pagination", "product"):
            have = {link.url for link in parsed.links if link.kind == kind}
            assert have == set(spec["links"].get(kind, [])), kind
    if "variants" in spec:
        got_variants = [
            {k: v for k, v in msgspec.to_builtins(p).items() if k in VARIANT_FIELDS}
            for p in parsed.variants
        ]
        want_variants = [{k: w.get(k, {} if k == "attributes" else None) for k in VARIANT_FIELDS}
                         for w in spec["variants"]]  # fmt: skip
        assert got_variants == want_variants
        assert all(p.variant_of == parsed.product.key for p in parsed.variants)  # type: ignore[union-attr]


def test_a_get_that_buys_is_no_link_to_follow() -> None:
    """osCommerce and Zen Cart put each card's "Buy Now" on a GET (``&action=buy_now``):
    following it would fill a cart, so it is no link at all."""
    case = "listing_oscommerce_product_info_urls"
    spec = json.loads((CORPUS / f"{case}.json").read_text())
    parsed = parse_page((CORPUS / f"{case}.html").read_bytes(), spec["url"])
    assert not [link.url for link in parsed.links if "action=buy_now" in link.url]
