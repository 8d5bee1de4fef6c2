"""Codes shown beside their labels (``identifiers.labelled_codes``), marketplace item URLs,
and which code the page shows to buyers (``identifiers.shows_code``): the structured sku shown
as text of its own, or after a sku label in the same text run, needs no label scan."""

from __future__ import annotations

import pytest

from services.parser.identifiers import is_item_url, labelled_codes, shows_code, url_item_id


@pytest.mark.parametrize(
    ("html", "sku", "mpn", "gtin"),
    [
        ("<span>Art.-Nr.: 123456</span>", "123456", None, None),
        ("<p>Item #: 44-5512</p>", "44-5512", None, None),
        ("<dt>Product code</dt><dd>AB-12</dd>", "AB-12", None, None),
        ("<p>Lot number: L-20214</p>", "L-20214", None, None),
        ("<p>Cod produs: ESP-15</p>", "ESP-15", None, None),
        ("<p>Cikkszám: PLC-80-T</p>", "PLC-80-T", None, None),
        ("<p>商品番号：123456</p>", "123456", None, None),  # a full-width colon
        # Product-code labels of the Baltic and West Slavic shops.
        ("<div>Tootekood: 551203</div>", "551203", None, None),
        ("<div>Kood <b>EE-7781</b></div>", "EE-7781", None, None),
        ("<div>Produkta kods 318844120</div>", "318844120", None, None),
        ("<div>Prekės kodas: LT-4410</div>", "LT-4410", None, None),
        ("<th>Kód produktu:</th><td>QX12B</td>", "QX12B", None, None),
        ("<div>Nr ref. <span>70031552</span></div>", "70031552", None, None),
        ("<td>Numer referencyjny:</td><td>70031552</td>", "70031552", None, None),
        ("<div><b>Referência produto:</b> 4410023</div>", "4410023", None, None),
        ("<p>Referencia del producto: RX-100</p>", "RX-100", None, None),
        ("<p>Référence produit : 88-120</p>", "88-120", None, None),
        ("<p class='product__code'>Код:&nbsp;281234567</p>", "281234567", None, None),
        ("<p>Cat. no. 824/7315</p>", "824/7315", None, None),
        (  # label, colon and code each in a span of its own (VTEX's product identifier)
            "<span><span>Referência</span><span>: </span><span>7890123</span></span>",
            "7890123",
            None,
            None,
        ),
        # Codes of capitals in parts, without digits (WooCommerce, BigCommerce), but no words.
        ('<span>SKU: <span class="sku">TN-HOOD-OAT</span></span>', "TN-HOOD-OAT", None, None),
        ("<dt>SKU:</dt><dd data-product-sku>UGC-PLT-L-SPK</dd>", "UGC-PLT-L-SPK", None, None),
        ("<p>SKU: Details</p>", None, None, None),
        ("<p>SKU: N/A</p>", None, None, None),
        ("<li>Web ID: 2345678</li>", "2345678", None, None),
        ("<div>Advertentienummer: m1698234512</div>", "m1698234512", None, None),  # ads
        ("<p>Номер объявления: 2345678901</p>", "2345678901", None, None),
        ("<ul><li>Anzeigen-ID</li><li>1923456781</li></ul>", "1923456781", None, None),
        ("<div>Kavel ID: 45871203</div>", "45871203", None, None),
        ("<th><span>상품코드</span></th><td><span>P0000BKQ</span></td>", "P0000BKQ", None, None),
        ("<div>Réf : HP195161234567</div>", "HP195161234567", None, None),  # no point
        # Numbers printed in spaced groups, each group with a digit; a word after is none.
        ("<div>Codice articolo: <span>0 986 479 B93</span></div>", "0 986 479 B93", None, None),
        ("<dt>Art.-Nr.</dt><dd>0165 040 440</dd>", "0165 040 440", None, None),
        ("<p>Art.-Nr.: 12345 Stück</p>", None, None, None),
        ("<li>Numer artykułu: AD115O1HA-A11</li>", "AD115O1HA-A11", None, None),
        ("<p>Model: WX-200</p>", None, "WX-200", None),
        ("<p>Mfr. Part #: MP-77</p>", None, "MP-77", None),
        ("<p>Item model number: B0-12</p>", None, "B0-12", None),
        ("<p>Hersteller-Nr.: HX-9</p>", None, "HX-9", None),
        ("<p>型番：ABC-1</p>", None, "ABC-1", None),
        ("<p>EAN: 4006381333931</p>", None, None, "4006381333931"),
    ],
)
def test_labelled_codes(html: str, sku: str | None, mpn: str | None, gtin: str | None) -> None:
    codes = labelled_codes(f"<body><h1>Title</h1>{html}</body>")
    assert (codes.skus[0] if codes.skus else None, codes.mpn, codes.gtin) == (sku, mpn, gtin)


@pytest.mark.parametrize(
    ("url", "item"),
    [
        ("https://www.ebay.it/itm/133588510845", True),
        ("https://www.amazon.de/dp/B08N5WRWNW/ref=x", True),
        ("https://classifieds.example.pk/item/bike-iid-1021493409", True),
        ("https://auction.example.com/lot/552211/brass-compass", True),
        ("https://shop.example.com/shoes-c-123456", False),  # a category's trailing id
        ("https://shop.example.com/products/widget", False),
    ],
)
def test_marketplace_item_urls(url: str, item: bool) -> None:
    assert is_item_url(url) is item


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


@pytest.mark.parametrize(
    ("url", "item"),
    [
        ("https://www.ebay.it/itm/133588510845", "133588510845"),
        # a product segment before or after "/p/" (noon, Flipkart): letters and digits both
        ("https://www.noon.example/uae-en/airpods-pro/N51758546A/p/?o=b9c2", "N51758546A"),
        ("https://www.kart.example/galaxy-m32/p/itm8c1f2a3b4d5e6?pid=MOBG", "itm8c1f2a3b4d5e6"),
        ("https://shop.example.com/category/p/ABCDEFGHIJ", None),  # a word, not a code
        ("https://shop.example.com/products/widget", None),
        # a trailing id after a prefix of up to four letters (Takealot's PLID)
        ("https://www.mall.example.co.za/tv-55a6k/PLID73456789", "PLID73456789"),
        ("https://www.mall.example.co.za/tv-55a6k/UNITS73456789", None),
    ],
)
def test_url_item_ids(url: str, item: str | None) -> None:
    assert url_item_id(url) == item
