"""No input makes ``parse_page`` raise: random bytes, truncated pages, mangled JSON-LD."""

from __future__ import annotations

from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from schemas.source import FieldRule, LinkRule, Links, Source
from services.parser.page import PageParse, parse_page

CORPUS = Path(__file__).parent / "corpus"
PAGES = [p.read_bytes() for p in sorted(CORPUS.glob("*.html"))]
SOURCE = Source(
    name="fuzz",
    seeds=["https://shop.example.com/"],
    links=Links(product=LinkRule(css="a[", pattern="(unclosed"), deny=["["]),
    fields={"price": FieldRule(css=".price"), "name": FieldRule(css="::bogus")},
)
JSON_BITS = st.sampled_from(
    ['{"@type":"Product"', '"offers":[', '{"price":', '"1.299,00"', "]", "}", ",", "//", "/*",
     '"@graph":[', '{"@id":"#x"}', '"hasVariant":', "null", "1e999", '"\\u12', "<!--", "]]>"]
)  # fmt: skip
JSON_LD = st.lists(JSON_BITS, max_size=30).map(
    lambda bits: f'<script type="application/ld+json">{"".join(bits)}</script>'.encode()
)


def _check(body: bytes, source: Source | None = None) -> None:
    result = parse_page(body, "https://shop.example.com/p/1", source=source)
    assert isinstance(result, PageParse)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(max_size=2000))
def test_random_bytes(body: bytes) -> None:
    _check(body)


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(PAGES), st.data())
def test_truncated_corpus_pages(page: bytes, data: st.DataObject) -> None:
    cut = data.draw(st.integers(0, len(page)))
    _check(page[:cut], SOURCE)


@settings(max_examples=60, deadline=None)
@given(JSON_LD, st.text(max_size=200))
def test_mangled_jsonld(script: bytes, noise: str) -> None:
    _check(
        b"<html><head>" + script + b"</head><body>" + noise.encode("utf-8", "replace") + b"</body>"
    )
