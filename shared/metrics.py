"""Counts and metrics in one place: the counters every service keeps, which feed both the
service API's stats (``$SRV.STATS``, the admin API's ``/api/workers``) and ``/metrics`` for
Prometheus.

``Metrics`` is a service's registry. A ``Counter`` is a plain in-process count per label set:
handlers add to it, the stats endpoint reads the totals of the counters a service shows
(``Metrics.show``, or ``stat=`` when the counter is made), and ``/metrics`` reads every counter
through an observable OpenTelemetry instrument. So a count is kept once, whoever reads it. The
histograms (latency, lag) are OpenTelemetry instruments; with metrics off
(``TRAWL_METRICS_LISTEN`` empty, the default) they are no-ops, and counting costs a dict update.

``MetricsEndpoint`` is the "on" side: an SDK ``MeterProvider`` (never installed globally) with an
``InMemoryMetricReader``, observable instruments for the counters and the service's JetStream
queues, and a small aiohttp server rendering the Prometheus text format (0.0.4). We render it
ourselves instead of using ``opentelemetry-exporter-prometheus``: that exporter collects in
``prometheus_client``'s HTTP thread, where the asyncio-only NATS client cannot be awaited, and it
adds two dependencies and a second HTTP stack. Here a scrape runs in the service's event loop:
it first refreshes the queue figures (one ``stream_info`` per input stream, one
``consumer_info`` per durable and one for the DLQ, concurrently, with a deadline), then
collects, so queue gauges are computed at scrape time and cost nothing between scrapes.
"""

from __future__ import annotations

import asyncio
import logging
import math
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web
from nats.js import JetStreamContext
from opentelemetry.metrics import CallbackOptions, Meter, NoOpMeter, Observation

from shared import names as n
from shared.names import Names
from shared.provision import consumer_specs

log = logging.getLogger("trawl.metrics")

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
QUEUE_DEADLINE = 2.0  # seconds a scrape waits for the JetStream figures

# Seconds. A fetch is paced in seconds, so the buckets reach a minute (the default timeout).
FETCH_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 20.0, 30.0, 60.0)
# Seconds from "may go now" to dispatched: sub-second when healthy, minutes when overloaded.
LAG_BUCKETS = (0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 15.0, 60.0, 300.0, 900.0, 3600.0)

# A counter's label set, as ((name, value), ...) in a fixed order.
Labels = tuple[tuple[str, str | bool], ...]
# Label sets one counter keeps; the rest are folded into one, as the OpenTelemetry SDK folds
# its instruments' (same limit, same label), so a counter by domain cannot grow without bound.
MAX_LABEL_SETS = 2000
OVERFLOW: Labels = (("otel.metric.overflow", True),)


class Counter:
    """A monotonic count of this service instance, one value per label set."""

    __slots__ = ("description", "name", "unit", "values")

    def __init__(self, name: str, description: str, *, unit: str) -> None:
        self.name = name  # OpenTelemetry style: ``trawl.fetch.results`` → trawl_fetch_results_total
        self.description = description
        self.unit = unit  # an annotation such as ``{message}``, or a unit (``By``)
        self.values: dict[Labels, int] = {}

    def add(self, amount: int = 1, labels: Labels = ()) -> None:
        values = self.values
        if labels not in values and len(values) >= MAX_LABEL_SETS:
            labels = OVERFLOW
        values[labels] = values.get(labels, 0) + amount

    def get(self, labels: Labels = ()) -> int:
        return self.values.get(labels, 0)

    @property
    def total(self) -> int:
        return sum(self.values.values())

    def observe(self, _options: CallbackOptions) -> Iterable[Observation]:
        return [Observation(value, dict(labels)) for labels, value in list(self.values.items())]


