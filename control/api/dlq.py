"""Dead letters: list, inspect, requeue (the original body and headers, to the original
subject), delete one, purge.

The DLQ is the ``<ns>_dlq`` stream; a letter's id is its stream sequence.
"""

from __future__ import annotations

from typing import Any

import msgspec
import nats.js.errors
from aiohttp import web

from control.api.problems import Problem
from control.api.routes import (
    ID,
    PAGING,
    Param,
    Route,
    paging,
    path_id,
    query_str,
    read_body,
    respond,
    rt_of,
)
from schemas.messages import DeadLetter
from schemas.read import Page
from services.scheduler.operations import NotFound
from shared import names as n
from shared.bus import publish
from shared.nesting import TooComplex, check_depth
from shared.service import Runtime

_decoder = msgspec.json.Decoder(DeadLetter)
# Stream keys a letter can come from (the DLQ subject suffix).
KEYS = [n.TRIGGER, n.FETCH, n.RENDER, n.FETCHED, n.PARSED, n.EVENTS]
# Scanning for a page of letters stops after this many sequences (deleted ones leave gaps).
SCAN_LIMIT = 20000


class Letter(msgspec.Struct, kw_only=True):
    seq: int
    stream: str
    subject: str
    reason: str
    num_delivered: int
    at: float
    headers: dict[str, str]
    data: str
    body: Any = None  # the original body decoded as JSON when it is JSON
    stream_seq: int | None = None  # the original's sequence in its stream
    size: int = 0  # the original body's size in bytes
    truncated: bool = False  # ``data`` is only the start of the body (the letter had to fit)


class Requeued(msgspec.Struct, kw_only=True):
    seq: int
    subject: str


