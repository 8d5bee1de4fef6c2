"""The pull-consumer loop every service uses, and the message-fate policy in one place.

Two kinds of consumer: ``Consumer`` calls its handler once per message, ``BatchConsumer`` once
per pulled batch (one transaction), falling back to batches of one when a batch fails.

Fate: success → ``ack``; ``Retry(delay)`` → ``nak(delay)``; ``Poison(reason)`` or a body that
does not decode (whatever the decoder raises: ``RecursionError`` on deep nesting,
``UnicodeDecodeError`` on invalid UTF-8 ...) → DLQ + ``term``; any other exception → ``nak``
with backoff, and DLQ + ``term`` on the last allowed delivery. A dead letter always fits the
server's max payload (``shared.letters``). A failure of the fate itself (the DLQ refuses the
letter, NATS is gone) is logged and the message left to redeliver: no task ends with an
exception nobody retrieves. Outputs are published by the handler before it returns, so the ack
always comes after them (at-least-once).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import logging
import time
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass, replace
from typing import Any, Generic, TypedDict, TypeVar, Unpack

import msgspec
import nats.errors
import nats.js.errors
from nats.aio.client import Client
from nats.aio.msg import Msg
from nats.aio.subscription import Subscription
from nats.js import JetStreamContext
from opentelemetry import trace
from opentelemetry.trace import Span

from schemas.messages import Message
from shared import names as n
from shared.bus import publish
from shared.channels import Channel
from shared.errors import Poison, Retry
from shared.letters import dead_letter
from shared.metrics import Labels, Metrics
from shared.names import Names
from shared.provision import consumer_config, consumer_spec
from shared.telemetry import consumer_span, start_consumer_span

log = logging.getLogger("trawl.consumer")

T = TypeVar("T", bound=Message)

PULL_WAIT = 0.005  # longest wait for a low-water mark of free slots before pulling anyway
_HEARTBEAT = "100"


class Puller:
    """Pull requests of one durable consumer, answered on a subscription with a callback.

    nats-py's ``PullSubscription.fetch`` awaits each message through a task of its own
    (``next_msg``: a uuid, a task and a ``wait_for`` per message): 60 µs of CPU per message
    fetched and acked, against 20 with a callback that appends to a list. The request is
    nats-py's: ``no_wait`` with ``expires`` returns what the stream holds as soon as it holds
    anything, ended by a status (404/408), and waits up to ``expires`` for a first message.
    Deliveries that come after a fetch returned wait in ``ready`` for the next one, which then
    asks without ``expires`` (404 at once when the stream is empty) so they are not held. Each
    request has its own reply subject, so the end of an earlier one cannot end the current one,
    and a request refused at once (a 409, say) waits out its timeout: the pull loop cannot spin.

    A fetch can give up before the server does (its timer fires first under load, or it is
    cancelled), leaving its request open, and the server hands new messages to the oldest open
    request. Data messages carry the stream's subject, not the request's inbox, so nothing
    tells whose they are; a request that gets its whole batch ends without a status; and the
    server refuses a request at once (408 "Requests Pending") when what the stream holds is
    promised to earlier ones. So while an earlier request may be open (``_open``: no status
    seen, its ``expires`` not surely past) every message wakes the current fetch, so does an
    earlier request's end while messages wait, and a fetch whose request ended empty-handed
    still returns the first message that comes before its timeout.
    """

    def __init__(self, nc: Client, subject: str) -> None:
        self.nc = nc
        self.subject = subject
        self.inbox = nc.new_inbox()
        self.sub: Subscription | None = None
        self.ready: list[Msg] = []
        self._requests = 0
        self._reply = ""
        self._want = 0
        self._woken: asyncio.Future[None] | None = None
        self._open: dict[str, float] = {}  # reply subject → when its request is surely over
        self._mixed = False  # an earlier request may have sent some of this fetch's messages

    async def start(self) -> None:
        self.sub = await self.nc.subscribe(f"{self.inbox}.*", cb=self._deliver)

    async def stop(self) -> None:
        """Unsubscribe, and hand back what arrived but was never handled: a replica that is
        scaled down or restarted would otherwise hold it until ``ack_wait`` runs out."""
        sub, self.sub = self.sub, None
        if sub is not None:
            with contextlib.suppress(nats.errors.Error):
                await sub.unsubscribe()
        self._open.clear()
        left, self.ready = self.ready, []
        for msg in left:
            with contextlib.suppress(nats.errors.Error):
                await msg.nak()

    async def _deliver(self, msg: Msg) -> None:
        status = msg.headers.get(n.STATUS) if msg.headers else None
        if status is None:
            self.ready.append(msg)
            if self._earlier_open():
                self._mixed = True
            elif len(self.ready) < self._want:
                return
        elif status == _HEARTBEAT:
            return
        else:  # the request is over (404 no more now, 408 expired, 409 ...)
            self._open.pop(msg.subject, None)
            if msg.subject != self._reply and not self.ready:
                return  # the end of an earlier request, and nothing it left to hand over
        # Enough messages, the request is over, or messages that may be an earlier one's.
        if self._woken is not None and not self._woken.done():
            self._woken.set_result(None)

    def _earlier_open(self) -> bool:
        """Whether a request before the current one may still take messages."""
        if len(self._open) <= (self._reply in self._open):
            return False
        now = time.monotonic()
        return any(until > now for reply, until in self._open.items() if reply != self._reply)

    async def fetch(self, batch: int, timeout: float) -> list[Msg]:
        deadline = time.monotonic() + timeout
        if len(self.ready) < batch:
            if self._open:  # forget requests the server has surely ended (expires is < timeout)
                now = time.monotonic()
                self._open = {reply: until for reply, until in self._open.items() if until > now}
            self._requests += 1
            self._reply = reply = f"{self.inbox}.{self._requests}"
            self._want = batch
            self._mixed = False
            self._woken = asyncio.get_running_loop().create_future()
            request: dict[str, Any] = {"batch": batch - len(self.ready), "no_wait": True}
            if not self.ready:  # with messages in hand, take what the stream has and go
                request["expires"] = int(timeout * 1_000_000_000) - 100_000
            # Open until its status comes; the server ends it within ``expires`` of receiving
            # it, and a second ``timeout`` covers a server or a flusher that runs late.
            self._open[reply] = deadline + timeout
            try:
                await self.nc.publish(self.subject, json.dumps(request).encode(), reply=reply)
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._woken, timeout)
                if not self.ready and (left := deadline - time.monotonic()) > 0:
                    # Over with nothing (404, 409, 408 "Requests Pending"): wait out the
                    # timeout, so the loop cannot spin, for what an earlier request hands over.
                    self._want = 1
                    self._woken = asyncio.get_running_loop().create_future()
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(self._woken, left)
            finally:
                self._woken = None
            if len(self.ready) >= batch and not self._mixed:
                # Every message came from this request, so it got its whole batch: over, and
                # the server sends no status for that.
                self._open.pop(reply, None)
        msgs, self.ready = self.ready[:batch], self.ready[batch:]
        if not msgs:
            raise TimeoutError
        return msgs


@dataclass(frozen=True)
class Delivery(Generic[T]):
    """A decoded message and its NATS envelope. ``span``: its consumer span, when a batch
    handler gets it (``BatchConsumer``); a lone message's span is the current one."""

    body: T
    msg: Msg
    span: Span | None = None

    def traced(self) -> contextlib.AbstractContextManager[object]:
        """The message's span made current: what is published within goes on its trace."""
        if self.span is None or not self.span.get_span_context().is_valid:
            return contextlib.nullcontext()  # none, or no exporter (nothing to carry)
        return trace.use_span(self.span, end_on_exit=False)

    @property
    def headers(self) -> dict[str, str]:
        return self.msg.headers or {}

    @property
    def num_delivered(self) -> int:
        return self.msg.metadata.num_delivered


