"""Making hostile text safe to encode (shared/wire.py) and the letter that always fits
(shared/letters.py)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any, cast

import msgspec
import pytest
from nats.aio.msg import Msg

from schemas.messages import Attempt, DeadLetter, Link, ParseResult, Product
from shared import names as n
from shared.bus import encode
from shared.letters import dead_letter
from shared.wire import clean, exact, scrubbed

ATTEMPT = Attempt(entry_id=1, job_id=1, source="s", url="http://127.0.0.2/p")


def test_clean_replaces_lone_surrogates_and_cuts() -> None:
    assert clean("Saw \ud800 blade") == "Saw ? blade"
    assert clean("é" * 10, 4) == "éééé"
    assert clean("plain") == "plain"
    assert clean("Nut\x00bolt") == "Nutbolt"  # PostgreSQL text cannot hold a NUL


def test_exact_keeps_only_values_that_go_back_byte_for_byte() -> None:
    assert exact('W/"abc"') == 'W/"abc"'
    assert exact("Tue, 24 Nov 2026 \udcff\udcfe:00 GMT") is None  # surrogateescape'd bytes
    assert exact("x" * 2000) is None
    assert exact(None) is None


def test_scrubbed_makes_an_unencodable_oversize_result_encodable_and_small() -> None:
    product = Product(
        key="K", name="N" * 2_000_000, brand="\ud800", attributes={"\udcff": "v" * 10_000}
    )
    result = ParseResult(
        attempt=ATTEMPT,
        product=product,
        links=[Link(url=f"http://127.0.0.2/{i}") for i in range(5000)],
    )
    with pytest.raises(UnicodeEncodeError):
        encode(result)
    safe = scrubbed(result, limit=1024, items=500)
    data = encode(safe)
    assert len(data) < 200_000
    assert safe.product is not None and safe.product.name == "N" * 1024
    assert safe.product.brand == "?" and safe.product.attributes == {"?": "v" * 1024}
    assert len(safe.links) == 500 and safe.attempt == ATTEMPT


def _msg(data: bytes, headers: dict[str, str]) -> Msg:
    meta = SimpleNamespace(num_delivered=2, sequence=SimpleNamespace(stream=41))
    fake = SimpleNamespace(data=data, headers=headers, subject="ns.parsed", metadata=meta)
    return cast(Msg, cast(Any, fake))


@pytest.mark.parametrize("body", [b"\x01" * 2_000_000, b"x" * 1_100_000, "é".encode() * 600_000])
def test_a_dead_letter_always_fits_and_says_where_the_original_was(body: bytes) -> None:
    headers = {
        "Nats-Expected-Stream": "ns_parsed",
        "Nats-Msg-Id": "m",
        "X-Origin": "t",
        "traceparent": "00-abc",
    }
    data, dlq_headers = dead_letter(
        _msg(body, headers), stream="parsed", reason="bad\nreason " * 1000, max_payload=1_048_576
    )
    assert len(data) + sum(len(k) + len(v) + 4 for k, v in dlq_headers.items()) < 1_048_576
    letter = msgspec.json.decode(data, type=DeadLetter)
    assert letter.truncated and letter.size == len(body) and letter.stream_seq == 41
    assert body.decode("utf-8", "replace").startswith(letter.data) and len(letter.data) > 100_000
    assert letter.headers == {"X-Origin": "t", "traceparent": "00-abc"}
    assert not any(k.startswith("Nats-") for k in dlq_headers)
    assert "\n" not in dlq_headers[n.DLQ_REASON] and len(dlq_headers[n.DLQ_REASON]) <= 500
    assert len(letter.reason) == 2000


def test_a_small_letter_is_whole() -> None:
    data, _ = dead_letter(_msg(b"{not json", {}), stream="parsed", reason="r", max_payload=1 << 20)
    letter = msgspec.json.decode(data, type=DeadLetter)
    assert (letter.data, letter.truncated, letter.size) == ("{not json", False, 9)