class Metrics:
    """One service instance's counters and instruments; it records through these helpers."""

    def __init__(self, meter: Meter, *, enabled: bool = True) -> None:
        self.meter = meter
        self.enabled = enabled  # histograms record only when on; counters always count
        self.counters: dict[str, Counter] = {}
        self._shown: dict[str, Counter] = {}
        # Every service: its consumers, labelled by durable and stream.
        self.handled = self.counter(
            "trawl.messages.handled",
            "Messages acknowledged after their handler succeeded, per consumer of this instance.",
            unit="{message}",
        )
        self.errors = self.counter(
            "trawl.messages.errors",
            "Messages whose handler raised (retried or dead-lettered), per consumer of this "
            "instance.",
            unit="{message}",
        )
        self.dead_lettered = self.counter(
            "trawl.messages.dead_lettered",
            "Messages sent to the DLQ by this consumer, per consumer of this instance.",
            unit="{message}",
        )
        # The fetcher.
        self.fetch_results = self.counter(
            "trawl.fetch.results",
            "Fetch results reported by the fetcher, by outcome and domain.",
            unit="{result}",
        )
        self.fetch_duration = meter.create_histogram(
            "trawl.fetch.duration",
            unit="s",
            description="Duration of the HTTP request of a fetch (redirects included), by outcome.",
            explicit_bucket_boundaries_advisory=FETCH_BUCKETS,
        )
        self.fetch_bytes = self.counter(
            "trawl.fetch.body",
            "Body bytes received (after content decoding), by domain.",
            unit="By",
        )
        # The scheduler.
        self.dispatched = self.counter(
            "trawl.dispatch.entries",
            "Frontier entries released to the fetch queue.",
            unit="{entry}",
        )
        self.dispatch_lag = meter.create_histogram(
            "trawl.dispatch.lag",
            unit="s",
            description="Seconds between an entry being allowed to go and its dispatch.",
            explicit_bucket_boundaries_advisory=LAG_BUCKETS,
        )
        self.settled = self.counter(
            "trawl.admission.robots_disallowed",
            "Links admitted done as robots_disallowed by a robots.txt the fetchers had already "
            "fetched: never dispatched.",
            unit="{entry}",
        )
        self.retries = self.counter(
            "trawl.fetch.retries",
            "Fetches scheduled for a retry, by the outcome that caused it.",
            unit="{retry}",
        )
        self.failed = self.counter(
            "trawl.fetch.failed",
            "Entries given up after their last retry, by the last outcome.",
            unit="{entry}",
        )

    @classmethod
    def disabled(cls) -> Metrics:
        return cls(NoOpMeter("trawl"), enabled=False)

    # -- the registry ------------------------------------------------------------------------
    def counter(
        self, name: str, description: str, *, unit: str, stat: str | None = None
    ) -> Counter:
        """The counter ``name``, made (and exported) on first use; ``stat``: also show its total
        in the service API's stats under that key."""
        counter = self.counters.get(name)
        if counter is None:
            counter = self.counters[name] = Counter(name, description, unit=unit)
            self.meter.create_observable_counter(
                name, callbacks=[counter.observe], unit=unit, description=description
            )
        if stat is not None:
            self.show(stat, counter)
        return counter

    def register(self, counter: Counter, *, stat: str | None = None) -> Counter:
        """Export a counter made elsewhere (a module's own, such as the parser's extractor
        failures), and show it under ``stat``."""
        if self.counters.get(counter.name) is not counter:
            self.counters[counter.name] = counter
            self.meter.create_observable_counter(
                counter.name,
                callbacks=[counter.observe],
                unit=counter.unit,
                description=counter.description,
            )
        if stat is not None:
            self.show(stat, counter)
        return counter

    def show(self, stat: str, counter: Counter) -> None:
        """Show ``counter``'s total in the service API's stats under ``stat``."""
        self._shown[stat] = counter

    def stats(self) -> Mapping[str, int]:
        """The service API's stats: the total of every counter the service shows."""
        return {stat: counter.total for stat, counter in self._shown.items()}

    # -- fetcher -----------------------------------------------------------------------------
    def fetch_result(self, domain: str, outcome: str) -> None:
        self.fetch_results.add(1, (("outcome", outcome), ("domain", domain)))

    def http_request(self, domain: str, outcome: str, seconds: float, size: int) -> None:
        if self.enabled:
            self.fetch_duration.record(seconds, {"outcome": outcome})
        if size:
            self.fetch_bytes.add(size, (("domain", domain),))

    # -- scheduler ---------------------------------------------------------------------------
    def entries_dispatched(self, count: int, lags: Iterable[float] = ()) -> None:
        self.dispatched.add(count)
        if self.enabled:
            for lag in lags:
                self.dispatch_lag.record(max(0.0, lag))

    def robots_settled(self, count: int) -> None:
        if count:
            self.settled.add(count)

    def fetch_applied(self, state: str, outcome: str) -> None:
        """An entry's new state after its fetch result: ``waiting`` = a retry is scheduled."""
        if state == "waiting":
            self.retries.add(1, (("outcome", outcome),))
        elif state == "failed":
            self.failed.add(1, (("outcome", outcome),))


@dataclass
class _Queues:
    """JetStream figures of the last scrape (absent when NATS did not answer in time)."""

    streams: dict[str, int] = field(default_factory=dict)
    consumers: dict[tuple[str, str], tuple[int, int, int]] = field(default_factory=dict)
    dlq: dict[str, int] = field(default_factory=dict)


