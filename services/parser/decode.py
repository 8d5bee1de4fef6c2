"""Bytes → text: BOM, HTTP charset, ``<meta>`` charset, then detection; UTF-8 wins ties.

Order: a BOM is definitive (browsers let it override the HTTP header, and a BOM that
contradicts the header is the header being wrong). Then the declared charset (HTTP, else
``<meta charset>`` / ``http-equiv``), decoded strictly. A declaration is often wrong: a page
served as windows-1252 that is valid UTF-8 with multi-byte sequences is UTF-8 (the odds of
real windows-1252 text forming valid UTF-8 sequences are negligible), and a declaration that
fails to decode falls back to UTF-8, then to detection. Labels are mapped the WHATWG way
(latin-1 and ascii mean windows-1252, Shift_JIS means cp932, …).
"""

from __future__ import annotations

import codecs
import re

PRESCAN_BYTES = 16384  # WHATWG says 1024; real heads carry kilobytes of inline script first
DETECT_BYTES = 65536

_META_CHARSET = re.compile(
    rb"""<meta[^>]+?charset\s*=\s*["']?\s*([A-Za-z0-9_:.+-]+)""", re.IGNORECASE
)
_HTTP_CHARSET = re.compile(r"""charset\s*=\s*["']?\s*([A-Za-z0-9_:.+-]+)""", re.IGNORECASE)

# WHATWG encoding labels whose Python codec differs from the label's plain meaning.
_SUPERSETS = {
    "ascii": "cp1252",
    "latin_1": "cp1252",
    "iso8859_1": "cp1252",
    "iso8859_9": "cp1254",
    "iso8859_11": "cp874",
    "tis_620": "cp874",
    "shift_jis": "cp932",
    "euc_kr": "cp949",
    "gb2312": "gb18030",
    "gbk": "gb18030",
    "big5": "big5hkscs",
    "utf_16": "utf-8",  # a page that declares UTF-16 without a BOM is UTF-8 in every browser
    "utf_16_le": "utf-8",
    "utf_16_be": "utf-8",
}
_BOMS = (
    (codecs.BOM_UTF8, "utf-8"),
    (codecs.BOM_UTF16_LE, "utf-16-le"),
    (codecs.BOM_UTF16_BE, "utf-16-be"),
)


def normalize_charset(label: str | None) -> str | None:
    """The Python codec for an encoding label, or None when unknown."""
    if not label:
        return None
    label = label.strip().strip("\"'").lower()
    if label in ("x-sjis", "sjis", "shift-jis", "windows-31j", "ms_kanji", "x-ms-cp932"):
        label = "shift_jis"
    if label in ("x-user-defined", "unicode-1-1-utf-8", "utf8"):
        label = "utf-8"
    try:
        name = codecs.lookup(label).name
    except LookupError:
        return None
    return _SUPERSETS.get(name.replace("-", "_"), name)


def charset_from_content_type(content_type: str | None) -> str | None:
    if not content_type:
        return None
    m = _HTTP_CHARSET.search(content_type)
    return normalize_charset(m.group(1)) if m else None


def sniff_meta_charset(body: bytes) -> str | None:
    m = _META_CHARSET.search(body, 0, PRESCAN_BYTES)
    return normalize_charset(m.group(1).decode("ascii", "replace")) if m else None


def decode_html(body: bytes, content_type: str | None = None) -> str:
    """Decode an HTML payload; never raises."""
    return decode_html_utf8(body, content_type)[0]


