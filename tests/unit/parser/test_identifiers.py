"""Which code the page shows to buyers (``identifiers.shows_code``): the structured sku shown
as text of its own, or after a sku label in the same text run, needs no label scan."""

from __future__ import annotations

from services.parser.identifiers import labelled_codes, shows_code

PAGE = "<html><head><title>ST-1</title></head><body><h1>Lamp</h1>{}<p>more</p></body></html>"


def test_code_as_text_of_its_own() -> None:
    assert shows_code(PAGE.format("<span>ST-000123</span>"), "ST-000123")
    assert shows_code(PAGE.format("<dd>Ref: ST-000123</dd>"), "ST-000123")


def test_code_after_a_sku_label_in_its_text_run() -> None:
    for shown in ("SKU ST-000123", "Item # ST-000123", "Art.-Nr. ST-000123 "):
        html = PAGE.format(f'<p class="sku">{shown}</p>')
        assert shows_code(html, "ST-000123"), shown
        assert "ST-000123" in labelled_codes(html).skus  # what the label scan would say


def test_code_not_shown_as_the_sku() -> None:
    assert not shows_code(PAGE.format("<p>Model ST-000123</p>"), "ST-000123")  # a model label
    assert not shows_code(PAGE.format("<p>SKU ST-000123X</p>"), "ST-000123")  # another code
    assert not shows_code(PAGE.format("<p>see ST-000123 here</p>"), "ST-000123")
    assert not shows_code(PAGE.format('<a href="/ST-000123">x</a>'), "ST-000123")
