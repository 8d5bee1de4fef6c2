"""Hand-made messages on the real subjects, for the poison and duplicate tests: a job whose
work nobody fetches (no fetcher runs), and results for its entries as a fetcher would send."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import asyncpg
import msgspec
from nats.aio.client import Client

from schemas.messages import Attempt, FetchResult, JobEvent, ParseResult, Product, Trigger
from services.scheduler.catalog import save_source
from shared import names as n
from shared.bus import encode
from shared.names import Names
from shared.payloads import JetStreamPayloadStore
from shared.sources import source_from_dict
from tests.support.stack import eventually

SOURCE = {
    "name": "shop",
    "seeds": ["http://127.0.0.2:9/p/anvil", "http://127.0.0.2:9/p/bellows"],
    "allow_private": True,
    "robots": "ignore",
    "pacing": {"profile": "fast"},
}
# Only the scheduler and the refresher: the hand-made results are the only ones.
SCALE = "fetcher=0,parser=0"


def product_page(sku: str, name: str, price: str) -> bytes:
    ld = {
        "@context": "https://schema.org",
        "@type": "Product",
        "sku": sku,
        "name": name,
        "offers": {
            "@type": "Offer",
            "price": price,
            "priceCurrency": "EUR",
            "availability": "https://schema.org/InStock",
        },
    }
    return (
        f'<html><head><script type="application/ld+json">{json.dumps(ld)}</script></head>'
        f'<body><h1>{name}</h1><a href="/p/{sku.lower()}-related">related</a></body></html>'
    ).encode()


async def save_shop(pool: asyncpg.Pool) -> None:
    async with pool.acquire() as conn:
        await save_source(conn, source_from_dict(SOURCE))


async def dispatched_entries(pool: asyncpg.Pool, job_id: int, count: int) -> list[asyncpg.Record]:
    """The job's first entries, once the scheduler has dispatched them."""
    rows: list[asyncpg.Record] = []

    async def dispatched() -> bool:
        nonlocal rows
        async with pool.acquire() as conn:
            rows = await conn.fetch(
                "SELECT id, url, attempts, kind, depth FROM entries "
                "WHERE job_id = $1 AND state = 'dispatched' ORDER BY id",
                job_id,
            )
        return len(rows) >= count

    await eventually(dispatched, timeout=30, what=f"{count} dispatched entries")
    return rows[:count]


async def ok_result(
    nc: Client, names: Names, job_id: int, entry: asyncpg.Record, body: bytes
) -> FetchResult:
    """A successful fetch of ``entry`` whose body is stored like a fetcher stores it."""
    stored = await JetStreamPayloadStore(nc.jetstream(), names).put(body)
    return FetchResult(
        attempt=Attempt(
            job_id=job_id,
            entry_id=entry["id"],
            source="shop",
            url=entry["url"],
            kind=entry["kind"],
            depth=entry["depth"],
            number=entry["attempts"],
        ),
        outcome="ok",
        status=200,
        payload_ref=stored.ref,
        content_type="text/html",
        charset="utf-8",
        size=len(body),
        started_at=1.0,
        elapsed_ms=5.0,
    )


async def consumers_idle(nc: Client, names: Names, *durables: tuple[str, str]) -> None:
    """Until every (stream key, durable) consumer has nothing pending and nothing unacked."""
    js = nc.jetstream()

    async def idle() -> bool:
        for key, durable in durables:
            info = await js.consumer_info(names.stream(key), durable)
            if info.num_pending or info.num_ack_pending:
                return False
        return True

    await eventually(idle, timeout=60, what=f"consumers {durables} to be idle")


DLQ = n.DLQ


# -- the poison corpus (issue 17) ----------------------------------------------------------------
# Every subject a service consumes, with how many durable consumers read it: each of them must
# dead-letter a poison message once.
READERS = {n.TRIGGER: 1, n.FETCH: 1, n.FETCHED: 2, n.PARSED: 2, n.EVENTS: 1}


@dataclass(frozen=True)
class PoisonMessage:
    name: str
    stream_key: str  # the stream its subject belongs to (a letter names it)
    subject: str
    body: bytes
    headers: dict[str, str]
    letters: int  # how many letters it must make: one per consumer that refuses it
    reason: str  # a part of every one of its letters' reasons


def _subjects(names: Names) -> dict[str, str]:
    return {
        n.TRIGGER: names.trigger,
        n.FETCH: names.fetch,
        n.FETCHED: names.fetched,
        n.PARSED: names.parsed,
        n.EVENTS: names.job_event(0, "completed"),
    }


