from __future__ import annotations

from services.parser.decode import (
    charset_from_content_type,
    decode_html,
    decode_html_utf8,
    normalize_charset,
)

TEXT = "<html><body><h1>Café crème brûlée – “spécial” für Größe</h1></body></html>"
JA = "<html><body><h1>高品質なコーヒーメーカー</h1><p>毎朝おいしいコーヒーを。</p></body></html>"


def test_http_charset_wins() -> None:
    assert decode_html(TEXT.encode("cp1252"), "text/html; charset=windows-1252") == TEXT


def test_meta_charset() -> None:
    body = b'<meta charset="windows-1252">' + TEXT.encode("cp1252")
    assert "Café crème" in decode_html(body)


def test_latin1_label_means_windows_1252() -> None:
    assert normalize_charset("ISO-8859-1") == "cp1252"
    assert normalize_charset("Shift_JIS") == "cp932"
    assert normalize_charset("nonsense") is None
    assert charset_from_content_type('text/html; charset="UTF-8"') == "utf-8"


def test_utf8_with_wrong_declaration() -> None:
    assert decode_html(TEXT.encode("utf-8"), "text/html; charset=iso-8859-1") == TEXT


def test_declared_utf8_that_is_not() -> None:
    assert decode_html(TEXT.encode("cp1252"), "text/html; charset=utf-8") == TEXT


def test_undeclared_windows_1252_and_shift_jis() -> None:
    assert decode_html(TEXT.encode("cp1252")) == TEXT
    assert decode_html(JA.encode("shift_jis")) == JA


def test_bom_beats_header() -> None:
    assert decode_html(b"\xef\xbb\xbf" + TEXT.encode("utf-8"), "text/html; charset=cp1252") == TEXT
    assert decode_html("\ufeffhé".encode("utf-16-le")) == "hé"


def test_empty_and_ascii() -> None:
    assert decode_html(b"") == ""
    assert decode_html(b"<p>plain</p>", "text/html; charset=bogus") == "<p>plain</p>"


def test_utf8_with_a_few_broken_bytes_stays_utf8() -> None:
    body = TEXT.encode("utf-8") * 3 + b"<p>caf\xe9 \xff</p>"  # two stray Latin-1 bytes
    for content_type in ("text/html; charset=utf-8", None, "text/html; charset=iso-8859-1"):
        text = decode_html(body, content_type)
        assert text.startswith(TEXT) and text.count("\ufffd") == 2, content_type


def test_windows_1252_with_a_stray_utf8_sequence_stays_windows_1252() -> None:
    body = TEXT.encode("cp1252") * 3 + "–".encode()
    assert decode_html(body, "text/html; charset=windows-1252").startswith(TEXT)
    assert decode_html(body, "text/html; charset=utf-8").startswith(TEXT)


def test_utf8_flag_only_when_the_body_is_the_texts_utf8() -> None:
    """The parser hands lexbor the body itself when the flag is set: it must then be exactly
    the text's UTF-8, and every other decoding must say no."""
    cases = {
        b"<p>plain ascii</p>": True,
        TEXT.encode("utf-8"): True,
        TEXT.encode("utf-8")[:-3] + b"\xff" + b"</html>" + TEXT.encode("utf-8") * 3: False,
        b"\xef\xbb\xbf" + TEXT.encode("utf-8"): False,  # the BOM is not text
        TEXT.encode("cp1252"): False,
        JA.encode("shift_jis"): False,
        b"": False,
    }
    for body, exact in cases.items():
        text, flag = decode_html_utf8(body)
        assert flag is exact, body[:40]
        assert text == decode_html(body)
        if flag:
            assert text.encode("utf-8") == body
