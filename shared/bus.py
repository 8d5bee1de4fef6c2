"""The NATS connection and JetStream publishing used by every service and the CLI."""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Sequence
from typing import TypeVar

import msgspec
import nats
import nats.errors
import nats.js.errors
from nats.aio.client import Client
from nats.js import JetStreamContext
from opentelemetry.trace import SpanKind

from schemas.messages import Message
from shared import names as n
from shared.channels import Channel
from shared.names import Names
from shared.replies import replies
from shared.settings import nats_servers
from shared.telemetry import inject, tracer, tracing_enabled

log = logging.getLogger("trawl.bus")

_encoder = msgspec.json.Encoder()

B = TypeVar("B", bound=Message)


async def connect(url: str, *, name: str, attempts: int = -1) -> Client:
    """Connect with reconnects forever (services) or a bounded number (CLI, tests).

    ``url`` may name every server of a cluster, comma-separated: the client connects to any
    and reconnects to the survivors when its server dies (it also learns the cluster's other
    servers from the one it reaches)."""

    async def on_error(exc: Exception) -> None:
        log.warning("nats error: %s", exc, extra={"action": "nats_error"})

    async def on_disconnect() -> None:
        log.info("nats disconnected", extra={"action": "nats_disconnected"})

    async def on_reconnect() -> None:
        log.info("nats reconnected", extra={"action": "nats_reconnected"})

    return await nats.connect(
        nats_servers(url),
        name=name,
        error_cb=on_error,
        disconnected_cb=on_disconnect,
        reconnected_cb=on_reconnect,
        max_reconnect_attempts=attempts,
        reconnect_time_wait=0.5 if attempts >= 0 else 1.0,
        connect_timeout=2,
        pending_size=16 * 1024 * 1024,
    )


class Unpublishable(Exception):
    """A message that can never be published as it is: it does not encode (a lone surrogate in
    a string) or it exceeds the server's max payload. Retrying cannot help; the publisher makes
    it safe (``shared.wire.scrubbed``) or publishes what failed instead."""


def encode(message: msgspec.Struct) -> bytes:
    return _encoder.encode(message)


def _encoded(message: msgspec.Struct) -> bytes:
    try:
        return _encoder.encode(message)
    except (UnicodeEncodeError, msgspec.EncodeError, OverflowError, TypeError) as exc:
        raise Unpublishable(f"cannot encode {type(message).__name__}: {exc}") from exc


async def send(
    js: JetStreamContext,
    names: Names,
    channel: Channel[B],
    body: B,
    *,
    msg_id: str | None = None,
    headers: dict[str, str] | None = None,
) -> None:
    """Publish ``body`` on its channel's subject and await the JetStream ack. The channel fixes
    the body's type: mypy refuses a body of another channel."""
    await publish(js, channel.subject(names, body), body, msg_id=msg_id, headers=headers)


async def send_many(
    js: JetStreamContext,
    names: Names,
    channel: Channel[B],
    items: Sequence[tuple[B, str | None, dict[str, str] | None]],
    *,
    timeout: float = 10.0,
) -> None:
    """``send`` for many (body, msg_id, headers) items at once (see ``publish_many``)."""
    await publish_many(
        js,
        [(channel.subject(names, body), body, msg_id, hdrs) for body, msg_id, hdrs in items],
        timeout=timeout,
    )


async def publish(
    js: JetStreamContext,
    subject: str,
    message: msgspec.Struct | bytes,
    *,
    msg_id: str | None = None,
    headers: dict[str, str] | None = None,
    attempts: int = 5,
) -> None:
    """Publish and await the JetStream ack, retrying timeouts; ``msg_id`` makes retries safe.

    By subject: for bytes that go back where they came from (a dead letter retried). A service
    publishes its messages with ``send``, typed by the channel. Raises ``Unpublishable`` for a
    message that no retry can publish."""
    data = message if isinstance(message, bytes) else _encoded(message)
    # No exporter: the no-op tracer's span would only repeat the current span's context, which
    # inject() carries without it (the span cost ~8 µs a publish).
    if not tracing_enabled():
        await js_publish_retried(js, subject, data, _with_id(inject(headers), msg_id), attempts)
        return
    with tracer().start_as_current_span(
        f"{subject} publish",
        kind=SpanKind.PRODUCER,
        attributes={"messaging.system": "nats", "messaging.destination.name": subject},
    ):
        await js_publish_retried(js, subject, data, _with_id(inject(headers), msg_id), attempts)


