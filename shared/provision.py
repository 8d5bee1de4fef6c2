"""Idempotent provisioning of streams, consumers and buckets of one namespace.

Running it twice changes nothing; a changed consumer config is applied with ``add_consumer``
(``pull_subscribe`` would keep the old one, see NOTES.md §0.5). One ``filter_subject`` per
consumer: 2.9 silently ignores ``filter_subjects``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from dataclasses import dataclass
from typing import Any

import nats.errors
import nats.js.errors
from nats.js import JetStreamContext, api

from shared import names as n
from shared.channels import CHANNELS, Channel
from shared.names import Names

log = logging.getLogger("trawl.provision")

DAY = 86400.0
# A browser session's cookies outlive the session on a replica (15 min idle) by this much:
# anti-bot cookies last minutes to hours; an older visitor is a new visitor anyway.
COOKIE_TTL = 6 * 3600.0


@dataclass(frozen=True)
class ConsumerSpec:
    """One durable consumer as provisioning creates it, from the channel table."""

    service: str
    stream_key: str
    filter_subject: str
    ack_wait: float = 30.0
    max_ack_pending: int = 2000

    def durable(self, names: Names) -> str:
        return names.consumer(self.service, self.stream_key)


def stream_configs(names: Names, replicas: int = 1) -> list[api.StreamConfig]:
    """Every stream of the namespace, each kept on ``replicas`` servers of a cluster (R1 on a
    single server, R3 on a three-node cluster: a node may die without losing a message)."""
    work, interest, limits = (
        api.RetentionPolicy.WORK_QUEUE,
        api.RetentionPolicy.INTEREST,
        api.RetentionPolicy.LIMITS,
    )

    def stream(
        key: str, subject: str, retention: api.RetentionPolicy, **kw: Any
    ) -> api.StreamConfig:
        kw.setdefault("max_age", 7 * DAY)
        kw.setdefault("duplicate_window", 300.0)
        return api.StreamConfig(
            name=names.stream(key),
            subjects=[subject],
            retention=retention,
            storage=api.StorageType.FILE,
            **kw,
        )

    configs = [
        # no_ack: a core NATS request to the trigger subject must get the scheduler's reply, not
        # the stream's PubAck (docs/architecture.md, "Triggers").
        stream(n.TRIGGER, names.trigger, work, no_ack=True, duplicate_window=None),
        stream(n.FETCH, names.fetch, work),
        stream(n.RENDER, names.render, work),
        # Interest: read by the scheduler (outcomes) and the parser (payloads to parse).
        stream(n.FETCHED, names.fetched, interest),
        # Interest: read by the scheduler (links) and the refresher (products).
        stream(n.PARSED, names.parsed, interest),
        # The refresher's outbox sweep may publish a product change again a minute after a
        # crash: its Nats-Msg-Id must still be remembered then.
        stream(n.EVENTS, names.events_all, limits),
        stream(n.DLQ, names.dlq_all, limits, max_age=30 * DAY, duplicate_window=None),
        # Payloads: one gzip body per content address; direct get for fast reads.
        api.StreamConfig(
            name=names.payload_stream,
            subjects=[names.payload_all],
            retention=limits,
            storage=api.StorageType.FILE,
            max_msgs_per_subject=1,
            allow_direct=True,
            duplicate_window=120.0,
            discard=api.DiscardPolicy.OLD,
        ),
    ]
    for config in configs:
        config.num_replicas = replicas
        # The server's default, spelled out: provisioning then sees the stream unchanged.
        config.duplicate_window = config.duplicate_window or 120.0
    return configs


def consumer_specs(names: Names) -> list[ConsumerSpec]:
    """Every durable consumer of the namespace: the channel table's (``shared.channels``)."""
    return [
        consumer_spec(names, channel, durable.service)
        for channel in CHANNELS
        for durable in channel.durables
    ]


