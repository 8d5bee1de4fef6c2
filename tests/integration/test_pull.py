"""The pull requests behind every consumer (``shared.consumer.Puller``), on the real NATS.

Timeouts here are long (30 s) and the bounds loose (10 s): a fetch that returns when it should
is far inside them, and one that waits out its timeout by mistake is far outside.
"""

from __future__ import annotations

import asyncio
import time

import pytest

from shared import names as n
from shared.consumer import Puller
from shared.names import Names
from shared.provision import consumer_specs, provision

LONG = 30.0
PROMPT = 10.0


@pytest.fixture
async def pull(nc, namespace):
    js = nc.jetstream()
    names = Names(namespace)
    await provision(js, names, max_deliver=3)
    spec = next(s for s in consumer_specs(names) if s.stream_key == n.FETCH)
    puller = Puller(nc, names.pull_request(names.stream(n.FETCH), spec.durable(names)))
    await puller.start()
    yield puller, js, names
    await puller.stop()


async def _publish(js, names: Names, count: int) -> None:
    for i in range(count):
        await js.publish(names.fetch, str(i).encode())


async def _timed_fetch(puller: Puller, batch: int) -> tuple[list, float]:
    started = time.monotonic()
    msgs = await asyncio.wait_for(puller.fetch(batch, LONG), LONG + 5)
    return msgs, time.monotonic() - started


async def test_what_the_stream_holds_comes_at_once_up_to_the_batch(pull):
    puller, js, names = pull
    await _publish(js, names, 15)
    first, took = await _timed_fetch(puller, 10)
    assert [m.data for m in first] == [str(i).encode() for i in range(10)]
    assert took < PROMPT
    for m in first:
        await m.ack()
    rest, took = await _timed_fetch(puller, 10)  # fewer than asked: no waiting for more
    assert [m.data for m in rest] == [str(i).encode() for i in range(10, 15)]
    assert took < PROMPT


async def test_a_waiting_fetch_returns_with_the_first_message_published(pull):
    puller, js, names = pull
    fetch = asyncio.create_task(_timed_fetch(puller, 10))
    await asyncio.sleep(0)  # let the request go out first; the stream is empty
    await _publish(js, names, 1)
    msgs, took = await fetch
    assert [m.data for m in msgs] == [b"0"]
    assert took < PROMPT


async def test_messages_in_hand_are_not_held_back_by_an_empty_stream(pull):
    puller, js, names = pull
    await _publish(js, names, 2)
    held = await puller.fetch(10, LONG)
    puller.ready = held  # as if they had arrived after the previous fetch returned
    msgs, took = await _timed_fetch(puller, 10)
    assert [m.data for m in msgs] == [b"0", b"1"]
    assert took < PROMPT


async def test_an_empty_stream_times_out(pull):
    puller, _, _ = pull
    started = time.monotonic()
    with pytest.raises(TimeoutError):
        await puller.fetch(10, 0.3)
    assert time.monotonic() - started >= 0.25


async def test_the_end_of_an_earlier_request_does_not_end_the_current_one(pull, nc):
    puller, js, names = pull
    with pytest.raises(TimeoutError):
        await puller.fetch(10, 0.2)  # request 1, ended by its 408
    earlier = puller._reply
    fetch = asyncio.create_task(_timed_fetch(puller, 10))  # request 2
    await asyncio.sleep(0)
    # A late status on request 1's reply subject, as after a reconnect or a slow server.
    await nc.publish(earlier, b"", headers={"Status": "404", "Description": "No Messages"})
    await nc.flush()
    await _publish(js, names, 1)
    msgs, took = await fetch
    assert [m.data for m in msgs] == [b"0"]
    assert took < PROMPT


async def test_messages_never_handled_are_handed_back_at_stop(pull, nc):
    puller, js, names = pull
    await _publish(js, names, 2)
    puller.ready = await puller.fetch(10, LONG)  # arrived, but the loop stopped before them
    await puller.stop()
    assert puller.ready == []
    other = Puller(nc, puller.subject)  # another replica: it need not wait out ack_wait
    await other.start()
    try:
        msgs, took = await _timed_fetch(other, 10)
    finally:
        await other.stop()
    assert [m.data for m in msgs] == [b"0", b"1"]
    assert [m.metadata.num_delivered for m in msgs] == [2, 2]
    assert took < PROMPT
