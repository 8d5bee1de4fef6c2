"""Bad input the other suites do not cover: hostile pages within a time budget, URLs of odd
shapes through canonicalisation and admission, and messages over the server's size limit.

"""

from __future__ import annotations

import json
import os
import random
import string
import subprocess
import sys
import textwrap

import nats.errors
import pytest

from services.scheduler.frontier import Admission, Candidate
from shared.sources import source_from_dict
from shared.urls import canonicalize
from tests.conftest import ROOT

BUDGET = 10.0  # CPU seconds a single page may take to parse
HANG = 60.0  # wall seconds after which a child counts as hung (the machine may be loaded)
MAX_PAYLOAD = 1024 * 1024  # the NATS server's max_payload

# Each page is built and parsed in a child process, which reports the CPU time it used: the
# budget holds however loaded the machine is (parallel tests, other jobs), and a runaway parse
# is killed instead of hanging the suite.
_PARSE = textwrap.dedent(
    """
    import json, sys, time
    from schemas.messages import Attempt, ParseResult
    from services.parser.page import parse_page
    from shared.bus import encode
    kind = sys.argv[1]
    if kind == "nested":  # 10 MB of nested tags
        n = 10 * 1024 * 1024 // 11
        body = b"<html><body>" + b"<div>" * n + b"deep" + b"</div>" * n + b"</body></html>"
    elif kind == "links":  # a million links
        body = b"<html><body>" + b"".join(
            b'<a href="/p/%d">x</a>' % i for i in range(1_000_000)) + b"</body></html>"
    elif kind == "utf8":  # declared UTF-8, but not
        ld = (b'<script type="application/ld+json">{"@type": "Product", "sku": "S1", '
              b'"name": "Caf\\xe9 \\xff", "offers": {"price": "1.50", "priceCurrency": "EUR"}}'
              b'</script>')
        body = (b"<html><head><meta charset=utf-8>" + ld + b"</head><body>\\xc3\\x28 \\xa0\\xa1"
                b" \\xf0\\x28\\x8c\\x28 \\x00\\x00</body></html>")
    page = parse_page(body, "http://a.example/p/1", content_type="text/html; charset=utf-8")
    attempt = Attempt(job_id=1, entry_id=1, source="s", url="http://a.example/p/1")
    result = ParseResult(attempt=attempt, product=page.product, links=page.links)
    print(json.dumps({"product": page.product and page.product.name,
                      "price": page.product and page.product.price,
                      "links": len(page.links), "message": len(encode(result)),
                      "cpu": time.process_time()}))
    """
)


def _parse_in_child(kind: str) -> dict:
    try:
        done = subprocess.run(
            [sys.executable, "-c", _PARSE, kind],
            capture_output=True,
            text=True,
            timeout=HANG,
            cwd=ROOT,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
            check=False,
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"parsing the {kind!r} page hung for {HANG:g} s")
    assert done.returncode == 0, done.stderr[-2000:]
    out = json.loads(done.stdout)
    assert out["cpu"] < BUDGET, f"parsing the {kind!r} page took {out['cpu']:.1f} CPU s"
    return out


def test_ten_megabytes_of_nested_tags_parse_within_budget() -> None:
    out = _parse_in_child("nested")
    assert out["message"] < MAX_PAYLOAD


def test_a_million_links_parse_within_budget_into_one_message() -> None:
    out = _parse_in_child("links")
    assert out["message"] < MAX_PAYLOAD


def test_invalid_utf8_still_yields_the_product() -> None:
    out = _parse_in_child("utf8")
    assert out["price"] == "1.50"
    assert out["product"].startswith("Caf")


# -- URLs of every odd shape -----------------------------------------------------------------
@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("http://bücher.example/straße?q=ä", "http://xn--bcher-kva.example/stra%C3%9Fe?q=%C3%A4"),
        ("HTTP://A.EXAMPLE/P#frag", "http://a.example/P"),
        ("  http://a.example/p  ", "http://a.example/p"),
        ("http://a.example/a\r\nSet-Cookie: x", "http://a.example/aSet-Cookie:%20x"),
        ("http://a.example/a\x00b", "http://a.example/a%00b"),
        ("http://a.example/\u202e", "http://a.example/%E2%80%AE"),
        ("javascript:alert(1)", None),
        ("data:text/html,<b>x</b>", None),
        ("ftp://a.example/f", None),
        ("http:///nohost", None),
        ("http://[::1/", None),
        ("//a.example/p", None),
    ],
)
def test_odd_urls_are_canonical_or_refused(url: str, expected: str | None) -> None:
    got = canonicalize(url)
    assert got == expected
    if got is not None:
        assert not any(ch in got for ch in "\x00\r\n\t ")


def test_credentials_never_enter_the_frontier() -> None:
    got = canonicalize("http://user:secret@a.example/p")
    assert got is None or "secret" not in got


def _noise(n: int) -> str:
    rng = random.Random(7)  # incompressible, so no TOAST compression hides the size
    return "".join(rng.choices(string.ascii_letters + string.digits, k=n))


async def test_a_very_long_link_does_not_break_admission(pool) -> None:
    source = source_from_dict({"name": "s", "seeds": ["http://a.example/"], "allow_private": True})
    async with pool.acquire() as conn:
        await conn.execute(
            "INSERT INTO sources (name, definition) VALUES ('s', '{}'::jsonb) "
            "ON CONFLICT DO NOTHING"
        )
        job_id = await conn.fetchval(
            "INSERT INTO jobs (source, definition) VALUES ('s', '{}') RETURNING id"
        )
        admission = Admission(source, ["a.example"])
        candidates = [
            Candidate("http://a.example/ok", "page", 1, None),
            Candidate("http://a.example/" + _noise(100_000), "page", 1, None),
        ]
        admitted = await admission.admit(conn, job_id, candidates)
    assert admitted == 1  # the sane link still gets in


# -- oversized messages ----------------------------------------------------------------------
async def test_an_oversized_trigger_is_refused_clearly(nc, namespace) -> None:
    from shared.names import Names

    body = json.dumps({"source": "s", "seeds": ["http://a.example/" + "x" * 2_000_000]})
    with pytest.raises(nats.errors.MaxPayloadError):
        await nc.publish(Names(namespace).trigger, body.encode())