def consumer_spec(names: Names, channel: Channel[Any], service: str) -> ConsumerSpec:
    """``service``'s durable consumer of ``channel``."""
    durable = channel.durable(service)
    return ConsumerSpec(
        service,
        channel.stream,
        channel.filter_subject(names, durable),
        ack_wait=durable.ack_wait,
        max_ack_pending=durable.max_ack_pending,
    )


def consumer_config(names: Names, spec: ConsumerSpec, max_deliver: int) -> api.ConsumerConfig:
    return api.ConsumerConfig(
        durable_name=spec.durable(names),
        filter_subject=spec.filter_subject,
        ack_policy=api.AckPolicy.EXPLICIT,
        deliver_policy=api.DeliverPolicy.ALL,
        ack_wait=spec.ack_wait,
        # +1: the worker dead-letters itself on the last delivery; the server limit is a backstop.
        max_deliver=max_deliver + 1,
        max_ack_pending=spec.max_ack_pending,
        max_waiting=512,
    )


async def provision(
    js: JetStreamContext, names: Names, *, max_deliver: int = 5, replicas: int = 1
) -> None:
    """Create or update everything of the namespace. Consumers inherit their stream's replicas;
    buckets that exist with another replica count are scaled to ``replicas``."""
    for config in stream_configs(names, replicas):
        await _ensure_stream(js, config)
    for spec in consumer_specs(names):
        await _ensure_consumer(
            js, names.stream(spec.stream_key), consumer_config(names, spec, max_deliver)
        )
    await _ensure_kv(js, names.robots_bucket, ttl=DAY, replicas=replicas)
    await _ensure_kv(js, names.sources_bucket, ttl=0, replicas=replicas)
    await _ensure_kv(js, names.proxies_bucket, ttl=0, replicas=replicas)
    await _ensure_kv(js, names.cookies_bucket, ttl=COOKIE_TTL, replicas=replicas)
    try:
        await js.object_store(names.large_payload_bucket)
    except nats.js.errors.BucketNotFoundError:
        try:
            await js.create_object_store(
                config=api.ObjectStoreConfig(bucket=names.large_payload_bucket, replicas=replicas),
                bucket=names.large_payload_bucket,
            )
        except nats.js.errors.BadRequestError as exc:
            _unless_created_meanwhile(exc)
    await _ensure_replicas(js, f"OBJ_{names.large_payload_bucket}", replicas)


# What a cluster answers while it elects its JetStream leaders (starting, or a node just died).
# Not found too: provisioning creates whatever is missing, so a stream it just created and a
# node does not know yet is the cluster catching up.
_NOT_READY: tuple[type[BaseException], ...] = (
    nats.js.errors.ServiceUnavailableError,
    nats.js.errors.NotFoundError,
    nats.errors.TimeoutError,
    nats.errors.NoRespondersError,
    TimeoutError,
)


