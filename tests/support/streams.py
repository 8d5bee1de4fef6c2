"""Reading what landed on a stream without a consumer of our own.

Tests read dead letters by sequence (``STREAM.MSG.GET``) instead of through an ephemeral pull
consumer: an ephemeral consumer is one more moving part (it is deleted after 5 s without a
pull request), and a timeout then says nothing about whether the letters were ever written.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import msgspec
from nats.js import JetStreamContext

from schemas.messages import DeadLetter
from shared import names as n
from shared.names import Names
from tests.support.stack import eventually


async def dead_letters(
    js: JetStreamContext,
    names: Names,
    count: int,
    *,
    stream_key: str | None = None,
    timeout: float = 30.0,
    context: Callable[[], Awaitable[str]] | None = None,
) -> list[tuple[DeadLetter, dict[str, str]]]:
    """Wait until the DLQ holds at least ``count`` letters (of ``stream_key`` if given), and
    return them with their headers. On timeout the error carries ``context()``."""
    stream = names.stream(n.DLQ)
    subject = names.dlq(stream_key) if stream_key else None

    async def stored() -> int:
        info = await js.stream_info(stream)
        return info.state.messages

    try:
        await eventually(
            lambda: _at_least(stored, count), timeout=timeout, what=f"{count} dead letters"
        )
    except AssertionError as exc:
        detail = await context() if context else ""
        raise AssertionError(f"{exc}; the DLQ holds {await stored()}. {detail}") from exc
    info = await js.stream_info(stream)
    letters: list[tuple[DeadLetter, dict[str, str]]] = []
    for seq in range(info.state.first_seq, info.state.last_seq + 1):
        raw = await js.get_msg(stream, seq)
        if subject is None or raw.subject == subject:
            letters.append((msgspec.json.decode(raw.data, type=DeadLetter), raw.headers or {}))
    return letters


async def _at_least(stored: Callable[[], Awaitable[int]], count: int) -> bool:
    return await stored() >= count
