"""The channel table: every subject trawl publishes on, bound to its stream, its durable
consumers and its body type (FastStream binds a subscriber's subject to its body type; so do we,
once, here).

- Provisioning creates the durables listed here (``shared.provision.consumer_specs``).
- A service asks its runtime for its consumer of a channel (``rt.consumer(FETCH_RESULTS, ...)``)
  and gets a ``Consumer[FetchResult]``: the decoder is the channel's body type.
- ``shared.bus.send(js, names, channel, body)`` takes a body of the channel's type, so mypy
  catches a ``ParseResult`` sent on the fetch results' subject.

The names themselves (subjects, streams, durables) are built in ``shared.names``; nothing here
spells one.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Generic, Protocol, TypeVar, cast

import msgspec

from schemas.legacy import LEGACY
from schemas.messages import (
    DeadLetter,
    FetchResult,
    FetchWork,
    JobEvent,
    Message,
    ParseResult,
    ProductChange,
    Trigger,
    version_of,
)
from shared import names as n
from shared.names import Names

B = TypeVar("B", bound=Message)
V = TypeVar("V", bound=Message)


@dataclass(frozen=True)
class Durable:
    """A durable pull consumer of a channel: one per service that reads it, shared by all of the
    service's replicas."""

    service: str
    # How long a delivery may go unacked before JetStream hands it to another replica: the
    # time a killed replica's messages wait. Short where handlers are short; long where one
    # may legitimately run long (a trigger admitting a large catalog, a completion waiting for
    # its last products). The fetcher's long fetches send in_progress() (its HEARTBEAT).
    ack_wait: float = 30.0
    max_ack_pending: int = 2000
    # The part of the channel this durable reads (default: all of it). One filter subject:
    # NATS 2.9 silently ignores ``filter_subjects``.
    only: Callable[[Names], str] | None = None


@dataclass(frozen=True, eq=False)
class Channel(Generic[B]):
    """One subject, or one family of subjects, with its stream, body type and durables."""

    stream: str  # the stream's key: its short name, its DLQ suffix, the durables' suffix
    body: type[B]
    subjects: Callable[[Names], str]  # every subject of the channel (a wildcard for a family)
    # The subject one body goes to, for a family (job events by job and event); default: the one
    # subject of ``subjects``.
    route: Callable[[Names, B], str] | None = None
    durables: tuple[Durable, ...] = ()
    # Set on a view (``view()``): the channel it reads. A view is for consuming, never publishing.
    view_of: Channel[Any] | None = field(default=None, repr=False)
    # Older shapes of the body that may still sit in the stream (schemas/legacy.py), each read
    # and upgraded when a message does not decode as the body.
    legacy: tuple[type[Upgradable], ...] = ()

    @property
    def version(self) -> int:
        """The newest message version this channel's consumers read."""
        return version_of((self.view_of or self).body)

    def upgrade(self, data: bytes) -> B | None:
        """``data`` read as one of the channel's older shapes and upgraded to the body (for a
        view, then narrowed to it); None when no older shape reads it either."""
        for old in (self.view_of or self).legacy:
            try:
                body = _decoder(old).decode(data).upgrade()
            except (msgspec.DecodeError, msgspec.ValidationError):
                continue
            if self.view_of is None:
                return cast(B, body)
            return msgspec.convert(msgspec.to_builtins(body), self.body)
        return None

    def subject(self, names: Names, body: B) -> str:
        """The subject ``body`` is published on."""
        if self.view_of is not None:
            raise TypeError(f"{self.body.__name__} is a view of the {self.stream} channel")
        return self.route(names, body) if self.route is not None else self.subjects(names)

    def durable(self, service: str) -> Durable:
        """``service``'s durable consumer of this channel."""
        for durable in self.durables:
            if durable.service == service:
                return durable
        raise LookupError(f"{service} has no durable consumer of the {self.stream} channel")

    def filter_subject(self, names: Names, durable: Durable) -> str:
        return durable.only(names) if durable.only is not None else self.subjects(names)

    def view(self, view: type[V]) -> Channel[V]:
        """This channel read as ``view``: a Struct with the body's tag and a subset of its fields,
        each of the same type (the refresher reads parse results without their links, which cost
        more to decode than its product costs to apply)."""
        _check_view(self.body, view)
        return Channel(self.stream, view, self.subjects, durables=self.durables, view_of=self)


class Upgradable(Protocol):
    """An older message shape: it knows its newer form."""

    def upgrade(self) -> Message: ...


@functools.cache
def _decoder(message: type[Upgradable]) -> msgspec.json.Decoder[Upgradable]:
    return msgspec.json.Decoder(message)


