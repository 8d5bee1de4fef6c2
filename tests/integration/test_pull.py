"""The pull requests behind every consumer (``shared.consumer.Puller``), on the real NATS.

Timeouts here are long (30 s) and the bounds loose (10 s): a fetch that returns when it should
is far inside them, and one that waits out its timeout by mistake is far outside.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import time

import pytest

from shared import names as n
from shared.consumer import Puller
from shared.names import Names
from shared.provision import consumer_specs, provision
from tests.support.stack import eventually

LONG = 30.0
PROMPT = 10.0


@pytest.fixture
async def pull(nc, namespace):
    js = nc.jetstream()
    names = Names(namespace)
    await provision(js, names, max_deliver=3)
    puller = Puller(nc, names.pull_request(names.stream(n.FETCH), _durable(names)))
    await puller.start()
    yield puller, js, names
    await puller.stop()


def _durable(names: Names) -> str:
    spec = next(s for s in consumer_specs(names) if s.stream_key == n.FETCH)
    return spec.durable(names)


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


async def _queued(js, names: Names, count: int) -> None:
    """Until the server holds ``count`` pull requests of the consumer."""

    async def held() -> bool:
        info = await js.consumer_info(names.stream(n.FETCH), _durable(names))
        return (info.num_waiting or 0) >= count

    await eventually(held, timeout=PROMPT, what=f"{count} pull requests queued")


async def test_a_message_taken_by_an_earlier_open_request_is_returned_at_once(pull, nc):
    """A request the server still holds after its fetch gave up (its timer fired first under
    load) takes the next message, then ends with its own status: the current fetch returns the
    message instead of waiting out its timeout for one of its own."""
    puller, js, names = pull
    earlier = f"{puller.inbox}.0"  # a reply subject the puller answers on, its fetch long over
    request = {"batch": 10, "no_wait": True, "expires": int(LONG * 1_000_000_000)}
    await nc.publish(puller.subject, json.dumps(request).encode(), reply=earlier)
    fetch = asyncio.create_task(_timed_fetch(puller, 10))
    await _queued(js, names, 2)  # the current request waits behind the earlier one
    await _publish(js, names, 1)
    msgs, took = await fetch
    assert [m.data for m in msgs] == [b"0"]
    assert took < PROMPT


async def test_a_message_that_fills_an_earlier_request_is_returned_at_once(pull):
    """An earlier request that gets its whole batch ends without a status, so nothing but the
    message itself can wake the current fetch."""
    puller, js, names = pull
    with pytest.raises(TimeoutError):  # gives up on its request, which the server keeps open
        await asyncio.wait_for(puller.fetch(1, LONG), 0.2)
    fetch = asyncio.create_task(_timed_fetch(puller, 10))
    await _queued(js, names, 2)
    await _publish(js, names, 1)
    msgs, took = await fetch
    assert [m.data for m in msgs] == [b"0"]
    assert took < PROMPT


async def test_a_request_refused_behind_an_earlier_one_still_gets_its_message(pull, nc):
    """The server refuses a request at once (408 "Requests Pending") when the messages it holds
    are promised to earlier requests; the message that earlier request then hands over is
    returned by the current fetch, which does not sleep out its timeout empty-handed."""
    puller, js, names = pull
    stream, durable = names.stream(n.FETCH), _durable(names)
    config = (await js.consumer_info(stream, durable)).config
    await js.delete_consumer(stream, durable)  # one unacknowledged message at a time
    await js.add_consumer(stream, dataclasses.replace(config, max_ack_pending=1))
    await _publish(js, names, 2)
    (first,) = await puller.fetch(1, LONG)  # "1" waits in the stream until "0" is acked
    request = {"batch": 10, "no_wait": True, "expires": int(LONG * 1_000_000_000)}
    await nc.publish(puller.subject, json.dumps(request).encode(), reply=f"{puller.inbox}.0")
    await _queued(js, names, 1)
    tap = await nc.subscribe(f"{puller.inbox}.*")  # sees what the puller's subscription sees
    fetch = asyncio.create_task(_timed_fetch(puller, 10))
    refusal = await tap.next_msg(timeout=PROMPT)
    assert refusal.headers and refusal.headers.get("Status") == "408", refusal.headers
    await first.ack()  # "1" goes to the earlier request
    msgs, took = await fetch
    assert [m.data for m in msgs] == [b"1"]
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
