"""Prometheus ``/metrics``: off by default, and when on, the series exist and move.

The in-process test drives one real ``Consumer`` against real NATS and watches the queue gauges,
the consumer counters and the DLQ size change. The process test crawls the demo shop with the
four services as processes, each serving ``/metrics`` on a free port that it advertises in the
NATS service API, and scrapes every one of them.
"""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

import aiohttp
import pytest

from control.client import TrawlClient
from demo.shop import DemoShop
from schemas.messages import Attempt, FetchWork
from services.scheduler.catalog import save_source
from shared.bus import connect, publish
from shared.channels import FETCH_WORK
from shared.consumer import Consumer, Delivery
from shared.errors import ConfigError
from shared.metrics import Metrics, MetricsEndpoint, prometheus_name
from shared.names import Names
from shared.provision import consumer_specs, provision
from shared.settings import Settings
from shared.sources import source_from_dict
from tests.support.stack import Stack, eventually

NATS_URL = "nats://127.0.0.1:4222"
_SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})? (\S+)$")
_LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')

# Services whose consumers count in ``rt.metrics`` (every one that takes them from the runtime).
REGISTERS_CONSUMERS = ("scheduler", "fetcher", "parser", "refresher")


def parse(text: str) -> dict[str, list[tuple[dict[str, str], float]]]:
    """Prometheus text → {metric name: [(labels, value)]}; checks every line's syntax."""
    out: dict[str, list[tuple[dict[str, str], float]]] = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            assert line == "" or line.startswith(("# HELP ", "# TYPE ")), line
            continue
        match = _SAMPLE.match(line)
        assert match, f"not a sample line: {line!r}"
        name, _, labels, raw = match.groups()
        out.setdefault(name, []).append((dict(_LABEL.findall(labels or "")), float(raw)))
    return out


def value(series: dict, name: str, **labels: str) -> float:
    """Sum of the samples of ``name`` whose labels include ``labels``."""
    return sum(
        v for lab, v in series.get(name, []) if all(lab.get(k) == x for k, x in labels.items())
    )


async def scrape(url: str) -> dict[str, list[tuple[dict[str, str], float]]]:
    async with aiohttp.ClientSession() as http, http.get(url) as resp:
        assert resp.status == 200
        assert resp.headers["Content-Type"].startswith("text/plain; version=0.0.4")
        return parse(await resp.text())


# -- off by default ----------------------------------------------------------------------------


def test_metrics_are_off_by_default_and_cost_nothing() -> None:
    assert Settings.from_env({}).metrics_listen == ""
    assert Settings.from_env({"TRAWL_METRICS_LISTEN": "0.0.0.0:9464"}).metrics_listen
    with pytest.raises(ConfigError, match="TRAWL_METRICS_LISTEN"):
        Settings.from_env({"TRAWL_METRICS_LISTEN": "9464"})
    off = Metrics.disabled()
    assert not off.enabled
    off.fetch_result("example.com", "ok")  # no-op instruments: nothing recorded, nothing raised
    off.http_request("example.com", "ok", 0.1, 100)
    off.entries_dispatched(3, [0.1])
    off.fetch_applied("waiting", "timeout")


def test_names_follow_the_prometheus_conventions() -> None:
    assert prometheus_name("trawl.fetch.duration", "s", counter=False) == (
        "trawl_fetch_duration_seconds"
    )
    assert prometheus_name("trawl.fetch.body", "By", counter=True) == "trawl_fetch_body_bytes_total"
    assert prometheus_name("trawl.messages.handled", "{message}", counter=True) == (
        "trawl_messages_handled_total"
    )


# -- in process: consumer counters, queue depth, lag, DLQ ---------------------------------------


