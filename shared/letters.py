"""A dead letter built to fit: the one place that decides what of a failed message it keeps.

The letter must be publishable whatever the message was: the server refuses a payload over its
``max_payload`` (1 MB by default), and JetStream refuses a publish that carries another stream's
``Nats-Expected-Stream`` header. So the letter keeps the original's own headers but none of the
transport's (``Nats-*``: the publish expectations, the message id), caps the reason and the
headers, and cuts the body when the whole would not fit, saying so (``truncated``, ``size``)
and naming where the original was (``stream_seq`` in the ``stream`` it came from).
"""

from __future__ import annotations

import time

import msgspec
from nats.aio.msg import Msg

from schemas.messages import DeadLetter
from shared import names as n
from shared.bus import encode

TRANSPORT_PREFIX = "nats-"  # Nats-Msg-Id, Nats-Expected-Stream, Nats-Expected-Last-Sequence ...
MAX_REASON = 2000
MAX_HEADER_REASON = 500
MAX_HEADERS = 32
MAX_HEADER_VALUE = 1024
# Room left for what the publish adds (trace context) and the protocol's framing.
SLACK = 8 * 1024


def own_headers(headers: dict[str, str] | None) -> dict[str, str]:
    """The message's own headers, bounded: transport headers dropped, values capped."""
    kept: dict[str, str] = {}
    for key, value in (headers or {}).items():
        if key.lower().startswith(TRANSPORT_PREFIX):
            continue
        if len(kept) == MAX_HEADERS:
            break
        kept[key[:128]] = value[:MAX_HEADER_VALUE]
    return kept


def _sequence(msg: Msg) -> int | None:
    try:
        return msg.metadata.sequence.stream
    except Exception:  # not a JetStream delivery (a test's plain message): no position to name
        return None


def _delivered(msg: Msg) -> int:
    try:
        return msg.metadata.num_delivered
    except Exception:
        return 0


def dead_letter(
    msg: Msg, *, stream: str, reason: str, max_payload: int
) -> tuple[bytes, dict[str, str]]:
    """The encoded letter for ``msg`` and the headers to publish it with, together under
    ``max_payload`` bytes."""
    headers = own_headers(msg.headers)
    delivered = _delivered(msg)
    reason = reason.encode("utf-8", "replace").decode()  # a lone surrogate in an error text
    dlq_headers = dict(headers)
    dlq_headers.update(
        {
            n.DLQ_REASON: " ".join(reason[:MAX_HEADER_REASON].split()),  # no CR/LF in a header
            n.DLQ_STREAM: stream,
            n.DLQ_SUBJECT: msg.subject[:512],
            n.DLQ_DELIVERED: str(delivered),
        }
    )
    header_bytes = sum(len(k) + len(v.encode()) + 4 for k, v in dlq_headers.items())
    budget = max_payload - header_bytes - SLACK
    text = msg.data.decode("utf-8", "replace")
    letter = DeadLetter(
        stream=stream,
        subject=msg.subject,
        reason=reason[:MAX_REASON],
        num_delivered=delivered,
        headers=headers,
        at=time.time(),
        stream_seq=_sequence(msg),
        size=len(msg.data),
        data=text,
    )
    data = encode(letter)
    keep = len(text)
    while len(data) > budget and keep > 0:
        # A character takes 1 to 12 bytes once escaped: keep the share that fits at the
        # average so far, then check again (the envelope makes it overshoot a little).
        keep = min(keep - 1, keep * budget // len(data))
        data = encode(msgspec.structs.replace(letter, data=text[:keep], truncated=True))
    return data, dlq_headers
