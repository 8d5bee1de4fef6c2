"""Provisioning, the consumer's message-fate policy and the payload store, on the real NATS."""

from __future__ import annotations

import asyncio
import os
from types import SimpleNamespace
from typing import Any, cast

import msgspec
import nats.js.errors
import pytest

from schemas.messages import Attempt, FetchResult, ParseResult, Product, Trigger
from services.parser.service import Parser
from shared import names as n
from shared.bus import Unpublishable, encode, publish, send
from shared.channels import FETCH_RESULTS, PARSE_RESULTS, TRIGGERS
from shared.consumer import BatchConsumer, Consumer, Delivery
from shared.errors import Poison
from shared.metrics import Metrics
from shared.names import Names
from shared.payloads import JetStreamPayloadStore, PayloadNotFound
from shared.provision import consumer_specs, provision
from shared.telemetry import producer_span
from tests.support.stack import eventually
from tests.support.streams import dead_letters


async def test_provisioning_is_idempotent_and_applies_changed_consumer_config(nc, namespace):
    js = nc.jetstream()
    names = Names(namespace)
    await provision(js, names, max_deliver=5)
    before = {s.name: (await js.stream_info(s.name)).config for s in []}
    await provision(js, names, max_deliver=5)  # twice: no error, nothing changes
    spec = next(s for s in consumer_specs(names) if s.service == "parser")
    info = await js.consumer_info(names.stream(spec.stream_key), spec.durable(names))
    assert info.config.max_deliver == 6
    assert info.config.filter_subject == names.fetched
    await provision(js, names, max_deliver=9)
    info = await js.consumer_info(names.stream(spec.stream_key), spec.durable(names))
    assert info.config.max_deliver == 10
    assert before == {}


async def test_malformed_poison_and_failing_messages_end_in_the_dlq(nc, namespace):
    js = nc.jetstream()
    names = Names(namespace)
    await provision(js, names, max_deliver=3)
    handled: list[str] = []

    async def handler(d: Delivery[Trigger]) -> None:
        if d.body.source == "poison":
            raise Poison("source 'poison' can never work")
        if d.body.source == "boom":
            raise RuntimeError("always fails")
        handled.append(d.body.source)

    stop = asyncio.Event()
    consumer = Consumer(nc, js, names, TRIGGERS, "scheduler", handler, stop=stop, max_deliver=3)
    # The trigger stream does not ack (see provisioning), so publish with core NATS.
    for body in (
        b"{not json",
        encode(Trigger(source="poison")),
        encode(Trigger(source="boom")),
        encode(Trigger(source="fine")),
    ):
        await nc.publish(names.trigger, body, headers={"X-Origin": "test"})
    await nc.flush()
    task = asyncio.create_task(consumer.run())

    async def context() -> str:
        info = await js.consumer_info(consumer.stream, consumer.durable)
        return (
            f"handled={handled} errors={consumer.errors} dead={consumer.dead_lettered} "
            f"ack_pending={info.num_ack_pending} redelivered={info.num_redelivered} "
            f"pending={info.num_pending}"
        )

    try:
        letters = await dead_letters(js, names, 3, context=context)
    finally:
        stop.set()
        await task
    reasons = sorted(letter.reason for letter, _ in letters)
    assert any(r.startswith("malformed message") for r in reasons)
    assert any("can never work" in r for r in reasons)
    assert any(r.startswith("gave up after 3 deliveries") and "always fails" in r for r in reasons)
    assert handled == ["fine"]
    for letter, headers in letters:
        assert letter.headers.get("X-Origin") == "test"  # the original headers are kept
        assert headers[n.DLQ_REASON]


async def test_payload_store_round_trip_dedup_and_large_bodies(nc, namespace):
    js = nc.jetstream()
    names = Names(namespace)
    await provision(js, names)
    store = JetStreamPayloadStore(js, names)
    page = b"<html>" + b"<p>same body</p>" * 2000 + b"</html>"
    a = await store.put(page)
    b = await store.put(page)
    assert a.ref == b.ref and a.ref.startswith("js:")
    assert a.stored_size < a.size
    info = await js.stream_info(names.payload_stream)
    assert info.state.messages == 1  # identical bodies are stored once
    big = os.urandom(1_500_000)
    stored = await store.put(big)
    assert stored.ref.startswith("obj:")
    assert await store.get(a.ref) == page
    assert await store.get(stored.ref) == big
    with pytest.raises(PayloadNotFound):
        await store.get("js:" + "0" * 64)
    assert issubclass(PayloadNotFound, Exception)
    assert nats.js.errors.NotFoundError


