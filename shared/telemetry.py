"""OpenTelemetry in one place: tracer set-up, and W3C context in NATS headers.

Without ``OTEL_EXPORTER_OTLP_ENDPOINT`` (or ``OTEL_TRACES_EXPORTER``) tracing is a no-op
provider, so nothing is exported and the cost is near zero.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager

from opentelemetry import propagate, trace
from opentelemetry.context import Context
from opentelemetry.trace import Span, SpanKind, Tracer
from opentelemetry.util.types import AttributeValue

_provider_set = False


def setup_tracing(service: str) -> None:
    """Install an SDK tracer provider exporting over OTLP/HTTP when the OTEL env asks for it."""
    global _provider_set
    if _provider_set:
        return
    exporter_name = os.environ.get("OTEL_TRACES_EXPORTER", "")
    endpoint = os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT") or os.environ.get(
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"
    )
    if exporter_name == "none" or not (endpoint or exporter_name):
        return
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter

    resource = Resource.create({"service.name": os.environ.get("OTEL_SERVICE_NAME", service)})
    provider = TracerProvider(resource=resource)
    if exporter_name == "console":
        provider.add_span_processor(BatchSpanProcessor(ConsoleSpanExporter()))
    else:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    trace.set_tracer_provider(provider)
    _provider_set = True


def shutdown_tracing() -> None:
    provider = trace.get_tracer_provider()
    shutdown = getattr(provider, "shutdown", None)
    if shutdown:
        shutdown()


def tracer() -> Tracer:
    return trace.get_tracer("trawl")


def inject(headers: dict[str, str] | None = None) -> dict[str, str]:
    """Headers with the current trace context added (``traceparent``)."""
    out = dict(headers or {})
    propagate.inject(out)
    return out


def extract(headers: dict[str, str] | None) -> Context:
    return propagate.extract(headers or {})


def current_traceparent() -> str | None:
    """The W3C traceparent of the current span, to store with work that outlives it."""
    return inject().get("traceparent")


@contextmanager
def producer_span(
    subject: str, traceparent: str | None, *, as_parent: bool, **attrs: AttributeValue | None
) -> Iterator[dict[str, str]]:
    """A publish span for stored work; yields the headers that carry it.

    ``as_parent``: continue the stored trace (a seed continues its trigger's trace); otherwise
    start a new trace linked to it (a discovered page gets a trace of its own).
    """
    stored = extract({"traceparent": traceparent}) if traceparent else None
    context, links = stored if as_parent else None, []
    if stored is not None and not as_parent:
        linked = trace.get_current_span(stored).get_span_context()
        if linked.is_valid:
            links.append(trace.Link(linked))
    attributes: dict[str, AttributeValue] = {
        "messaging.system": "nats",
        "messaging.destination.name": subject,
    }
    attributes.update({k: v for k, v in attrs.items() if v is not None})
    with tracer().start_as_current_span(
        f"{subject} publish",
        context=context,
        kind=SpanKind.PRODUCER,
        links=links,
        attributes=attributes,
    ):
        yield inject()


def tracing_enabled() -> bool:
    return _provider_set


def start_consumer_span(
    subject: str, headers: dict[str, str] | None, **attrs: AttributeValue | None
) -> Span:
    """A consumer span started now and ended by the caller (batch handling)."""
    if not _provider_set:
        return trace.INVALID_SPAN
    attributes: dict[str, AttributeValue] = {
        "messaging.system": "nats",
        "messaging.destination.name": subject,
    }
    attributes.update({k: v for k, v in attrs.items() if v is not None})
    return tracer().start_span(
        f"{subject} process",
        context=extract(headers),
        kind=SpanKind.CONSUMER,
        attributes=attributes,
    )


@contextmanager
def consumer_span(
    subject: str, headers: dict[str, str] | None, **attrs: AttributeValue | None
) -> Iterator[Span]:
    """The span of one handled message, child of the publisher's context."""
    if not _provider_set:  # no exporter: skip context extraction and span bookkeeping
        yield trace.INVALID_SPAN
        return
    attributes: dict[str, AttributeValue] = {
        "messaging.system": "nats",
        "messaging.destination.name": subject,
    }
    attributes.update({k: v for k, v in attrs.items() if v is not None})
    with tracer().start_as_current_span(
        f"{subject} process",
        context=extract(headers),
        kind=SpanKind.CONSUMER,
        attributes=attributes,
    ) as span:
        yield span