async def provision_when_ready(
    js: JetStreamContext,
    names: Names,
    *,
    max_deliver: int = 5,
    replicas: int = 1,
    timeout: float = 120.0,
) -> None:
    """``provision``, retried while JetStream is not ready (a cluster starting beside the
    services, a node dying meanwhile) for up to ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    delay = 0.25
    while True:
        try:
            await provision(js, names, max_deliver=max_deliver, replicas=replicas)
            return
        except _NOT_READY as exc:
            if time.monotonic() + delay > deadline:
                raise
            log.warning("jetstream not ready: %s", exc, extra={"action": "provision_retry"})
            await asyncio.sleep(delay)
            delay = min(5.0, delay * 2)


async def _ensure_stream(js: JetStreamContext, config: api.StreamConfig) -> None:
    assert config.name is not None  # stream_configs names every stream
    try:
        info = await js.stream_info(config.name)
    except nats.js.errors.NotFoundError:
        try:
            await _add_stream(js, config)
        except nats.js.errors.BadRequestError as exc:
            _unless_created_meanwhile(exc)
            info = await js.stream_info(config.name)  # not there after all: NotFoundError
        else:
            log.info("stream created", extra={"action": "stream_created", "stream": config.name})
            return
    if _differs(config, info.config):
        await js.update_stream(config)


# The server's refusals of a create when the stream came to exist meanwhile: its subjects
# overlap the new one's (10065), or its name is in use with another configuration (10058).
_CREATED_MEANWHILE = (10065, 10058)


def _unless_created_meanwhile(exc: nats.js.errors.BadRequestError) -> None:
    """Raise ``exc`` unless it says that the stream (or a bucket's) was created between the
    lookup and the create: by another service of the namespace, started at the same moment
    (every service provisions at its start). Then the caller goes on with the stream there."""
    if exc.err_code not in _CREATED_MEANWHILE:
        raise exc


# Tries of a stream creation the server refused with "stream not found": nats-server 2.9 answers
# that when its account's storage directory vanished under the create (its log: "could not
# create storage directory ... no such file or directory"), which happens when the account's
# other streams are deleted at the same moment; the next try creates it.
ADD_STREAM_TRIES = 3


async def _add_stream(js: JetStreamContext, config: api.StreamConfig) -> None:
    for attempt in range(1, ADD_STREAM_TRIES + 1):
        try:
            await js.add_stream(config)
            return
        except nats.js.errors.NotFoundError:
            if attempt == ADD_STREAM_TRIES:
                raise
            log.warning(
                "stream create refused as not found; trying again",
                extra={"action": "stream_create_retry", "stream": config.name, "try": attempt},
            )
            await asyncio.sleep(0.1 * attempt)


async def _ensure_consumer(js: JetStreamContext, stream: str, config: api.ConsumerConfig) -> None:
    assert config.durable_name is not None  # consumer_config names every consumer
    try:
        info = await js.consumer_info(stream, config.durable_name)
    except nats.js.errors.NotFoundError:
        await js.add_consumer(stream, config)
        return
    if _differs(config, info.config):
        await js.add_consumer(stream, config)  # applies the changed config


def _differs(wanted: api.StreamConfig | api.ConsumerConfig, current: Any) -> bool:
    """Whether the server's config differs in a field ``wanted`` sets. Only a change is
    written: on a cluster every update is a round of the meta group, and every service runs
    provisioning at every start."""
    have = current.as_dict()
    return any(have.get(key) != value for key, value in wanted.as_dict().items())


async def _ensure_kv(js: JetStreamContext, bucket: str, *, ttl: float, replicas: int) -> None:
    try:
        await js.key_value(bucket)
    except nats.js.errors.BucketNotFoundError:
        try:
            await js.create_key_value(
                bucket=bucket, ttl=ttl or None, direct=True, history=1, replicas=replicas
            )
            return
        except nats.js.errors.BadRequestError as exc:
            _unless_created_meanwhile(exc)
    await _ensure_replicas(js, f"KV_{bucket}", replicas)


async def _ensure_replicas(js: JetStreamContext, stream: str, replicas: int) -> None:
    """Scale a bucket's stream (``KV_<bucket>``, ``OBJ_<bucket>``) to ``replicas``."""
    config = (await js.stream_info(stream)).config
    if config.num_replicas != replicas:
        config.num_replicas = replicas
        await js.update_stream(config)
        log.info(
            "bucket scaled",
            extra={"action": "bucket_scaled", "stream": stream, "replicas": replicas},
        )


async def teardown(js: JetStreamContext, names: Names) -> None:
    """Delete everything of a namespace (tests)."""
    for config in stream_configs(names):
        assert config.name is not None  # stream_configs names every stream
        with contextlib.suppress(nats.js.errors.NotFoundError):
            await js.delete_stream(config.name)
    buckets = (names.robots_bucket, names.sources_bucket, names.proxies_bucket)
    for bucket in (*buckets, names.cookies_bucket):
        with contextlib.suppress(nats.js.errors.NotFoundError):
            await js.delete_key_value(bucket)
    with contextlib.suppress(nats.js.errors.NotFoundError):
        await js.delete_object_store(names.large_payload_bucket)
