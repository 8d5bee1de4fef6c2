"""A batch handler publishes each message's outputs under that message's own span."""

from __future__ import annotations

from typing import Any, cast

from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider

from shared.consumer import Delivery
from shared.telemetry import inject


def test_a_delivery_makes_its_span_current_for_what_is_published_within() -> None:
    tracer = TracerProvider().get_tracer("test")  # not the global one: nothing else changes
    first, second = tracer.start_span("first"), tracer.start_span("second")
    msg = cast(Any, None)
    a, b = Delivery(body=cast(Any, 1), msg=msg, span=first), Delivery(cast(Any, 2), msg, second)
    with a.traced():
        carried = inject()
    with b.traced():
        other = inject()
    assert f"{first.get_span_context().trace_id:032x}" in carried["traceparent"]
    assert f"{second.get_span_context().trace_id:032x}" in other["traceparent"]
    assert "traceparent" not in inject()  # outside, neither


def test_without_a_span_or_an_exporter_nothing_is_made_current() -> None:
    msg = cast(Any, None)
    for span in (None, trace.INVALID_SPAN):
        with Delivery(body=cast(Any, 1), msg=msg, span=span).traced():
            assert "traceparent" not in inject()