async def test_batch_mode_acks_a_batch_and_isolates_the_culprit(nc, namespace):
    js = nc.jetstream()
    names = Names(namespace)
    await provision(js, names, max_deliver=2)
    spec = next(s for s in consumer_specs(names) if s.stream_key == n.TRIGGER)
    batches: list[list[str]] = []

    async def many(ds: list[Delivery[Trigger]]) -> None:
        sources = [d.body.source for d in ds]
        if "bad" in sources:
            raise RuntimeError("a bad row in the batch")
        batches.append(sources)

    stop = asyncio.Event()
    consumer = BatchConsumer(
        nc, js, names, TRIGGERS, "scheduler", many, stop=stop, max_deliver=2, batch=50
    )
    for body in [encode(Trigger(source=f"s{i}")) for i in range(10)] + [b"not json"]:
        await nc.publish(names.trigger, body)
    await nc.publish(names.trigger, encode(Trigger(source="bad")))
    await nc.flush()
    task = asyncio.create_task(consumer.run())
    try:
        letters = await dead_letters(js, names, 2)
    finally:
        stop.set()
        await task
    reasons = sorted(letter.reason for letter, _ in letters)
    assert reasons[0].startswith("gave up after 2 deliveries") and "bad row" in reasons[0]
    assert reasons[1].startswith("malformed message")
    handled = [s for b in batches for s in b]
    assert sorted(set(handled)) == sorted(f"s{i}" for i in range(10))
    info = await js.consumer_info(names.stream(n.TRIGGER), spec.durable(names))
    assert info.num_ack_pending == 0 and info.num_pending == 0


# What broke the consumers before (issue 17, defects 1 and 2): exceptions msgspec raises beyond
# its own, a body whose letter would exceed the max payload, and a transport header that made
# the DLQ refuse the letter. Each is a (body, headers) pair on the trigger subject.
def _hostile_bodies(names: Names) -> dict[str, tuple[bytes, dict[str, str] | None]]:
    return {
        "deep nesting": (b'{"source": "a", "x": ' + b"[" * 20_000, None),
        "invalid UTF-8 in a string": (b'{"source": "caf\xff\xfe"}', None),
        "oversize body": (b'{"source": "' + b"\x01" * 900_000 + b'", "x": [}', None),
        "transport header": (
            b"{not json",
            {"Nats-Expected-Stream": names.stream(n.TRIGGER), "Nats-Msg-Id": "m-1"},
        ),
    }


@pytest.mark.parametrize("batch", [False, True], ids=["consumer", "batch"])
async def test_whatever_the_decoder_raises_is_dead_lettered_and_the_letter_fits(
    nc, namespace, batch
):
    js = nc.jetstream()
    names = Names(namespace)
    await provision(js, names, max_deliver=2)
    handled: list[str] = []

    async def one(d: Delivery[Trigger]) -> None:
        handled.append(d.body.source)

    async def many(ds: list[Delivery[Trigger]]) -> None:
        handled.extend(d.body.source for d in ds)

    stop = asyncio.Event()
    consumer: Consumer[Trigger] | BatchConsumer[Trigger] = (
        BatchConsumer(nc, js, names, TRIGGERS, "scheduler", many, stop=stop, batch=50)
        if batch
        else Consumer(nc, js, names, TRIGGERS, "scheduler", one, stop=stop)
    )
    hostile = _hostile_bodies(names)
    # Good messages around the bad ones: a batch must not lose them.
    await nc.publish(names.trigger, encode(Trigger(source="before")))
    for body, headers in hostile.values():
        await nc.publish(names.trigger, body, headers={"X-Origin": "test", **(headers or {})})
    await nc.publish(names.trigger, encode(Trigger(source="after")))
    await nc.flush()
    task = asyncio.create_task(consumer.run())
    try:
        letters = await dead_letters(js, names, len(hostile))
    finally:
        stop.set()
        await task
    assert sorted(handled) == ["after", "before"]
    assert len(letters) == len(hostile)
    reasons = [letter.reason for letter, _ in letters]
    assert all(r.startswith("malformed message") for r in reasons), reasons
    assert any("RecursionError" in r for r in reasons), reasons
    assert any("UnicodeDecodeError" in r for r in reasons), reasons
    # Published 1 (good), 2..5 (hostile, in order), 6 (good): each letter names its original.
    sizes = {i: len(body) for i, (body, _) in enumerate(hostile.values(), start=2)}
    assert {letter.stream_seq: letter.size for letter, _ in letters} == sizes
    for letter, headers in letters:
        assert letter.headers.get("X-Origin") == "test"
        assert not any(k.lower().startswith("nats-") for k in letter.headers), letter.headers
        assert headers[n.DLQ_REASON]
    big = next(letter for letter, _ in letters if letter.size > 800_000)
    assert big.truncated and len(big.data) < big.size
    small = [letter for letter, _ in letters if letter is not big]
    assert not any(letter.truncated for letter in small)
    info = await js.consumer_info(consumer.stream, consumer.durable)
    assert info.num_ack_pending == 0 and info.num_pending == 0


