"""Tracing: the four services as processes export OTLP/HTTP to a receiver in this test; one
product page's spans from all of them share one trace id with correct parent links."""

from __future__ import annotations

import gzip
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

import pytest
from aiohttp import web
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

from control.client import TrawlClient
from demo.shop import DemoShop
from services.scheduler.catalog import save_source
from shared.sources import source_from_dict
from tests.conftest import free_port
from tests.support.stack import Stack, eventually

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(150)]


@dataclass(frozen=True)
class Span:
    service: str
    name: str
    trace_id: str
    span_id: str
    parent_id: str
    kind: int
    attrs: dict[str, str]


class Receiver:
    """A minimal OTLP/HTTP trace endpoint keeping every span it is sent."""

    def __init__(self) -> None:
        self.spans: list[Span] = []
        self.port = free_port()

    async def handle(self, request: web.Request) -> web.Response:
        body = await request.read()
        if request.headers.get("Content-Encoding") == "gzip":
            body = gzip.decompress(body)
        export = ExportTraceServiceRequest.FromString(body)
        for rs in export.resource_spans:
            res = {a.key: a.value.string_value for a in rs.resource.attributes}
            for ss in rs.scope_spans:
                for s in ss.spans:
                    self.spans.append(
                        Span(
                            service=res.get("service.name", "?").removeprefix("trawl-"),
                            name=s.name,
                            trace_id=s.trace_id.hex(),
                            span_id=s.span_id.hex(),
                            parent_id=s.parent_span_id.hex(),
                            kind=s.kind,
                            attrs={a.key: _value(a.value) for a in s.attributes},
                        )
                    )
        return web.Response(
            body=ExportTraceServiceResponse().SerializeToString(),
            content_type="application/x-protobuf",
        )

    async def __aenter__(self) -> Receiver:
        app = web.Application()
        app.router.add_post("/v1/traces", self.handle)
        self.runner = web.AppRunner(app, access_log=None)
        await self.runner.setup()
        await web.TCPSite(self.runner, "127.0.0.1", self.port).start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.runner.cleanup()

    def trace(self, trace_id: str) -> list[Span]:
        return [s for s in self.spans if s.trace_id == trace_id]


def _value(v) -> str:
    kind = v.WhichOneof("value")
    return str(getattr(v, kind)) if kind else ""


async def test_one_page_one_trace_across_all_services(env, settings, pool, tmp_path: Path) -> None:
    async with (
        Receiver() as receiver,
        DemoShop(hosts=("127.0.0.2", "127.0.0.3"), port=0, products=6) as shop,
    ):
        env = {
            **env,
            "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{receiver.port}",
            "OTEL_BSP_SCHEDULE_DELAY": "100",
        }
        async with pool.acquire() as conn:
            await save_source(conn, source_from_dict(shop.source_definition("demo-shop")))
        async with Stack(env, tmp_path / "logs") as stack, TrawlClient(settings) as client:
            reply = await client.trigger("demo-shop")
            summary = await client.wait(reply.job_id, timeout=90)
            assert summary["status"] == "completed", stack.logs()
            product_url = (await client.products("demo-shop"))[0]["url"]
            ns = settings.namespace

            def fetch_span() -> Span | None:
                return next(
                    (
                        s
                        for s in receiver.spans
                        if s.service == "fetcher"
                        and s.name == f"{ns}.fetch process"
                        and s.attrs.get("url.full") == product_url
                    ),
                    None,
                )

            def services_of_page() -> set[str]:
                span = fetch_span()
                return {s.service for s in receiver.trace(span.trace_id)} if span else set()

            async def complete() -> bool:
                return services_of_page() >= {"scheduler", "fetcher", "parser", "refresher"}

            await eventually(complete, timeout=20, what=f"spans of {product_url} from 4 services")

    fetch = fetch_span()
    assert fetch is not None
    spans = receiver.trace(fetch.trace_id)
    by_id = {s.span_id: s for s in spans}
    children = defaultdict(list)
    for s in spans:
        children[s.parent_id].append(s)

    # A single tree: one root, every other span's parent is in the same trace.
    roots = [s for s in spans if not s.parent_id]
    assert len(roots) == 1, roots
    orphans = [s for s in spans if s.parent_id and s.parent_id not in by_id]
    assert not orphans, orphans

    def parent(s: Span) -> Span:
        return by_id[s.parent_id]

    # scheduler dispatch → fetcher
    assert parent(fetch).service == "scheduler" and parent(fetch).name == f"{ns}.fetch publish"
    # fetcher → parser and scheduler (the fetch result)
    fetched = [s for s in spans if s.name == f"{ns}.fetched process"]
    assert {s.service for s in fetched} == {"parser", "scheduler"}
    for s in fetched:
        assert parent(s).service == "fetcher" and parent(s).name == f"{ns}.fetched publish"
        assert parent(parent(s)).span_id == fetch.span_id
    parse = next(s for s in fetched if s.service == "parser")
    assert parse.attrs.get("url.full") == product_url
    # parser → refresher and scheduler (the parse result)
    parsed = [s for s in spans if s.name == f"{ns}.parsed process"]
    assert {s.service for s in parsed} == {"refresher", "scheduler"}
    for s in parsed:
        assert parent(s).service == "parser" and parent(parent(s)).span_id == parse.span_id
    for s in (fetch, *fetched, *parsed):
        assert s.kind == 5  # SPAN_KIND_CONSUMER


async def test_seed_page_trace_starts_at_the_trigger(env, settings, pool, tmp_path: Path) -> None:
    async with (
        Receiver() as receiver,
        DemoShop(hosts=("127.0.0.2", "127.0.0.3"), port=0, products=2) as shop,
    ):
        env = {
            **env,
            "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{receiver.port}",
            "OTEL_BSP_SCHEDULE_DELAY": "100",
        }
        definition = shop.source_definition("demo-shop")
        async with pool.acquire() as conn:
            await save_source(conn, source_from_dict(definition))
        async with Stack(env, tmp_path / "logs"), TrawlClient(settings) as client:
            reply = await client.trigger("demo-shop")
            assert (await client.wait(reply.job_id, timeout=60))["status"] == "completed"
            ns, seed = settings.namespace, definition["seeds"][0]

            async def seen() -> bool:
                return any(s.attrs.get("url.full") == seed for s in receiver.spans)

            await eventually(seen, timeout=10, what="the seed's fetch span")
            fetch = next(
                s
                for s in receiver.spans
                if s.name == f"{ns}.fetch process" and s.attrs.get("url.full") == seed
            )
            names = {s.name for s in receiver.trace(fetch.trace_id)}
    assert f"{ns}.trigger process" in names, names
