"""A broken extractor costs the page nothing else, and is logged at WARNING and counted."""

from __future__ import annotations

import logging

import pytest

from services.parser import page
from services.parser.page import EXTRACTOR_ERRORS, parse_page

HTML = b"""<html><head><title>Kettle</title></head><body>
<a href="/c/kitchen?page=2" rel="next">next</a></body></html>"""


def test_a_failing_extractor_is_logged_and_counted(monkeypatch, caplog) -> None:
    def broken(tree, scripts=None):
        raise ValueError("boom")

    monkeypatch.setattr(page, "extract_jsonld", broken)
    before = EXTRACTOR_ERRORS.get((("extractor", "jsonld"),))
    with caplog.at_level(logging.WARNING, logger=page.log.name):
        parsed = parse_page(HTML, "http://shop.example/c/kitchen", content_type="text/html")
    assert [link.url for link in parsed.links] == ["http://shop.example/c/kitchen?page=2"]
    assert EXTRACTOR_ERRORS.get((("extractor", "jsonld"),)) == before + 1
    (record,) = [r for r in caplog.records if getattr(r, "action", "") == "extractor_failed"]
    assert record.levelno == logging.WARNING
    assert (record.extractor, record.url) == ("jsonld", "http://shop.example/c/kitchen")
    assert record.error == "ValueError('boom')"


@pytest.mark.parametrize("body", [b"", b"<html></html>"])
def test_pages_without_failures_count_nothing(body: bytes) -> None:
    before = EXTRACTOR_ERRORS.total
    parse_page(body, "http://shop.example/", content_type="text/html")
    assert EXTRACTOR_ERRORS.total == before