async def test_a_message_no_retry_can_publish_raises_unpublishable(nc, namespace):
    js = nc.jetstream()
    names = Names(namespace)
    await provision(js, names)
    attempt = Attempt(entry_id=1, job_id=1, source="s", url="http://127.0.0.2/p")
    huge = ParseResult(attempt=attempt, product=Product(key="K", name="N" * 2_000_000))
    surrogate = ParseResult(attempt=attempt, product=Product(key="K", name="\ud800"))
    for message in (huge, surrogate):
        with pytest.raises(Unpublishable):
            await send(js, names, PARSE_RESULTS, message)


async def test_a_publish_waits_out_a_stream_that_has_no_leader_yet(nc, namespace):
    """What a cluster answers while a stream elects a new leader (a node was lost) is what it
    answers when no stream is there: no responders. A publish in that moment is retried."""
    js = nc.jetstream()
    subject = f"{namespace}.electing"
    sent_before = nc.stats["out_msgs"]
    publishing = asyncio.create_task(publish(js, subject, b"x", msg_id="one"))

    async def tried() -> bool:
        return nc.stats["out_msgs"] > sent_before or publishing.done()

    await eventually(tried, timeout=10, what="the first attempt")
    await js.add_stream(name=f"{namespace}-electing", subjects=[subject])
    try:
        await publishing  # without the retry: NoStreamResponseError
        assert (await js.stream_info(f"{namespace}-electing")).state.messages == 1
    finally:
        await js.delete_stream(f"{namespace}-electing")


async def test_the_parser_publishes_what_it_can_and_a_failure_when_nothing_fits(nc, namespace):
    """Scrubbed when that is enough; else a failed result with the reason (the entry must end)."""
    js = nc.jetstream()
    names = Names(namespace)
    await provision(js, names)
    parser = Parser(cast(Any, SimpleNamespace(js=js, names=names, metrics=Metrics.disabled())))
    sub = await js.pull_subscribe(
        names.parsed, durable=names.consumer("scheduler", n.PARSED), stream=names.stream(n.PARSED)
    )

    async def published() -> ParseResult:
        (msg,) = await sub.fetch(1, timeout=10)
        await msg.ack()
        return msgspec.json.decode(msg.data, type=ParseResult)

    def attempt(entry_id: int) -> Attempt:
        return Attempt(entry_id=entry_id, job_id=1, source="s", url="http://127.0.0.2/p")

    bad_name = Product(key="K", name="Saw \ud800 blade", brand="B" * 2_000_000)
    await parser.publish(ParseResult(attempt=attempt(1), product=bad_name))
    scrubbed = await published()
    assert scrubbed.product is not None and scrubbed.product.name == "Saw ? blade"
    assert not scrubbed.failed

    # Too much even scrubbed: 600 products, cut to 500 of 2 KB each, still over 1 MB.
    many = [
        Product(key=f"K{i}", name="x" * 2000, attributes={"a" * 10: "v" * 20_000})
        for i in range(600)
    ]
    await parser.publish(ParseResult(attempt=attempt(2), products=many))
    failed = await published()
    assert failed.failed and failed.products == [] and failed.attempt == attempt(2)
    assert failed.error is not None and failed.error.startswith("result not publishable")