def _with_id(headers: dict[str, str], msg_id: str | None) -> dict[str, str]:
    if msg_id:
        headers[n.MSG_ID] = msg_id
    return headers


async def js_publish_retried(
    js: JetStreamContext, subject: str, data: bytes, headers: dict[str, str], attempts: int = 5
) -> None:
    """``js_publish`` of bytes as they are, retried as ``publish`` retries."""
    for attempt in range(1, attempts + 1):
        try:
            await js_publish(js, subject, data, headers)
            return
        except nats.errors.MaxPayloadError as exc:
            raise Unpublishable(f"{len(data)} bytes exceed the max payload on {subject}") from exc
        except (
            TimeoutError,
            nats.errors.TimeoutError,
            nats.errors.NoRespondersError,
            # No stream answers: none is there, or (in a cluster) its leader is being elected
            # after a node was lost. The second passes in seconds, so it is retried too.
            nats.js.errors.NoStreamResponseError,
        ):
            if attempt == attempts:
                raise
            await asyncio.sleep(min(2.0, 0.1 * 2**attempt))


async def js_publish(
    js: JetStreamContext, subject: str, data: bytes, headers: dict[str, str] | None = None
) -> None:
    """``js.publish``: publish and await the stream's ack, raising what it raises, on one
    client-wide reply subscription (``shared.replies``: ~11 µs less CPU a publish)."""
    try:
        msg = await replies(js._nc).request(subject, data, headers=headers, timeout=js._timeout)
    except nats.errors.NoRespondersError as exc:
        raise nats.js.errors.NoStreamResponseError from exc
    # A PubAck ({"stream": …, "seq": …}) is not read: only an error is worth its decode.
    if b'"error"' in msg.data and "error" in (resp := json.loads(msg.data)):
        raise nats.js.errors.APIError.from_error(resp["error"])


async def publish_many(
    js: JetStreamContext,
    items: Sequence[tuple[str, msgspec.Struct, str | None, dict[str, str] | None]],
    *,
    timeout: float = 10.0,
) -> None:
    """Publish (subject, message, msg_id, headers) items with async publishes, then await all
    acks; anything not acked in time is published again the acked way (the msg ids make that
    safe). Raises if a message cannot be published at all."""
    futures: list[asyncio.Future] = []
    for subject, message, msg_id, headers in items:
        hdrs = dict(headers) if headers else inject()
        if msg_id:
            hdrs[n.MSG_ID] = msg_id
        futures.append(await js.publish_async(subject, _encoded(message), headers=hdrs))
    if not futures:
        return
    _, pending = await asyncio.wait(futures, timeout=timeout)
    for fut in pending:
        fut.cancel()
    again = [
        i
        for i, fut in enumerate(futures)
        if fut in pending or fut.cancelled() or fut.exception() is not None
    ]
    for i in again:
        subject, message, msg_id, headers = items[i]
        await publish(js, subject, message, msg_id=msg_id, headers=headers)


async def discover_instances(
    nc: Client, verb: str, namespace: str, *, wait: float = 0.3
) -> list[dict]:
    """Scatter-gather on the NATS service API (``$SRV.PING``, ``$SRV.STATS``, ...): every live
    service instance of ``namespace`` answers; ``nc.request`` would return only the first."""
    inbox = nc.new_inbox()
    sub = await nc.subscribe(inbox)
    found: list[dict] = []
    try:
        await nc.publish(Names.service_api(verb), b"", reply=inbox)
        deadline = time.monotonic() + wait
        while (left := deadline - time.monotonic()) > 0:
            try:
                msg = await sub.next_msg(timeout=left)
            except nats.errors.TimeoutError:
                break
            try:
                info = msgspec.json.decode(msg.data)
            except msgspec.DecodeError:
                continue  # something else on this server answers oddly
            meta = (info.get("metadata") or {}) if isinstance(info, dict) else {}
            if meta.get("namespace") == namespace:
                found.append(info)
    finally:
        await sub.unsubscribe()
    return found