Handler = Callable[[Delivery[T]], Awaitable[None]]
BatchHandler = Callable[[list[Delivery[T]]], Awaitable[None]]


class Options(TypedDict, Generic[T], total=False):
    """How a consumer pulls and handles (``Subscriber``'s keyword arguments)."""

    concurrency: int  # messages in flight at once
    batch: int  # most messages pulled at once
    max_deliver: int  # deliveries before a failing message is dead-lettered
    grace: float  # seconds in-flight work gets to finish at stop
    span_attrs: Callable[[T], dict[str, Any]]  # attributes of a message's consumer span


class Subscriber(Generic[T]):
    """The pull loop of one durable consumer, and the message-fate policy. Two kinds:
    ``Consumer`` calls its handler once per message, ``BatchConsumer`` once per pulled batch."""

    def __init__(
        self,
        nc: Client,
        js: JetStreamContext,
        names: Names,
        channel: Channel[T],
        service: str,
        *,
        stop: asyncio.Event,
        metrics: Metrics | None = None,
        **options: Unpack[Options[T]],
    ) -> None:
        """``service``'s consumer of ``channel``: its durable there (the channel table), bodies
        decoded as the channel's type; it counts what it handles in ``metrics``."""
        self.nc = nc
        self.js = js
        self.names = names
        self.channel = channel
        self.spec = consumer_spec(names, channel, service)
        self.decoder = msgspec.json.Decoder(channel.body)
        self.version = channel.version  # newer messages are dead-lettered, older ones upgraded
        self.stop = stop
        self.concurrency = concurrency = options.get("concurrency", 64)
        self.batch = options.get("batch", 100)
        self.max_deliver = options.get("max_deliver", 5)
        self.grace = options.get("grace", 20.0)
        self.span_attrs = options.get("span_attrs")
        self.stream = names.stream(channel.stream)
        self.durable = self.spec.durable(names)
        self._inflight: set[asyncio.Task[None]] = set()
        self._slots = asyncio.Semaphore(concurrency)
        self._roomy = asyncio.Event()
        self._held = 0  # messages in flight (a batch task holds all of its messages)
        self.metrics = metrics or Metrics.disabled()
        self.labels: Labels = (("consumer", self.durable), ("stream", channel.stream))

    @property
    def handled(self) -> int:
        """Messages this instance acknowledged after their handler succeeded (read from
        ``metrics``, where they are counted)."""
        return self.metrics.handled.get(self.labels)

    @property
    def errors(self) -> int:
        return self.metrics.errors.get(self.labels)

    @property
    def dead_lettered(self) -> int:
        return self.metrics.dead_lettered.get(self.labels)

    async def run(self) -> None:
        sub = Puller(self.nc, self.names.pull_request(self.stream, self.durable))
        await sub.start()
        empty = 0
        try:
            while not self.stop.is_set():
                await self._room_to_pull()
                want = max(1, min(self.batch, self._free_slots()))
                try:
                    msgs = await sub.fetch(want, timeout=1.0)
                except (TimeoutError, nats.errors.TimeoutError):
                    empty += 1
                    if empty % 30 == 0:  # a deleted consumer makes fetch time out forever
                        await self._ensure_consumer()
                    continue
                except nats.errors.ConnectionClosedError:
                    break
                empty = 0
                await self._start(msgs)
        finally:
            await self._drain_inflight()
            with contextlib.suppress(Exception):
                await sub.stop()

    async def _start(self, msgs: list[Msg]) -> None:
        """Start handling pulled messages, each holding a slot until it is settled. At stop,
        in-flight tasks get ``grace`` to finish their publish → ack; one cancelled after that is
        simply redelivered."""
        raise NotImplementedError

    def _free_slots(self) -> int:
        return self.concurrency - self._held

    async def _room_to_pull(self) -> None:
        """Wait for a worthwhile batch of free slots (or a moment, then take what there is).

        Without this, a handler that completes messages in groups (the refresher's batches)
        frees its slots one callback at a time, and the loop would pull one message per fetch.
        """
        await self._slots.acquire()  # at least one free slot
        self._slots.release()
        low_water = min(self.batch, max(1, self.concurrency // 4))
        if self._free_slots() >= low_water:
            return
        self._roomy.clear()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._roomy.wait(), PULL_WAIT)

    async def _track(self, work: Coroutine[Any, Any, None], size: int, name: str) -> None:
        """Run ``work`` as a task holding ``size`` slots until it ends."""
        for _ in range(size):
            await self._slots.acquire()
        task = asyncio.create_task(work, name=name)
        self._held += size
        self._inflight.add(task)

        def done(t: asyncio.Task[None]) -> None:
            if not t.cancelled() and (exc := t.exception()) is not None:
                # The fate itself failed (the DLQ publish, say): the messages are neither acked
                # nor termed, so JetStream redelivers them after ack_wait.
                self.metrics.errors.add(1, self.labels)
                log.error(
                    "message fate failed, left to redeliver: %r",
                    exc,
                    exc_info=exc,
                    extra={"action": "fate_error", "consumer": self.durable},
                )
            self._inflight.discard(t)
            self._held -= size
            for _ in range(size):
                self._slots.release()
            if self._free_slots() >= min(self.batch, max(1, self.concurrency // 4)):
                self._roomy.set()

        task.add_done_callback(done)

    async def _drain_inflight(self) -> None:
        if not self._inflight:
            return
        _, pending = await asyncio.wait(set(self._inflight), timeout=self.grace)
        for task in pending:
            task.cancel()

    async def _ensure_consumer(self) -> None:
        try:
            await self.js.consumer_info(self.stream, self.durable)
        except nats.js.errors.NotFoundError:
            log.warning(
                "consumer vanished, recreating",
                extra={"action": "consumer_recreate", "consumer": self.durable},
            )
            await self.js.add_consumer(
                self.stream, consumer_config(self.names, self.spec, self.max_deliver)
            )
        except (TimeoutError, nats.errors.Error):
            pass

    # -- the fate of one message -----------------------------------------------------------
    async def _decode(self, msg: Msg) -> Delivery[T] | None:
        """The message decoded; one that never will be (malformed, or of a newer version than
        this code reads) is dead-lettered at once and ``None`` returned."""
        try:
            body = self.decoder.decode(msg.data)
        except (msgspec.DecodeError, msgspec.ValidationError) as exc:
            try:
                upgraded = self.channel.upgrade(msg.data)
            except Exception:  # an older shape's decoder fails as oddly as the current one
                upgraded = None
            if upgraded is not None:
                return Delivery(upgraded, msg)
            reason = f"malformed message: {exc}"
        except Exception as exc:  # RecursionError, UnicodeDecodeError: msgspec raises those too
            reason = f"malformed message: {type(exc).__name__}: {exc}"
        else:
            if body.v <= self.version:
                return Delivery(body, msg)
            reason = f"unsupported message version v={body.v} (max {self.version})"
        with consumer_span(msg.subject, msg.headers) as span:
            span.set_attribute("trawl.fate", "dlq")
            await self._dead_letter(msg, reason)
        return None

    async def _settle(self, d: Delivery[T], handle: Callable[[], Awaitable[None]]) -> None:
        """Run ``handle`` for one delivery and decide its fate: success → ack; ``Retry`` →
        nak(delay); ``Poison`` → DLQ; any other error → nak with backoff, DLQ on the last
        allowed delivery."""
        msg = d.msg
        attrs = self.span_attrs(d.body) if self.span_attrs else {}
        with consumer_span(msg.subject, msg.headers, **attrs) as span:
            try:
                await handle()
            except Poison as exc:
                span.set_attribute("trawl.fate", "dlq")
                await self._dead_letter(msg, str(exc))
                return
            except Retry as exc:
                span.set_attribute("trawl.fate", "retry")
                await self._retry(msg, str(exc), exc.delay)
                return
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                self.metrics.errors.add(1, self.labels)
                span.record_exception(exc)
                log.exception(
                    "handler failed",
                    extra={
                        "action": "handler_error",
                        "consumer": self.durable,
                        "delivered": msg.metadata.num_delivered,
                    },
                )
                await self._retry(msg, f"{type(exc).__name__}: {exc}", self._backoff(msg))
                return
            await self._ack(msg)
            self.metrics.handled.add(1, self.labels)

    def _backoff(self, msg: Msg) -> float:
        return min(30.0, 0.5 * 2 ** (msg.metadata.num_delivered - 1))

    async def _retry(self, msg: Msg, reason: str, delay: float) -> None:
        if msg.metadata.num_delivered >= self.max_deliver:
            await self._dead_letter(
                msg, f"gave up after {msg.metadata.num_delivered} deliveries: {reason}"
            )
            return
        # If the nak is lost, the message is redelivered after ack_wait anyway.
        with contextlib.suppress(nats.errors.Error):
            await msg.nak(delay=delay)

    async def _ack(self, msg: Msg) -> None:
        with contextlib.suppress(nats.errors.MsgAlreadyAckdError):
            await msg.ack()

    async def _dead_letter(self, msg: Msg, reason: str) -> None:
        """Publish the letter (cut to fit), then ``term``. If the publish fails, the exception
        reaches ``_track``'s callback and the message is redelivered."""
        data, headers = dead_letter(
            msg, stream=self.spec.stream_key, reason=reason, max_payload=self.nc.max_payload
        )
        await publish(self.js, self.names.dlq(self.spec.stream_key), data, headers=headers)
        self.metrics.dead_lettered.add(1, self.labels)
        log.warning(
            "dead-lettered: %s",
            reason[:500],
            extra={"action": "dead_lettered", "consumer": self.durable},
        )
        with contextlib.suppress(nats.errors.Error):
            await msg.term()


class Consumer(Subscriber[T]):
    """Handles each message on its own, up to ``concurrency`` at once."""

    def __init__(
        self,
        nc: Client,
        js: JetStreamContext,
        names: Names,
        channel: Channel[T],
        service: str,
        handler: Handler[T],
        *,
        stop: asyncio.Event,
        metrics: Metrics | None = None,
        **options: Unpack[Options[T]],
    ) -> None:
        super().__init__(nc, js, names, channel, service, stop=stop, metrics=metrics, **options)
        self.handler = handler

    async def _start(self, msgs: list[Msg]) -> None:
        for msg in msgs:
            await self._track(self._process(msg), 1, f"{self.durable}-msg")

    async def _process(self, msg: Msg) -> None:
        d = await self._decode(msg)
        if d is not None:
            await self._settle(d, functools.partial(self.handler, d))


class BatchConsumer(Subscriber[T]):
    """Handles each pulled batch in one call and acks it as a whole (the refresher's one
    transaction per batch). A batch whose handler raises is handled again one message at a
    time, each as a batch of one under the single message's fate, so only the culprit is
    retried or dead-lettered: the one place that rule lives."""

    def __init__(
        self,
        nc: Client,
        js: JetStreamContext,
        names: Names,
        channel: Channel[T],
        service: str,
        handler: BatchHandler[T],
        *,
        stop: asyncio.Event,
        metrics: Metrics | None = None,
        **options: Unpack[Options[T]],
    ) -> None:
        super().__init__(nc, js, names, channel, service, stop=stop, metrics=metrics, **options)
        self.handler = handler

    async def _start(self, msgs: list[Msg]) -> None:
        await self._track(self._process(msgs), len(msgs), f"{self.durable}-batch")

    async def _process(self, msgs: list[Msg]) -> None:
        deliveries = [d for d in [await self._decode(msg) for msg in msgs] if d is not None]
        if not deliveries:
            return
        if len(deliveries) == 1:  # its fate is the single message's: no fallback to run twice
            (d,) = deliveries
            await self._settle(d, functools.partial(self.handler, deliveries))
            return
        attrs = self.span_attrs
        spans = [
            start_consumer_span(d.msg.subject, d.msg.headers, **(attrs(d.body) if attrs else {}))
            for d in deliveries
        ]
        try:
            await self.handler([replace(d, span=s) for d, s in zip(deliveries, spans, strict=True)])
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # one by one: only the culprit fails
            log.warning(
                "batch failed, handling its messages one by one: %s",
                exc,
                extra={"action": "batch_fallback", "consumer": self.durable},
            )
            for d in deliveries:
                await self._settle(d, functools.partial(self.handler, [d]))
            return
        finally:
            for span in spans:
                span.end()
        for d in deliveries:
            await self._ack(d.msg)
        self.metrics.handled.add(len(deliveries), self.labels)