MALFORMED: dict[str, bytes] = {
    "deep nesting": b'{"x": ' + b"[" * 20_000,  # msgspec: RecursionError
    "invalid UTF-8": b'{"type": "caf\xff\xfe", "source": "caf\xc3\x28"}',  # UnicodeDecodeError
    "oversize": b'{"x": "' + b"\x01" * 900_000 + b'"',  # its letter must be cut to fit
    "empty": b"",
    "not JSON": b"\xff{not json",
    "NUL bytes": b"\x00\x00\x00",
    "an array": b"[1, 2, 3]",
    "null": b"null",
    "a huge integer": b'{"v": 1' + b"0" * 400 + b"}",
    "wrong types": b'{"v": "one", "source": 7, "attempt": [], "job_id": {}}',
}


def malformed_corpus(names: Names) -> list[PoisonMessage]:
    """Bodies no decoder reads, on every subject, and one with transport headers (a letter that
    copied ``Nats-Expected-Stream`` was refused by the DLQ stream)."""
    out = []
    for key, subject in _subjects(names).items():
        for name, body in MALFORMED.items():
            out.append(
                PoisonMessage(
                    f"{key}: {name}", key, subject, body, {}, READERS[key], "malformed message"
                )
            )
        transport = {"Nats-Expected-Stream": names.stream(key), "Nats-Msg-Id": f"poison-{key}"}
        out.append(
            PoisonMessage(
                f"{key}: transport headers",
                key,
                subject,
                b"{not json",
                transport,
                READERS[key],
                "malformed message",
            )
        )
    return out


def forged_corpus(
    names: Names, job_id: int, source: str, entry: asyncpg.Record
) -> list[PoisonMessage]:
    """Well-formed messages whose claims the database refutes, against a running job: results
    for jobs and entries that do not exist, for an attempt never dispatched, a replay, and
    ``completed`` events for a job that is not completed, or not of that source or kind."""
    real = Attempt(
        job_id=job_id,
        entry_id=entry["id"],
        source=source,
        url=entry["url"],
        kind=entry["kind"],
        depth=entry["depth"],
        number=1,
    )
    nowhere = Attempt(job_id=999_999_999, entry_id=999_999_999, source=source, url=real.url)
    product = Product(key="FORGED-1", name="Forged", price="0.01", currency="EUR")

    def gone(attempt: Attempt) -> bytes:  # nothing to parse: only the scheduler reads it
        return encode(FetchResult(attempt=attempt, outcome="gone", status=404))

    def parsed(attempt: Attempt) -> bytes:
        return encode(ParseResult(attempt=attempt, product=product))

    def completed(**claims: Any) -> bytes:
        event = {"job_id": job_id, "source": source, "event": "completed", "status": "completed"}
        return encode(JobEvent(**{**event, **claims}))

    other_job = msgspec.structs.replace(real, job_id=999_999_999)
    cases = [
        ("fetched: unknown entry", n.FETCHED, gone(nowhere), 1, "no entry 999999999"),
        ("fetched: another job's entry", n.FETCHED, gone(other_job), 1, "forged result"),
        ("parsed: unknown job", n.PARSED, parsed(nowhere), 2, "999999999"),
        (
            "parsed: attempt never dispatched",
            n.PARSED,
            parsed(msgspec.structs.replace(real, number=99)),
            2,
            "attempt 99 of entry",
        ),
        (
            "parsed: a replay",
            n.PARSED,
            parsed(msgspec.structs.replace(real, replay="forged")),
            2,
            "replays are applied in-process",
        ),
        ("trigger: unknown source", n.TRIGGER, encode(Trigger(source="no-such")), 1, "unknown"),
        ("trigger: NUL in source", n.TRIGGER, encode(Trigger(source="a\x00b")), 1, "trigger"),
    ]
    out = [
        PoisonMessage(name, key, _subjects(names)[key], body, {}, letters, reason)
        for name, key, body, letters, reason in cases
    ]
    events = [
        ("completed: unknown job", completed(job_id=999_999_999), "no job 999999999"),
        ("completed: running job, other kind", completed(kind="refresh"), "forged job event"),
        ("completed: running job", completed(), "forged job event"),
        ("completed: other source", completed(source="elsewhere"), "forged job event"),
    ]
    for name, body, reason in events:
        event = msgspec.json.decode(body, type=JobEvent)
        subject = names.job_event(event.job_id, "completed")
        out.append(PoisonMessage(name, n.EVENTS, subject, body, {}, 1, reason))
    return out