def decode_html_utf8(body: bytes, content_type: str | None = None) -> tuple[str, bool]:
    """``decode_html``, and whether the text is ``body`` read as strict UTF-8 (no BOM, no
    replaced byte): then ``body`` is the text's UTF-8 encoding, and a parser that wants
    UTF-8 can take it as it is instead of encoding the text again."""
    if not body:
        return "", False
    for bom, codec in _BOMS:
        if body.startswith(bom):
            return body[len(bom) :].decode(codec, "replace"), False
    if body.isascii():
        return body.decode("ascii"), True
    utf8 = _strict(body, "utf-8")
    if utf8 is not None:
        # Valid UTF-8 with non-ASCII sequences, whatever the page declares: a declaration
        # of another charset is wrong (mojibake otherwise), so none is looked for.
        return utf8, True
    declared = charset_from_content_type(content_type) or sniff_meta_charset(body)
    # UTF-8 with a few broken bytes (a truncated copy, one bad include) is still UTF-8:
    # replacing those bytes beats reading every other character as windows-1252.
    utf8 = _mostly_utf8(body)
    if declared and declared != "utf-8":
        if utf8 is not None:
            return utf8, False
        text = _strict(body, declared)
        if text is not None:
            return _fix_yen(text, declared), False
    elif utf8 is not None:
        return utf8, False
    codec = _detect(body) or declared or "cp1252"
    return _fix_yen(body.decode(codec, "replace"), codec), False


_UTF8_SEQUENCE = re.compile(
    rb"[\xc2-\xdf][\x80-\xbf]|[\xe0-\xef][\x80-\xbf]{2}|[\xf0-\xf4][\x80-\xbf]{3}"
)


def _mostly_utf8(body: bytes) -> str | None:
    """The body decoded as UTF-8 with replacements, when its valid multi-byte sequences
    outnumber its invalid bytes ten to one (text in a legacy code page forms almost none)."""
    valid = len(_UTF8_SEQUENCE.findall(body))
    if valid < 10:
        return None
    text = body.decode("utf-8", "replace")
    broken = text.count("\ufffd") - body.count(b"\xef\xbf\xbd")
    return text if valid >= 10 * broken else None


def _fix_yen(text: str, codec: str) -> str:
    """Japanese code pages put the yen sign at 0x5C, which Python decodes as a backslash."""
    if codec in _JAPANESE and "\\" in text:
        return _YEN_BACKSLASH.sub("\u00a5", text)
    return text


_CJK = frozenset({"cp949", "euc_kr", "gb18030", "gb2312", "gbk", "big5", "big5hkscs", "johab"})
_JAPANESE = frozenset({"cp932", "shift_jis", "euc_jp", "shift_jis_2004", "shift_jisx0213"})
_YEN_BACKSLASH = re.compile(r"\\(?=\s?\d)")


def _strict(body: bytes, codec: str) -> str | None:
    try:
        return body.decode(codec)
    except (UnicodeDecodeError, LookupError):
        return None


def _detect(body: bytes) -> str | None:
    """Best guess for undeclared, non-UTF-8 bytes (charset-normalizer when installed)."""
    try:
        from charset_normalizer import from_bytes
    except ImportError:  # pragma: no cover - optional dependency
        return None
    best = from_bytes(body[:DETECT_BYTES]).best()
    if best is None:
        return None
    codec = normalize_charset(best.encoding)
    # Japanese text always carries hiragana; the detector confuses short Shift_JIS with Korean.
    if codec in _CJK and codec not in _JAPANESE:
        for japanese in ("cp932", "euc_jp"):
            text = _strict(body[:DETECT_BYTES], japanese)
            if text is not None and _hiragana_share(text) > 0.1:
                return japanese
    # On short pages the detector cannot tell Latin code pages apart (it often says cp1250 for
    # French or German); windows-1252 is by far the most common, so it wins within the family.
    if codec and codec.startswith(_LATIN_FAMILY) and _strict(body, "cp1252") is not None:
        return "cp1252"
    return codec


_LATIN_FAMILY = (
    "cp1250", "cp1252", "cp1254", "cp1257", "cp775", "cp437", "cp85", "cp86", "mac_",
    "latin_1", "iso8859_1", "iso8859_2", "iso8859_3", "iso8859_4", "iso8859_9", "iso8859_13",
    "iso8859_14", "iso8859_15", "iso8859_16",
)  # fmt: skip


def _hiragana_share(text: str) -> float:
    wide = [c for c in text if ord(c) > 0x2000]
    if not wide:
        return 0.0
    return sum(1 for c in wide if "\u3041" <= c <= "\u309f") / len(wide)