class MetricsEndpoint:
    """The SDK meter provider of one service and its ``/metrics`` HTTP endpoint."""

    def __init__(
        self,
        service: str,
        instance: str,
        js: JetStreamContext,
        names: Names,
    ) -> None:
        from opentelemetry.sdk.metrics import MeterProvider
        from opentelemetry.sdk.metrics.export import InMemoryMetricReader
        from opentelemetry.sdk.resources import Resource

        self.service = service
        self.js = js
        self.names = names
        self.reader = InMemoryMetricReader()
        resource = Resource.create(
            {
                "service.name": f"trawl-{service}",
                "service.instance.id": instance,
                "trawl.namespace": names.ns,
            }
        )
        self.provider = MeterProvider(metric_readers=[self.reader], resource=resource)
        meter = self.provider.get_meter("trawl")
        self.metrics = Metrics(meter)
        self.specs = [s for s in consumer_specs(names) if s.service == service]
        self.queues = _Queues()
        self._observe(meter)
        self._runner: web.AppRunner | None = None
        self.url: str | None = None

    # -- observable instruments --------------------------------------------------------------
    def _observe(self, meter: Meter) -> None:
        meter.create_observable_gauge(
            "trawl.stream.messages",
            callbacks=[self._streams],
            unit="{message}",
            description="Messages stored in an input stream of this service (queue depth).",
        )
        for index, (name, what) in enumerate(
            (
                ("pending", "not yet delivered to the consumer (its lag)"),
                ("ack_pending", "delivered and not yet acknowledged (in progress)"),
                ("redelivered", "delivered more than once and not yet acknowledged"),
            )
        ):
            meter.create_observable_gauge(
                f"trawl.consumer.{name}",
                callbacks=[self._consumer_gauge(index)],
                unit="{message}",
                description=f"Messages {what}, per durable consumer (all replicas).",
            )
        meter.create_observable_gauge(
            "trawl.dlq.messages",
            callbacks=[self._dlq],
            unit="{message}",
            description="Dead letters in the DLQ, by the stream they came from.",
        )

    def _consumer_gauge(self, index: int) -> Callable[[CallbackOptions], Iterable[Observation]]:
        def callback(_options: CallbackOptions) -> Iterable[Observation]:
            return [
                Observation(values[index], {"consumer": durable, "stream": stream})
                for (stream, durable), values in self.queues.consumers.items()
            ]

        return callback

    def _streams(self, _options: CallbackOptions) -> Iterable[Observation]:
        return [Observation(v, {"stream": k}) for k, v in self.queues.streams.items()]

    def _dlq(self, _options: CallbackOptions) -> Iterable[Observation]:
        return [Observation(v, {"stream": k}) for k, v in self.queues.dlq.items()]

    async def refresh_queues(self) -> None:
        """Read the JetStream figures of this service's inputs (cheap: a few requests)."""
        keys = sorted({s.stream_key for s in self.specs})
        dlq_prefix = self.names.dlq("")

        async def stream(key: str) -> tuple[str, int]:
            info = await self.js.stream_info(self.names.stream(key))
            return key, info.state.messages

        async def consumer(key: str, durable: str) -> tuple[tuple[str, str], tuple[int, ...]]:
            info = await self.js.consumer_info(self.names.stream(key), durable)
            return (key, durable), (
                info.num_pending or 0,
                info.num_ack_pending or 0,
                info.num_redelivered or 0,
            )

        async def dlq() -> dict[str, int]:
            info = await self.js.stream_info(
                self.names.stream(n.DLQ), subjects_filter=self.names.dlq_all
            )
            found = {
                subject.removeprefix(dlq_prefix): count
                for subject, count in (info.state.subjects or {}).items()
            }
            return {key: found.get(key, 0) for key in keys}

        queues = _Queues()
        try:
            async with asyncio.timeout(QUEUE_DEADLINE):
                streams, consumers, dead = await asyncio.gather(
                    asyncio.gather(*(stream(k) for k in keys)),
                    asyncio.gather(
                        *(consumer(s.stream_key, s.durable(self.names)) for s in self.specs)
                    ),
                    dlq(),
                )
        except Exception as exc:  # NATS slow or away: omit the queue series this scrape
            log.warning(
                "queue figures unavailable: %s", exc, extra={"action": "metrics_queues_failed"}
            )
        else:
            queues.streams = dict(streams)
            queues.consumers = dict(consumers)  # type: ignore[arg-type]
            queues.dlq = dead
        self.queues = queues

    # -- exposition --------------------------------------------------------------------------
    async def scrape(self) -> str:
        await self.refresh_queues()
        return render(self.reader.get_metrics_data())

    async def _handle(self, _request: web.Request) -> web.Response:
        body = await self.scrape()
        return web.Response(body=body.encode(), headers={"Content-Type": CONTENT_TYPE})

    async def start(self, listen: str) -> str | None:
        """Serve ``/metrics`` on ``listen`` (``host:port``; port 0 picks a free one).

        Returns the URL, or None when the address is taken (logged: metrics are an operator
        convenience and must not stop the service).
        """
        host, _, port = listen.rpartition(":")
        app = web.Application()
        app.router.add_get("/metrics", self._handle)
        runner = web.AppRunner(app, access_log=None, handle_signals=False)
        await runner.setup()
        # No reuse_port: every replica needs its own address, or scrapes hit a random one.
        site = web.TCPSite(runner, host.strip("[]") or "127.0.0.1", int(port))
        try:
            await site.start()
        except OSError as exc:
            log.error("metrics not served: %s", exc, extra={"action": "metrics_bind_failed"})
            await runner.cleanup()
            return None
        self._runner = runner
        bound_host, bound_port = runner.addresses[0][:2]
        shown = f"[{bound_host}]" if ":" in bound_host else bound_host
        self.url = f"http://{shown}:{bound_port}/metrics"
        log.info("metrics at %s", self.url, extra={"action": "metrics_listening", "url": self.url})
        return self.url

    async def close(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
        self.provider.shutdown()


# -- Prometheus text format ------------------------------------------------------------------
_UNITS = {"s": "seconds", "ms": "milliseconds", "By": "bytes", "1": "ratio"}
_INVALID = re.compile(r"[^a-zA-Z0-9_:]")


def prometheus_name(name: str, unit: str, *, counter: bool) -> str:
    """OpenTelemetry → Prometheus naming: ``trawl.fetch.duration`` + ``s`` →
    ``trawl_fetch_duration_seconds``; monotonic sums end in ``_total``."""
    out = _INVALID.sub("_", name)
    suffix = _UNITS.get(unit, "")  # annotations such as ``{message}`` are dropped
    if suffix and not out.endswith(f"_{suffix}"):
        out += f"_{suffix}"
    if counter:
        out += "_total"
    return out


def _escape(value: object) -> str:
    if isinstance(value, bool):
        value = "true" if value else "false"
    return str(value).replace("\\", r"\\").replace("\n", r"\n").replace('"', r"\"")


def _labels(attributes: Any, extra: tuple[tuple[str, str], ...] = ()) -> str:
    pairs = [(_INVALID.sub("_", str(k)), v) for k, v in (attributes or {}).items()]
    pairs.extend(extra)
    if not pairs:
        return ""
    return "{" + ",".join(f'{k}="{_escape(v)}"' for k, v in pairs) + "}"


def _number(value: float) -> str:
    if isinstance(value, int):
        return str(value)
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    if math.isnan(value):
        return "NaN"
    return repr(float(value))


def render(data: Any) -> str:
    """``MetricsData`` from an SDK reader as Prometheus text (exposition format 0.0.4)."""
    from opentelemetry.sdk.metrics.export import Gauge, Histogram, Sum

    lines: list[str] = []
    resources = data.resource_metrics if data is not None else []
    for resource_metrics in resources:
        attrs = dict(resource_metrics.resource.attributes)
        lines += [
            "# HELP target_info Attributes of this service instance.",
            "# TYPE target_info gauge",
            f"target_info{_labels(attrs)} 1",
        ]
        for scope in resource_metrics.scope_metrics:
            for metric in scope.metrics:
                point_data = metric.data
                if isinstance(point_data, Sum):
                    counter = point_data.is_monotonic
                    kind = "counter" if counter else "gauge"
                elif isinstance(point_data, Gauge):
                    counter, kind = False, "gauge"
                elif isinstance(point_data, Histogram):
                    counter, kind = False, "histogram"
                else:
                    continue  # exponential histograms: not used by trawl
                name = prometheus_name(metric.name, metric.unit, counter=counter)
                lines.append(f"# HELP {name} {_escape(metric.description)}")
                lines.append(f"# TYPE {name} {kind}")
                for point in point_data.data_points:
                    if kind != "histogram":
                        lines.append(f"{name}{_labels(point.attributes)} {_number(point.value)}")
                        continue
                    cumulative = 0
                    bounds = [*point.explicit_bounds, math.inf]
                    for bound, count in zip(bounds, point.bucket_counts, strict=True):
                        cumulative += count
                        le = (("le", _number(float(bound))),)
                        lines.append(f"{name}_bucket{_labels(point.attributes, le)} {cumulative}")
                    lines.append(f"{name}_sum{_labels(point.attributes)} {_number(point.sum)}")
                    lines.append(f"{name}_count{_labels(point.attributes)} {point.count}")
    return "\n".join(lines) + "\n"