async def test_without_an_exporter_a_stored_trace_still_travels_with_what_is_published(
    nc, namespace
):
    """No tracer provider here (as in a service without OTEL_* settings): publish skips its
    span, but the trace a producer span continues still reaches the next service."""
    js = nc.jetstream()
    names = Names(namespace)
    await provision(js, names)
    trace_id = "0af7651916cd43dd8448eb211c80319c"
    traceparent = f"00-{trace_id}-b7ad6b7169203331-01"
    result = ParseResult(attempt=Attempt(entry_id=1, job_id=1, source="s", url="http://a/"))
    with producer_span(names.parsed, traceparent, as_parent=True):
        await send(js, names, PARSE_RESULTS, result, msg_id="traced")
    await send(js, names, PARSE_RESULTS, result, msg_id="untraced")
    stream = names.stream(PARSE_RESULTS.stream)
    traced = await js.get_msg(stream, seq=1)
    untraced = await js.get_msg(stream, seq=2)
    assert traced.headers and trace_id in traced.headers["traceparent"]
    assert traced.headers[n.MSG_ID] == "traced"
    assert untraced.headers and "traceparent" not in untraced.headers


def _product_page(sku: str) -> bytes:
    return (
        '<html><head><script type="application/ld+json">{"@type": "Product", "name": "Anvil",'
        f' "sku": "{sku}", "offers": {{"price": "49.90", "priceCurrency": "EUR"}}}}</script>'
        f'</head><body><h1>Anvil</h1><a href="/p/{sku}-spare">Spare</a></body></html>'
    ).encode()


async def test_the_parser_handles_a_pulled_group_page_by_page(nc, namespace, caplog):
    """A group of fetch results: every page is parsed and its own result published, a page
    whose payload is gone gets a result that says so, an outcome with nothing to parse gets
    none, and the whole group is acked."""
    js = nc.jetstream()
    names = Names(namespace)
    await provision(js, names)
    kv = await js.key_value(names.sources_bucket)
    await kv.put("job.7", msgspec.json.encode({"name": "shop", "seeds": ["http://127.0.0.2/"]}))
    rt = SimpleNamespace(js=js, names=names, metrics=Metrics.disabled())
    parser = Parser(cast(Any, rt))
    store = JetStreamPayloadStore(js, names)

    def attempt(entry_id: int) -> Attempt:
        return Attempt(
            entry_id=entry_id, job_id=7, source="shop", url=f"http://127.0.0.2/p/{entry_id}"
        )

    fetched = [
        FetchResult(
            attempt=attempt(i),
            outcome="ok",
            status=200,
            content_type="text/html",
            payload_ref=(await store.put(_product_page(f"SKU-{i}"))).ref,
        )
        for i in range(1, 6)
    ]
    fetched.append(FetchResult(attempt=attempt(6), outcome="ok", payload_ref="js:" + "0" * 64))
    fetched.append(FetchResult(attempt=attempt(7), outcome="gone", status=404))
    for result in fetched:
        await send(js, names, FETCH_RESULTS, result)
    results = await js.pull_subscribe(
        names.parsed, durable=names.consumer("scheduler", n.PARSED), stream=names.stream(n.PARSED)
    )
    stop = asyncio.Event()
    consumer = BatchConsumer(
        nc, js, names, FETCH_RESULTS, "parser", parser.on_fetched_group, stop=stop, batch=32
    )
    task = asyncio.create_task(consumer.run())
    try:
        msgs = await results.fetch(6, timeout=10)
        while len(msgs) < 6:
            msgs += await results.fetch(6 - len(msgs), timeout=10)
    finally:
        stop.set()
        await task
    parsed = {
        r.attempt.entry_id: r for r in (msgspec.json.decode(m.data, type=ParseResult) for m in msgs)
    }
    assert sorted(parsed) == [1, 2, 3, 4, 5, 6]  # "gone" has nothing to parse
    for i in range(1, 6):
        product = parsed[i].product
        assert product is not None and product.sku == f"SKU-{i}" and product.price == "49.90"
        assert [link.url for link in parsed[i].links] == [f"http://127.0.0.2/p/SKU-{i}-spare"]
    assert parsed[6].product is None and parsed[6].error and "not found" in parsed[6].error
    # All in one group: the missing payload did not fail it (no fallback to one by one).
    assert not [r for r in caplog.records if getattr(r, "action", None) == "batch_fallback"]
    assert {m.headers[n.MSG_ID] for m in msgs if m.headers} == {
        f"parsed-{r.attempt.id}" for r in parsed.values()
    }
    info = await js.consumer_info(consumer.stream, consumer.durable)
    assert info.num_ack_pending == 0 and info.num_pending == 0