def _check_view(body: type[Message], view: type[Message]) -> None:
    """A view must decode every body of the channel: same tag, no field the body lacks, none of
    another type, no required field the body may leave out."""
    body_info, view_info = msgspec.inspect.type_info(body), msgspec.inspect.type_info(view)
    assert isinstance(body_info, msgspec.inspect.StructType)
    assert isinstance(view_info, msgspec.inspect.StructType)
    if (body_info.tag_field, body_info.tag) != (view_info.tag_field, view_info.tag):
        raise TypeError(f"{view.__name__} does not carry the tag of {body.__name__}")
    if view_info.forbid_unknown_fields:
        raise TypeError(f"{view.__name__} must ignore the fields of {body.__name__} it leaves out")
    fields = {f.name: f for f in body_info.fields}
    for f in view_info.fields:
        known = fields.get(f.name)
        if known is None or known.type != f.type or (f.required and not known.required):
            raise TypeError(f"{view.__name__}.{f.name} is not {body.__name__}.{f.name}")


# -- the table ---------------------------------------------------------------------------------
# Triggers: published by anyone as a JSON object; the scheduler starts (or joins) a job.
TRIGGERS: Channel[Trigger] = Channel(
    n.TRIGGER,
    Trigger,
    lambda names: names.trigger,
    durables=(Durable("scheduler", ack_wait=60.0),),
)
# Due work: the scheduler publishes what may be fetched now; the fetchers share it.
FETCH_WORK: Channel[FetchWork] = Channel(
    n.FETCH,
    FetchWork,
    lambda names: names.fetch,
    durables=(Durable("fetcher", ack_wait=60.0, max_ack_pending=4096),),
    legacy=LEGACY[FetchWork],
)
# Due work of sources that render (``render``): the renderers, browsers in their own service,
# share it. The same body and the same results as plain fetch work.
RENDER_WORK: Channel[FetchWork] = Channel(
    n.RENDER,
    FetchWork,
    lambda names: names.render,
    durables=(Durable("renderer", ack_wait=60.0, max_ack_pending=256),),
)
# Fetch results: the scheduler applies the outcome, the parser parses the stored payload.
FETCH_RESULTS: Channel[FetchResult] = Channel(
    n.FETCHED,
    FetchResult,
    lambda names: names.fetched,
    durables=(Durable("scheduler"), Durable("parser")),
    legacy=LEGACY[FetchResult],
)
# Parse results: the scheduler admits the links, the refresher applies the products.
PARSE_RESULTS: Channel[ParseResult] = Channel(
    n.PARSED,
    ParseResult,
    lambda names: names.parsed,
    durables=(Durable("scheduler"), Durable("refresher")),
    legacy=LEGACY[ParseResult],
)
# Job lifecycle: ``<ns>.events.job.<id>.<event>``; the refresher counts misses on completion.
JOB_EVENTS: Channel[JobEvent] = Channel(
    n.EVENTS,
    JobEvent,
    lambda names: names.job_events(),
    route=lambda names, event: names.job_event(event.job_id, event.event),
    durables=(Durable("refresher", ack_wait=60.0, only=lambda names: names.job_completed_any),),
)
# Product changes: ``<ns>.events.product.<source>.<kind>``, published by the refresher from its
# outbox (``product_events``); in the events stream, so any reader can replay them. The notifier
# turns them into alerts.
PRODUCT_CHANGES: Channel[ProductChange] = Channel(
    n.EVENTS,
    ProductChange,
    lambda names: names.product_changes(),
    route=lambda names, change: names.product_change(change.source, change.kind),
    durables=(Durable("notifier", ack_wait=60.0),),
)
# Dead letters: ``<ns>.dlq.<stream>``, written by every consumer, read by operators.
DEAD_LETTERS: Channel[DeadLetter] = Channel(
    n.DLQ,
    DeadLetter,
    lambda names: names.dlq_all,
    route=lambda names, letter: names.dlq(letter.stream),
)

CHANNELS: tuple[Channel[Any], ...] = (
    TRIGGERS,
    FETCH_WORK,
    RENDER_WORK,
    FETCH_RESULTS,
    PARSE_RESULTS,
    JOB_EVENTS,
    PRODUCT_CHANGES,
    DEAD_LETTERS,
)


def channels_of(service: str) -> list[tuple[Channel[Any], Durable]]:
    """The channels ``service`` consumes, with its durable of each."""
    return [
        (channel, durable)
        for channel in CHANNELS
        for durable in channel.durables
        if durable.service == service
    ]
