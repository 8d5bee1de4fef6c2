"""``shared.replies`` and the publish and direct get built on it, on the real NATS: the same
replies and the same errors as nats-py's ``request``, ``js.publish`` and ``get_last_msg``."""

from __future__ import annotations

import asyncio

import nats.errors
import nats.js.errors
import pytest

from shared.bus import js_publish
from shared.names import FETCH, Names
from shared.payloads import JetStreamPayloadStore, PayloadNotFound
from shared.provision import provision
from shared.replies import replies


async def test_concurrent_requests_each_get_their_own_reply(nc, namespace):
    subject = f"{namespace}.echo"

    async def answer(msg):
        await asyncio.sleep(0.001 * (10 - int(msg.data)))  # later requests answered first
        await msg.respond(b"re:" + msg.data)

    sub = await nc.subscribe(subject, cb=answer)
    try:
        got = await asyncio.gather(
            *(replies(nc).request(subject, str(i).encode(), timeout=5) for i in range(10))
        )
    finally:
        await sub.unsubscribe()
    assert [m.data for m in got] == [f"re:{i}".encode() for i in range(10)]
    assert replies(nc) is replies(nc)


async def test_a_request_nobody_answers_times_out_and_one_nobody_hears_has_no_responders(
    nc, namespace
):
    subject = f"{namespace}.silent"
    sub = await nc.subscribe(subject)  # hears, never answers
    try:
        with pytest.raises(nats.errors.TimeoutError):
            await replies(nc).request(subject, b"x", timeout=0.05)
    finally:
        await sub.unsubscribe()
    with pytest.raises(nats.errors.NoRespondersError):
        await replies(nc).request(f"{namespace}.nobody", b"x", timeout=5)
    assert replies(nc)._waiting == {}  # nothing left behind


async def test_js_publish_acks_and_fails_as_js_publish_does(nc, namespace):
    js = nc.jetstream()
    names = Names(namespace)
    await provision(js, names)
    await js_publish(js, names.fetch, b"1", {"Nats-Msg-Id": "one"})
    await js_publish(js, names.fetch, b"1", {"Nats-Msg-Id": "one"})  # a duplicate: acked too
    assert (await js.stream_info(names.stream(FETCH))).state.messages == 1
    wrong = {"Nats-Expected-Stream": "not-this-one"}
    with pytest.raises(nats.js.errors.APIError) as theirs:
        await js.publish(names.fetch, b"2", headers=dict(wrong))
    with pytest.raises(nats.js.errors.APIError) as ours:
        await js_publish(js, names.fetch, b"2", dict(wrong))
    assert (type(ours.value), ours.value.err_code) == (type(theirs.value), theirs.value.err_code)
    with pytest.raises(nats.js.errors.NoStreamResponseError):
        await js.publish(f"{namespace}.nostream", b"3")
    with pytest.raises(nats.js.errors.NoStreamResponseError):
        await js_publish(js, f"{namespace}.nostream", b"3")


async def test_direct_get_reads_the_body_and_a_miss_is_not_found(nc, namespace):
    js = nc.jetstream()
    names = Names(namespace)
    await provision(js, names)
    store = JetStreamPayloadStore(js, names)
    page = b"<html>" + "<p>caf\u00e9</p>".encode() * 5000 + b"</html>"
    stored = await store.put(page)
    assert await store.get(stored.ref) == page
    digest = stored.ref.removeprefix("js:")
    assert (
        await store._get_inline(digest)
        == (await js.get_last_msg(names.payload_stream, names.payload(digest), direct=True)).data
    )
    with pytest.raises(PayloadNotFound):
        await store.get("js:" + "1" * 64)