async def test_endpoint_reports_consumers_queues_and_dlq(namespace: str) -> None:
    nc = await connect(NATS_URL, name="test-metrics")
    js = nc.jetstream()
    names = Names(namespace)
    await provision(js, names, max_deliver=2)
    stop = asyncio.Event()
    handled = asyncio.Event()

    async def handler(d: Delivery[FetchWork]) -> None:
        if d.body.attempt.id == "2.1":
            handled.set()

    endpoint = MetricsEndpoint("fetcher", "test-1", js, names)
    consumer = Consumer(
        nc,
        js,
        names,
        FETCH_WORK,
        "fetcher",
        handler,
        stop=stop,
        max_deliver=2,
        metrics=endpoint.metrics,
    )
    url = await endpoint.start("127.0.0.1:0")
    assert url is not None
    try:
        for i in (1, 2):
            work = FetchWork(
                attempt=Attempt(job_id=1, entry_id=i, source="s", url="http://a/"), domain="a"
            )
            await publish(js, names.fetch, work)
        await js.publish(names.fetch, b"{not json")  # malformed: dead-lettered at once

        before = await scrape(url)
        assert value(before, "trawl_stream_messages", stream="fetch") == 3
        assert value(before, "trawl_consumer_pending", consumer="fetcher-fetch") == 3
        assert value(before, "trawl_dlq_messages", stream="fetch") == 0
        assert value(before, "trawl_messages_handled_total", consumer="fetcher-fetch") == 0
        assert "target_info" in before

        task = asyncio.create_task(consumer.run(), name="consumer")
        await asyncio.wait_for(handled.wait(), 10)

        async def moved() -> bool:
            after = await scrape(url)
            return (
                value(after, "trawl_messages_handled_total", consumer="fetcher-fetch") == 2
                and value(after, "trawl_messages_dead_lettered_total", stream="fetch") == 1
                and value(after, "trawl_dlq_messages", stream="fetch") == 1
                and value(after, "trawl_stream_messages", stream="fetch") == 0
                and value(after, "trawl_consumer_pending", consumer="fetcher-fetch") == 0
            )

        await eventually(moved, timeout=10, what="consumer and queue series to move")
        stop.set()
        await asyncio.wait_for(task, 10)
    finally:
        stop.set()
        await endpoint.close()
        await nc.close()


# -- processes: a crawl of the demo shop moves every service's series ---------------------------