class PurgeIn(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    stream: str | None = None  # only letters from this stream key


class Purged(msgspec.Struct, kw_only=True):
    purged: int


def _letter(seq: int, raw: bytes) -> Letter:
    try:
        dl = _decoder.decode(raw)
    except (msgspec.DecodeError, msgspec.ValidationError, RecursionError):
        return Letter(
            seq=seq,
            stream="?",
            subject="?",
            reason="undecodable letter",
            num_delivered=0,
            at=0.0,
            headers={},
            data=raw.decode("utf-8", "replace"),
        )
    try:
        body = msgspec.json.decode(dl.data)
        # A poison letter may nest deeper than the response encoder (or a browser) can take:
        # show it as text only (``data``), so one letter cannot break the whole list.
        check_depth(body)
    except (msgspec.DecodeError, RecursionError, TooComplex):
        body = None
    return Letter(
        seq=seq,
        stream=dl.stream,
        subject=dl.subject,
        reason=dl.reason,
        num_delivered=dl.num_delivered,
        at=dl.at,
        headers=dl.headers,
        data=dl.data,
        body=body,
        stream_seq=dl.stream_seq,
        size=dl.size,
        truncated=dl.truncated,
    )


async def _get(rt: Runtime, seq: int) -> Letter:
    try:
        raw = await rt.js.get_msg(rt.names.stream(n.DLQ), seq)
    except nats.js.errors.APIError:
        # Not found, or a sequence past the end ("stream store EOF", a 500 from the server).
        raise NotFound(f"dead letter {seq} not found") from None
    return _letter(seq, raw.data or b"")


async def list_letters(request: web.Request) -> web.Response:
    """Newest first; ``stream`` filters by the stream the letter came from."""
    rt = rt_of(request)
    limit, offset = paging(request)
    key = query_str(request, "stream")
    stream = rt.names.stream(n.DLQ)
    info = await rt.js.stream_info(stream)
    items: list[Letter] = []
    skipped = 0
    seq, scanned = info.state.last_seq, 0
    while seq >= max(1, info.state.first_seq) and len(items) < limit and scanned < SCAN_LIMIT:
        scanned += 1
        try:
            raw = await rt.js.get_msg(stream, seq)
        except nats.js.errors.APIError:
            seq -= 1
            continue
        seq -= 1
        if key and raw.subject != rt.names.dlq(key):
            continue
        if skipped < offset:
            skipped += 1
            continue
        items.append(_letter(raw.seq or seq + 1, raw.data or b""))
    # total: letters in the DLQ (all streams)
    return respond(Page(items=items, total=info.state.messages, limit=limit, offset=offset))


async def get_letter(request: web.Request) -> web.Response:
    rt = rt_of(request)
    return respond(await _get(rt, path_id(request, "seq")))


async def requeue(request: web.Request) -> web.Response:
    rt = rt_of(request)
    seq = path_id(request, "seq")
    letter = await _get(rt, seq)
    if letter.stream not in KEYS or not rt.names.owns(letter.subject):
        raise Problem(409, "Conflict", f"letter {seq} has no known origin ({letter.subject})")
    if letter.truncated:
        raise Problem(
            409,
            "Conflict",
            f"letter {seq} holds only the start of a {letter.size}-byte body: not requeued",
        )
    # The original msg id would be swallowed by the stream's duplicate window: use a new one
    # per letter, so requeueing the same letter twice still publishes once.
    headers = {k: v for k, v in letter.headers.items() if k != n.MSG_ID}
    if letter.stream == n.TRIGGER:
        # The trigger stream does not ack publishes (docs/architecture.md "Triggers").
        await rt.nc.publish(letter.subject, letter.data.encode(), headers=headers or None)
        await rt.nc.flush()
    else:
        await publish(
            rt.js,
            letter.subject,
            letter.data.encode(),
            msg_id=f"requeue-dlq-{seq}",
            headers=headers,
        )
    await rt.js.delete_msg(rt.names.stream(n.DLQ), seq)
    return respond(Requeued(seq=seq, subject=letter.subject))


async def delete_letter(request: web.Request) -> web.Response:
    rt = rt_of(request)
    seq = path_id(request, "seq")
    try:
        await rt.js.delete_msg(rt.names.stream(n.DLQ), seq)
    except nats.js.errors.APIError:
        raise NotFound(f"dead letter {seq} not found") from None
    return respond(None)


async def purge(request: web.Request) -> web.Response:
    rt = rt_of(request)
    body: PurgeIn = await read_body(request, PurgeIn, optional=True) or PurgeIn()
    stream = rt.names.stream(n.DLQ)
    if body.stream is not None and body.stream not in KEYS:
        raise Problem(422, "Unprocessable Content", f"stream: one of {', '.join(KEYS)}")
    before = (await rt.js.stream_info(stream)).state.messages
    subject = rt.names.dlq(body.stream) if body.stream else None
    await rt.js.purge_stream(stream, subject=subject)
    after = (await rt.js.stream_info(stream)).state.messages
    return respond(Purged(purged=before - after))


_SEQ = (Param("seq", ID, "the letter's DLQ stream sequence", True, "path"),)

ROUTES = [
    Route(
        "GET",
        "/api/dlq",
        list_letters,
        "Dead letters, newest first",
        "dlq",
        params=(Param("stream", {"type": "string", "enum": KEYS}), *PAGING),
        response=Page[Letter],
        errors=(400,),
    ),
    Route(
        "POST",
        "/api/dlq/purge",
        purge,
        "Delete every dead letter (or one stream's)",
        "dlq",
        body=PurgeIn,
        body_required=False,
        response=Purged,
        errors=(400, 422),
    ),
    Route(
        "GET",
        "/api/dlq/{seq}",
        get_letter,
        "One dead letter",
        "dlq",
        params=_SEQ,
        response=Letter,
        errors=(404,),
    ),
    Route(
        "POST",
        "/api/dlq/{seq}/requeue",
        requeue,
        "Republish the original message to its subject",
        "dlq",
        params=_SEQ,
        response=Requeued,
        errors=(404, 409),
    ),
    Route(
        "DELETE",
        "/api/dlq/{seq}",
        delete_letter,
        "Delete one dead letter",
        "dlq",
        params=_SEQ,
        errors=(404,),
    ),
]
