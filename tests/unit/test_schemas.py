from __future__ import annotations

from collections.abc import Callable
from typing import Any

import msgspec
import pytest

from schemas.generate import OUT, render
from schemas.messages import FetchResult, FetchWork, Trigger
from services.refresher.products import ParsedProducts
from shared.channels import FETCH_RESULTS, FETCH_WORK, PARSE_RESULTS, TRIGGERS, Channel


def test_committed_json_schemas_match_the_structs() -> None:
    for name, content in render().items():
        path = OUT / name
        assert path.exists(), f"{name} missing: run `make schemas`"
        assert path.read_text() == content, f"{name} is stale: run `make schemas`"


def test_minimal_trigger_from_any_language() -> None:
    trigger = msgspec.json.decode(b'{"source": "demo-shop"}', type=Trigger)
    assert trigger.source == "demo-shop"
    assert trigger.kind == "discovery"
    assert trigger.v == 1


def test_unknown_fields_are_ignored_and_wrong_types_rejected() -> None:
    trigger = msgspec.json.decode(b'{"source": "s", "future_field": 1}', type=Trigger)
    assert trigger.source == "s"
    with pytest.raises(msgspec.ValidationError, match="source"):
        msgspec.json.decode(b'{"source": 3}', type=Trigger)
    with pytest.raises(msgspec.ValidationError, match="kind"):
        msgspec.json.decode(b'{"source": "s", "kind": "everything"}', type=Trigger)


def test_outcome_taxonomy_is_closed() -> None:
    base = {"attempt": {"entry_id": 1, "job_id": 1, "source": "s", "url": "http://x/"}}
    ok = msgspec.convert({**base, "outcome": "ok"}, FetchResult)
    assert ok.outcome == "ok"
    with pytest.raises(msgspec.ValidationError):
        msgspec.convert({**base, "outcome": "teapot"}, FetchResult)


# -- v1 messages still in the streams at an upgrade: read and upgraded, not dead-lettered --------

V1_WORK = {
    "type": "fetch_work",
    "v": 1,
    "attempt_id": "7.2",
    "job_id": 3,
    "entry_id": 7,
    "source": "s",
    "url": "http://x/p",
    "domain": "x",
    "kind": "product",
    "depth": 2,
    "attempt": 2,
    "keyword": "kettle",
    "previous_payload_ref": "sha256:ab",
    "request": {"method": "POST", "body": "{}"},
}


def test_a_v1_message_does_not_decode_as_v2() -> None:
    with pytest.raises(msgspec.ValidationError):
        msgspec.json.decode(msgspec.json.encode(V1_WORK), type=FetchWork)


@pytest.mark.parametrize(
    ("channel", "v1", "check"),
    [
        (FETCH_WORK, V1_WORK, lambda b: b.domain == "x"),
        (
            FETCH_RESULTS,
            {**V1_WORK, "type": "fetch_result", "outcome": "not_modified", "status": 304},
            lambda b: (b.outcome, b.status) == ("not_modified", 304),
        ),
        (
            PARSE_RESULTS,
            {**V1_WORK, "type": "parse_result", "links": [{"url": "http://x/q"}]},
            lambda b: [link.url for link in b.links] == ["http://x/q"],
        ),
    ],
)
def test_the_channel_upgrades_its_v1_messages(
    channel: Channel[Any], v1: dict[str, Any], check: Callable[[Any], bool]
) -> None:
    body = channel.upgrade(msgspec.json.encode(v1))
    assert body is not None and body.v == 2 and check(body)
    attempt = body.attempt
    assert (attempt.id, attempt.entry_id, attempt.number, attempt.job_id) == ("7.2", 7, 2, 3)
    assert (attempt.source, attempt.url, attempt.depth, attempt.keyword) == (
        "s",
        "http://x/p",
        2,
        "kettle",
    )
    if channel is not PARSE_RESULTS:  # a v1 parse result never carried these
        assert attempt.kind == "product" and attempt.previous_payload_ref == "sha256:ab"
        assert attempt.request is not None and attempt.request.method == "POST"


def test_a_view_of_a_channel_upgrades_to_the_view() -> None:
    v1 = {**V1_WORK, "type": "parse_result", "product": {"key": "K", "price": "1.00"}}
    view = PARSE_RESULTS.view(ParsedProducts)
    body = view.upgrade(msgspec.json.encode(v1))
    assert isinstance(body, ParsedProducts)
    assert body.attempt.id == "7.2" and body.product is not None and body.product.key == "K"


def test_garbage_is_not_upgraded() -> None:
    assert FETCH_WORK.upgrade(b'{"type": "fetch_work", "v": 1}') is None
    assert FETCH_WORK.upgrade(b"not json") is None
    assert TRIGGERS.upgrade(b'{"source": 1}') is None  # a channel without older shapes


def test_message_versions() -> None:
    assert (FETCH_WORK.version, FETCH_RESULTS.version, PARSE_RESULTS.version) == (2, 2, 2)
    assert TRIGGERS.version == 1
    assert PARSE_RESULTS.view(ParsedProducts).version == 2
