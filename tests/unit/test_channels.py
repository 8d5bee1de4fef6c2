"""The channel table: every channel lies in its stream, the NATS names stay what deployments
already have, a family routes each body to its own subject, and a view must decode every body."""

from __future__ import annotations

import msgspec
import pytest

from schemas.messages import Attempt, DeadLetter, JobEvent, Message, Product
from shared.channels import (
    CHANNELS,
    DEAD_LETTERS,
    FETCH_RESULTS,
    JOB_EVENTS,
    PARSE_RESULTS,
    channels_of,
)
from shared.names import Names
from shared.provision import consumer_specs, stream_configs

NAMES = Names("ns")


def matches(pattern: str, subject: str) -> bool:
    """NATS subject matching: ``*`` one token, ``>`` the rest (for subjects and wildcards)."""
    want, got = pattern.split("."), subject.split(".")
    for i, token in enumerate(want):
        if token == ">":
            return len(got) > i
        if i >= len(got) or (token != "*" and token != got[i] and got[i] != "*"):
            return False
    return len(want) == len(got)


def test_every_channel_and_durable_lies_in_its_stream() -> None:
    streams = {config.name: config.subjects or [] for config in stream_configs(NAMES)}
    for channel in CHANNELS:
        subjects = streams[NAMES.stream(channel.stream)]
        assert any(matches(s, channel.subjects(NAMES)) for s in subjects), channel.stream
        for durable in channel.durables:
            assert matches(channel.subjects(NAMES), channel.filter_subject(NAMES, durable))


def test_the_nats_names_are_the_deployed_ones() -> None:
    specs = {
        (s.durable(NAMES), NAMES.stream(s.stream_key), s.filter_subject, s.ack_wait)
        for s in consumer_specs(NAMES)
    }
    assert specs == {
        ("scheduler-trigger", "ns_trigger", "ns.trigger", 60.0),
        ("scheduler-fetched", "ns_fetched", "ns.fetched", 30.0),
        ("scheduler-parsed", "ns_parsed", "ns.parsed", 30.0),
        ("fetcher-fetch", "ns_fetch", "ns.fetch", 60.0),
        ("renderer-render", "ns_render", "ns.render", 60.0),
        ("parser-fetched", "ns_fetched", "ns.fetched", 30.0),
        ("refresher-parsed", "ns_parsed", "ns.parsed", 30.0),
        ("refresher-events", "ns_events", "ns.events.job.*.completed", 60.0),
        ("notifier-events", "ns_events", "ns.events.product.*.*", 60.0),
    }
    assert [c.stream for c, _ in channels_of("refresher")] == ["parsed", "events"]


def test_a_family_routes_each_body_to_its_subject() -> None:
    event = JobEvent(job_id=7, source="s", event="completed", status="completed")
    assert JOB_EVENTS.subject(NAMES, event) == "ns.events.job.7.completed"
    letter = DeadLetter(stream="fetch", subject="ns.fetch", reason="r")
    assert DEAD_LETTERS.subject(NAMES, letter) == "ns.dlq.fetch"
    assert matches(DEAD_LETTERS.subjects(NAMES), DEAD_LETTERS.subject(NAMES, letter))


class Lean(Message, tag="parse_result", kw_only=True, frozen=True):
    attempt: Attempt
    product: Product | None = None


class Untagged(Message, kw_only=True, frozen=True):
    attempt: Attempt


class Retyped(Message, tag="parse_result", kw_only=True, frozen=True):
    attempt: int


class Strict(Message, tag="parse_result", kw_only=True, frozen=True, forbid_unknown_fields=True):
    attempt: Attempt


def test_a_view_reads_the_channel_and_decodes_its_bodies() -> None:
    lean = PARSE_RESULTS.view(Lean)
    assert lean.durables == PARSE_RESULTS.durables and lean.stream == PARSE_RESULTS.stream
    wire = b'{"type": "parse_result", "v": 2, "attempt": {"entry_id": 1, "job_id": 1, '
    wire += b'"source": "s", "url": "u"}, "links": [{"url": "x"}]}'
    assert msgspec.json.decode(wire, type=lean.body).attempt.id == "1.1"
    with pytest.raises(TypeError, match="view"):
        attempt = Attempt(entry_id=1, job_id=1, source="s", url="u")
        lean.subject(NAMES, Lean(attempt=attempt))  # a view is never published
    for wrong in (Untagged, Retyped, Strict):
        with pytest.raises(TypeError):
            PARSE_RESULTS.view(wrong)
    with pytest.raises(TypeError):
        FETCH_RESULTS.view(Lean)  # another tag


def test_a_service_without_a_durable_has_no_consumer() -> None:
    with pytest.raises(LookupError, match="fetcher"):
        PARSE_RESULTS.durable("fetcher")