@pytest.mark.e2e
@pytest.mark.timeout(180)
async def test_services_serve_metrics_during_a_crawl(
    env: dict[str, str], settings: Settings, pool, tmp_path: Path
) -> None:
    env = {**env, "TRAWL_METRICS_LISTEN": "127.0.0.1:0"}  # each replica picks a free port
    async with DemoShop(hosts=("127.0.0.2", "127.0.0.3"), port=0, products=16) as shop:
        definition = shop.source_definition("demo-shop")
        async with pool.acquire() as conn:
            await save_source(conn, source_from_dict(definition))
        async with Stack(env, tmp_path / "logs") as stack, TrawlClient(settings) as client:
            urls: dict[str, str] = {}
            for info in await client.workers():
                service = info["name"].removeprefix(f"{settings.namespace}-")
                urls[service] = info["metadata"]["metrics"]
            assert set(urls) == {
                "scheduler",
                "fetcher",
                "parser",
                "refresher",
                "notifier",
                "api",
            }, stack.logs()

            reply = await client.trigger("demo-shop")
            assert reply.error is None, reply.error
            summary = await client.wait(reply.job_id, timeout=120)
            assert summary["status"] == "completed", stack.logs()
            job = await client.job(reply.job_id)
            scraped = {service: await scrape(url) for service, url in urls.items()}

    counters = job["counters"]
    fetcher = scraped["fetcher"]
    domains = {lab["domain"] for lab, _ in fetcher["trawl_fetch_results_total"]}
    assert domains == set(definition["allowed_domains"])
    # Every attempt the scheduler recorded was one fetch result, outcome for outcome, except
    # the links a known robots.txt settled at admission (never dispatched).
    scheduler = scraped["scheduler"]
    settled = value(scheduler, "trawl_admission_robots_disallowed_total")
    for outcome in ("ok", "gone", "robots_disallowed"):
        extra = settled if outcome == "robots_disallowed" else 0
        assert value(fetcher, "trawl_fetch_results_total", outcome=outcome) + extra == (
            counters.get(f"outcome_{outcome}", 0)
        ), outcome
    assert value(fetcher, "trawl_fetch_results_total", outcome="ok") > 0
    assert value(fetcher, "trawl_fetch_duration_seconds_count", outcome="ok") == value(
        fetcher, "trawl_fetch_results_total", outcome="ok"
    )
    assert value(fetcher, "trawl_fetch_duration_seconds_sum") > 0
    assert value(fetcher, "trawl_fetch_body_bytes_total") > 0
    assert value(fetcher, "trawl_messages_handled_total", consumer="fetcher-fetch") == value(
        fetcher, "trawl_fetch_results_total"
    )
    assert value(fetcher, "trawl_messages_dead_lettered_total") == 0
    # The scheduler dispatched every other entry once; its lag histogram saw each of them.
    assert value(scheduler, "trawl_dispatch_entries_total") == counters["total"] - settled
    assert value(scheduler, "trawl_dispatch_lag_seconds_count") == counters["total"] - settled

    # Queue series of each service's inputs, computed at scrape time: all drained now.
    inputs = {
        "scheduler": ("trigger", "fetched", "parsed"),
        "fetcher": ("fetch",),
        "parser": ("fetched",),
        "refresher": ("events", "parsed"),
    }
    for service, streams in inputs.items():
        series = scraped[service]
        got = {lab["stream"] for lab, _ in series["trawl_stream_messages"]}
        assert got == set(streams), service
        assert {lab["stream"] for lab, _ in series["trawl_dlq_messages"]} == set(streams)
        assert value(series, "trawl_dlq_messages") == 0, service
        names = Names(settings.namespace)
        durables = {s.durable(names) for s in consumer_specs(names) if s.service == service}
        assert {lab["consumer"] for lab, _ in series["trawl_consumer_pending"]} == durables
        assert value(series, "trawl_consumer_pending") == 0, service
        if service in REGISTERS_CONSUMERS:
            assert value(series, "trawl_messages_handled_total") > 0, service


def test_rendering_escapes_labels_and_folds_overflow() -> None:
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader

    from shared.metrics import render

    reader = InMemoryMetricReader()
    provider = MeterProvider(metric_readers=[reader])
    metrics = Metrics(provider.get_meter("t"))
    metrics.fetch_result('we"ird\\host\n', "ok")
    for i in range(2100):  # past the SDK's 2,000 label sets per instrument
        metrics.fetch_result(f"d{i}.example", "ok")
    series = parse(render(reader.get_metrics_data()))
    provider.shutdown()
    labels = [lab for lab, _ in series["trawl_fetch_results_total"]]
    assert {"outcome": "ok", "domain": r"we\"ird\\host\n"} in labels
    assert value(series, "trawl_fetch_results_total", otel_metric_overflow="true") > 0
    assert value(series, "trawl_fetch_results_total") == 2101


def test_one_count_feeds_the_stats_and_prometheus() -> None:
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader

    from shared.metrics import render

    reader = InMemoryMetricReader()
    provider = MeterProvider(metric_readers=[reader])
    metrics = Metrics(provider.get_meter("t"))
    pages = metrics.counter("trawl.parser.pages", "Pages parsed.", unit="{page}", stat="parsed")
    assert metrics.counter("trawl.parser.pages", "again", unit="{page}") is pages  # one count
    metrics.show("dispatched", metrics.dispatched)
    assert metrics.stats() == {"parsed": 0, "dispatched": 0}  # shown from the start
    pages.add(2)
    metrics.entries_dispatched(3, [0.5])
    assert metrics.stats() == {"parsed": 2, "dispatched": 3}
    series = parse(render(reader.get_metrics_data()))
    provider.shutdown()
    assert value(series, "trawl_parser_pages_total") == 2
    assert value(series, "trawl_dispatch_entries_total") == 3
    off = Metrics.disabled()  # metrics off: the stats still count
    off.fetch_result("a.example", "ok")
    assert off.fetch_results.total == 1
