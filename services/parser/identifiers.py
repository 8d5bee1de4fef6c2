"""Identifiers a page shows to buyers, and the one its URL carries.

Structured data often gives an internal id or a model name as ``sku`` while the page shows
the retailer's code next to a label ("Product code - 39139301", "Art.-Nr. 2800395267",
"eBay item number: 302474151804", "Код: 01245", a spec-table row "ID Produto | 1236291").
That visible code is the ``sku`` a shopper would quote; the structured value is kept as
``mpn`` (or an attribute). Labels are matched in the raw HTML where a text run starts
(``>label``), so attribute values and script identifiers (``productCode``) never match,
and a few tags may sit between the label and its value (``<strong>Label</strong>value``,
table cells). An element whose markup names it as the reference (``class="sku"``,
``data-qa-qualifier="product-reference"``) counts like a label.

Marketplaces and classified sites often show no code at all, but their URL path carries the
item id (``/itm/<id>``, ``/dp/<ASIN>``, ``/deal/<id>``, ``…_35985065``, ``…-987929.html``):
that is the last resort for ``sku``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from urllib.parse import unquote, urlsplit

# Labels of the shop's own code, as shown beside it, in the languages of the shops we meet.
_SKU_LABELS = (
    r"product\s*(?:code|no\.?|number|id|ref(?:erence)?)|item\s*(?:#|no\.?|number|code|id)"
    r"|article\s*(?:no\.?|number|code)|art(?:ikel)?\.?\s*-?\s*n(?:r|o)\.?|artikelnummer"
    r"|artikelcode|bestell-?\s*(?:nr\.?|nummer)|order\s*code|produktnummer|sku|style(?:\s*(?:#|no\.?|code))?"
    r"|stock\s*code|cat(?:alog(?:ue)?)?\.?\s*(?:#|no\.?|number)|ref(?:erence|\.)|r[ée]f(?:\.|(?=\s*:))"
    r"|r[ée]f[ée]rence(?:\s*(?:du\s*)?produit)?"
    r"|code\s*(?:article|produit)|c[óo]d(?:igo)?\.?(?:\s*(?:de|do|del)\s*(?:produto|producto"
    r"|art[íi]culo))?|id\s*(?:do\s*|del\s*)?produ(?:to|cto)|referencia(?:\s*(?:del\s*)?producto)?"
    r"|refer[êe]ncia(?:\s*(?:do\s*)?produto)?"
    r"|codice(?:\s*(?:articolo|prodotto))?|cod\.\s*art\.?|rif\.|nr\.?\s*ref\.?"
    r"|numer\s*referencyjny|k[óo]d(?:\s*(?:produktu|tovaru|zbo[žz][íi]))?"
    r"|(?:toote|artikli)?kood|(?:produkta|preces)?\s*kods|(?:prek[ėe]s\s*)?kodas|artikul[as]s?"
    r"|(?:nr|numer)\s*(?:katalogowy|artyku[łl]u)|katalogov[ée]\s*č[íi]slo|код(?:\s*товара)?|артикул|арт\."
    r"|varenummer|varenr\.?|tuotenumero|tuotekoodi|ürün\s*kodu|stok\s*kodu|מק\"ט|מק״ט"
    r"|商品編號|商品编号|货号|貨號|商品番号|品番|商品コード|상품번호|상품코드|품번"
    r"|cod\s*produs|cikksz[áa]m|term[ée]kk[óo]d|κωδικός(?:\s*προϊόντος)?|šifra(?:\s*proizvoda)?"
    r"|код\s*товару|mã\s*(?:sản phẩm|sp|hàng)|kode\s*(?:produk|barang)|รหัสสินค้า"
    r"|anzeige(?:n-?(?:nr\.?|nummer|id))?|ad\s*(?:id|no\.?|number)|listing\s*(?:id|#|no\.?)|web\s*id"
    # classified sites' ad numbers
    r"|advertentie-?nummer|inserat-?(?:id|nr\.?)|annonce-?nr\.?|n[°º]\s*d['’]annonce|annons-?id"
    r"|finn-?kode|ilmoitusnumero|inzer[áa]t\s*č\.|id\s*(?:inzer[áa]tu|annuncio|oferty|ogłoszenia)"
    r"|numer\s*(?:oferty|ogłoszenia)|ilan\s*no|hirdetéskód|(?:номер|№)\s*объявления"
    r"|رقم\s*الإعلان|מספר\s*מודעה|lot\s*id|kavel\s*(?:id|nummer)"
    r"|lot\s*(?:#|no\.?|number)"
)
_MPN_LABELS = (
    r"(?:item\s*)?model(?:\s*(?:#|no\.?|number|name))?|mpn"
    r"|(?:manufacturer|mfr\.?|mfg\.?)\s*part\s*(?:#|no\.?|number)"
    r"|part\s*(?:#|no\.?|number)|modell(?:nummer)?|hersteller(?:-?\s*nr\.?|-?nummer)|modelo"
    r"|mod[èe]le"
    r"|modello|型号|型號|型番|모델명"
)
_GTIN_LABELS = r"ean(?:-?code)?|gtin(?:-?1[234])?|upc|isbn(?:-?1[03])?|barcode|штрихкод"
# A code: letters, digits and the separators shops use (002.937.72, 1002/710, PU_106160/01),
# and groups of capitals and digits after single spaces, each with a digit (Bosch's and
# Würth's numbers as they print them, "0 986 479 B93", "0165 040 440"): a word after a code
# ("12345 Stück") has none, so it is no group.
_CODE = r"(?P<code>[A-Za-z0-9][A-Za-z0-9./_-]{0,40}(?: (?=[A-Z]{0,5}\d)[A-Z0-9]{1,6}){0,5})"
_GAP = (  # a colon may sit in a span of its own, between the label's and the code's (VTEX)
    r"\s*(?:n[°º]\s*|no\.\s*|[:#.\-–—|：]\s*)?(?:<[^<>]{0,300}>\s*){0,6}"
    r"(?:[:#：]\s*(?:<[^<>]{0,300}>\s*){0,4})?(?:&nbsp;|&#160;|\s)*"  # "Код:&nbsp;281234567"
)


# ">" where a text run starts with a letter (the lookahead skips "><" and numbers at C speed),
# the label, the gap (CJK shops use a full-width colon, "商品番号：123456"), and the code
# ending its text run.
_LABELLED = re.compile(  # case-insensitive only after ">": a literal first char scans fast
    rf">(?=\s*[^\W\d_])(?i:\s*(?:(?P<sku>{_SKU_LABELS})|(?P<mpn>{_MPN_LABELS})"
    rf"|(?P<gtin>{_GTIN_LABELS}))(?![^\W\d_]){_GAP}){_CODE}\s*(?=<)"
)
# A text run that is one code, and the words that mark its element as the product's code.
_CODE_RUN = re.compile(r">\s*" + _CODE + r"\s*</")
_MARKS = re.compile(
    r"product[-_]?(?:reference|code|ref|sku|number)|item[-_]?(?:number|code)"
    r"|article[-_]?(?:number|nr|code)|\bsku\b",
    re.IGNORECASE,
)
_SCAN_LIMIT = 2_000_000  # characters of HTML scanned for labels
_MAX_SKUS = 10
_MAX_LOOKS = 20  # occurrences of a code checked for being shown as text

# Item ids in URL paths: an ASIN after /dp/, an id after a marketplace segment, or a trailing
# id of five or more digits (optionally after up to four letters: Takealot's PLID) on the last
# segment.
_ASIN = re.compile(r"/(?:dp|gp/product|gp/aw/d)/([A-Z0-9]{10})(?:[/?#]|$)")
_ITEM_SEGMENT = re.compile(
    r"/(?:itm|item|items|deal|deals|listing|listings|ad|ads|anuncio|annonce|offer|lot)"
    r"/(?:[^/?#]*?[-_/])?(\d{6,})(?:[/?#._-]|$)",
    re.IGNORECASE,
)
# A product segment before or after "/p/": noon's "/<slug>/N51758546A/p/", Flipkart's
# "/<slug>/p/itm8c1f2a3b4d5e6" (a code of letters and digits, both).
_P_SEGMENT = re.compile(
    r"/((?=[A-Z]*\d)(?=\d*[A-Z])[A-Z0-9]{8,16})/p/?(?:[?#]|$)"
    r"|/p/(itm(?=[a-z]*\d)[0-9a-z]{10,16})(?:[/?#]|$)"
)
_TRAILING_ID = re.compile(
    r"(?:^|[-_/]|iid-)([A-Za-z]{0,4}\d{5,}[A-Za-z]{0,2})(?:\.(?:html?|php|aspx?|htm))?/?$"
)


@dataclass(slots=True)
class Codes:
    """Codes the page shows beside labels: every ``sku`` one in page order, the first
    model number and the first EAN/GTIN."""

    skus: list[str] = field(default_factory=list)
    mpn: str | None = None
    gtin: str | None = None


def labelled_codes(html: str) -> Codes:
    """Scanned from the page's first ``<h1>`` on: the product's own codes follow its title,
    while what precedes it (menus, a header's mini basket, another product's teaser) is not
    about it. Without a title, from ``<body>``."""
    start = html.find("<h1")
    if start < 0:
        start = max(0, html.find("<body"))
    text = html[: start + _SCAN_LIMIT]
    out = Codes()
    for match in _LABELLED.finditer(text, start):
        code = _clean(match.group("code"))
        if code is None:
            continue
        if match.group("sku") is not None:
            if len(out.skus) < _MAX_SKUS and code not in out.skus:
                out.skus.append(code)
        elif match.group("mpn") is not None:
            out.mpn = out.mpn or code
        elif out.gtin is None:
            out.gtin = code
    if not out.skus:
        marked = _marked(text, start) or _bracketed(text, start)
        if marked:
            out.skus.append(marked)
    return out


# A code alone in brackets, a text run of its own: osCommerce prints the model so under the
# product's name ("<span class="smallText">[JJ-EL34-MP]</span>").
_BRACKETED = re.compile(r">\s*\[" + _CODE + r"\]\s*<")


def _bracketed(text: str, start: int) -> str | None:
    match = _BRACKETED.search(text, start)
    return _clean(match.group("code")) if match else None


def _marked(text: str, start: int) -> str | None:
    """A code alone in an element whose opening tag names it (``<span class="sku">``)."""
    for match in _CODE_RUN.finditer(text, start):
        code = _clean(match.group(1))
        if code is None:
            continue
        tag_start = text.rfind("<", max(0, match.start() - 1000), match.start())
        if tag_start >= 0 and _MARKS.search(text, tag_start, match.start()):
            return code
    return None


def shows_code(html: str, code: str) -> bool:
    """The page shows ``code`` as text of its own (``>code<``, ``: code<``) or after a sku
    label in its text run (``>SKU code<``), past its head."""
    start = max(0, html.find("<body"))
    for _ in range(_MAX_LOOKS):
        at = html.find(code, start)
        if at < 0:
            return False
        before = html[max(0, at - 3) : at].rstrip()
        after = html[at + len(code) : at + len(code) + 3].lstrip()
        if after[:1] == "<" and (before[-1:] in (">", ":", "#") or _labelled(html, at, code)):
            return True
        start = at + len(code)
    return False


def _labelled(html: str, at: int, code: str) -> bool:
    """The text run that ends with ``code`` (at ``at``) is a sku label and that code."""
    run = html.rfind(">", max(0, at - _LABEL_RUN), at)
    match = _LABELLED.match(html, run) if run >= 0 else None
    if match is None or match.group("sku") is None or match.start("code") != at:
        return False
    return _clean(match.group("code")) == code


_LABEL_RUN = 80  # characters before a code looked at for its label


def _clean(raw: str) -> str | None:
    code = raw.strip().rstrip(".-/_")
    if len(code) < 3:
        return None
    if not any(c.isdigit() for c in code) and not _LETTER_CODE.fullmatch(code):
        return None  # words ("Details", "eingeben"), not codes
    return code


# A code without digits: capitals in parts ("TN-HOOD-OAT", WooCommerce's and BigCommerce's
# SKUs are often such), never a word.
_LETTER_CODE = re.compile(r"[A-Z]{2,}(?:[-_./][A-Z]+)+")


def is_item_url(url: str) -> bool:
    """The URL is a marketplace's or classified site's item page (``/itm/<id>``,
    ``/dp/<ASIN>``, ``/item/…-<id>``): a trailing id alone does not say so."""
    path = unquote(urlsplit(url).path)
    return _ASIN.search(path) is not None or _ITEM_SEGMENT.search(path) is not None


def url_item_id(url: str) -> str | None:
    """The item id a marketplace or classified URL carries in its path, if it has one."""
    path = unquote(urlsplit(url).path)
    for pattern in (_ASIN, _ITEM_SEGMENT, _P_SEGMENT, _TRAILING_ID):
        match = pattern.search(path)
        if match:
            return match.group(match.lastindex or 1)
    return None
