from __future__ import annotations

import msgspec
import pytest

from schemas.generate import OUT, render
from schemas.messages import FetchResult, Trigger


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
    base = {"attempt_id": "1.1", "job_id": 1, "entry_id": 1, "source": "s", "url": "http://x/"}
    ok = msgspec.convert({**base, "outcome": "ok"}, FetchResult)
    assert ok.outcome == "ok"
    with pytest.raises(msgspec.ValidationError):
        msgspec.convert({**base, "outcome": "teapot"}, FetchResult)
