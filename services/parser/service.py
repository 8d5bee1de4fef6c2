"""Parser: fetch results → stored payload → product + classified links → parse result."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Coroutine
from typing import Any

import msgspec
import nats.js.errors
from nats.js.kv import KeyValue

from schemas.messages import FetchResult, ParseResult, Product
from schemas.source import Source
from services.parser.formats import parse_payload
from services.parser.page import EXTRACTOR_ERRORS
from shared.bus import Unpublishable, send
from shared.channels import FETCH_RESULTS, PARSE_RESULTS
from shared.consumer import Delivery
from shared.errors import Retry
from shared.lru import LRU
from shared.metrics import Metrics
from shared.payloads import JetStreamPayloadStore, PayloadNotFound
from shared.service import Runtime
from shared.sources import source_from_dict
from shared.wire import clean, scrubbed

log = logging.getLogger("trawl.parser")

PARSEABLE = ("ok", "not_modified")
# Fetch results pulled and handled as one group, at most: with the default 64 in flight two
# groups overlap (one's payloads are read while the other's pages are parsed). 32 pages of
# 45 KB parse in ~40 ms; a group of large real pages (~15 ms each) in under a second.
GROUP = 32


class JobSourceCache:
    """Job id → source definition, read from the KV bucket the scheduler fills at job start."""

    def __init__(self, rt: Runtime, size: int = 256) -> None:
        self.rt = rt
        self._cache: LRU[int, Source] = LRU(size)
        self._kv: KeyValue | None = None

    async def get(self, job_id: int) -> Source:
        hit = self._cache.get(job_id)
        if hit is not None:
            return hit
        if self._kv is None:
            self._kv = await self.rt.js.key_value(self.rt.names.sources_bucket)
        try:
            entry = await self._kv.get(f"job.{job_id}")
        except nats.js.errors.KeyNotFoundError as exc:
            raise Retry(f"source of job {job_id} not published yet", delay=1.0) from exc
        source = source_from_dict(msgspec.json.decode(entry.value or b"{}"))
        self._cache.put(job_id, source)
        return source


MAX_FIELD = 4096  # characters of a product's text field: a longer one is a page's accident


def _safe_text(value: str) -> str:
    return value[:MAX_FIELD].replace("\x00", "")


def _unsafe(value: object) -> bool:
    """A text field PostgreSQL cannot store (a NUL) or too long to be data (a 2 MB name made a
    result over the max payload); a map of text with such a key or value."""
    if isinstance(value, str):
        return len(value) > MAX_FIELD or "\x00" in value
    if isinstance(value, dict):
        return any(_unsafe(k) or _unsafe(v) for k, v in value.items())
    return False


def capped(product: Product) -> Product:
    """``product`` with every text field cut at ``MAX_FIELD`` characters and without NULs. One
    pass over its fields; a copy only when one needs it."""
    fixes: dict[str, object] = {}
    for name, value in zip(
        product.__struct_fields__, msgspec.structs.astuple(product), strict=True
    ):
        if not _unsafe(value):
            continue
        if isinstance(value, str):
            fixes[name] = _safe_text(value)
        else:
            fixes[name] = {_safe_text(k): _safe_text(v) for k, v in value.items()}
    return msgspec.structs.replace(product, **fixes) if fixes else product


class Counts:
    """The parser's own counters: shown in its stats (the keys) and served on /metrics."""

    def __init__(self, metrics: Metrics) -> None:
        count = metrics.counter
        self.pages = count("trawl.parser.pages", "Pages parsed.", unit="{page}", stat="parsed")
        self.products = count(
            "trawl.parser.products",
            "Products found on parsed pages.",
            unit="{product}",
            stat="products",
        )
        self.errors = count(
            "trawl.parser.errors",
            "Pages that could not be parsed (payload missing, or the parser failed).",
            unit="{page}",
            stat="parse_errors",
        )
        self.extractor_errors = metrics.register(EXTRACTOR_ERRORS, stat="extractor_errors")
        self.unpublishable = count(
            "trawl.parser.unpublishable",
            "Parse results that could not be published as built (scrubbed, or sent as failed).",
            unit="{page}",
            stat="unpublishable",
        )


class Parser:
    def __init__(self, rt: Runtime) -> None:
        self.rt = rt
        self.store = JetStreamPayloadStore(rt.js, rt.names)
        self.sources = JobSourceCache(rt)
        self.counts = Counts(rt.metrics)

    async def on_fetched_group(self, group: list[Delivery[FetchResult]]) -> None:
        """A pulled group of fetch results: their payloads read at once, the pages parsed back
        to back, and the results published at once, each on its own message's trace.

        Published together, results reach the scheduler and the refresher in groups too,
        which apply a group in one transaction (the measurements: docs/architecture.md, "The
        service around the parse"). A group that fails is handled again one message at a time
        (``BatchConsumer``); results published twice are one (their ``msg_id``)."""
        work = [d for d in group if d.body.outcome in PARSEABLE]  # others: the scheduler's
        sources = [await self.sources.get(d.body.attempt.job_id) for d in work]
        bodies = await asyncio.gather(*(self._payload(d.body) for d in work))
        results = []
        for d, source, body in zip(work, sources, bodies, strict=True):
            with d.traced():  # its logs carry the page's trace id
                results.append(self._result(d.body, source, body))
        await asyncio.gather(
            *(self._publish_traced(d, r) for d, r in zip(work, results, strict=True))
        )

    async def _publish_traced(self, d: Delivery[FetchResult], result: ParseResult) -> None:
        with d.traced():
            await self.publish(result)

    async def publish(self, result: ParseResult) -> None:
        """Publish the page's result; one that cannot be (a lone surrogate from JSON-LD, over
        the max payload) goes again scrubbed (``shared.wire``), and if even that is refused,
        as a failed result that says why: the entry must end, not wait for ever."""
        msg_id = f"parsed-{result.attempt.id}"
        js, names = self.rt.js, self.rt.names
        try:
            await send(js, names, PARSE_RESULTS, result, msg_id=msg_id)
            return
        except Unpublishable as exc:
            first = exc
        log.warning(
            "parse result unpublishable, scrubbing it",
            extra={"action": "result_scrubbed", "url": result.attempt.url, "error": str(first)},
        )
        self.counts.unpublishable.add()
        try:
            await send(
                js, names, PARSE_RESULTS, scrubbed(result, limit=1024, items=500), msg_id=msg_id
            )
            return
        except Unpublishable as exc:
            reason = f"result not publishable: {exc}"
        failed = ParseResult(
            attempt=result.attempt,
            payload_ref=result.payload_ref,
            not_modified=result.not_modified,
            error=clean(reason, 1000),
            failed=True,
        )
        await send(js, names, PARSE_RESULTS, failed, msg_id=msg_id)

    async def _payload(self, fetched: FetchResult) -> bytes | PayloadNotFound | None:
        """The stored body to parse; None when there is none to read, the error when it is
        gone (the page's result then says so)."""
        attempt = fetched.attempt
        # A 304 is parsed from the payload stored last time, so its links are still followed.
        not_modified = fetched.outcome == "not_modified"
        ref = attempt.previous_payload_ref if not_modified else fetched.payload_ref
        if not ref or attempt.kind == "image":  # an image is stored, never read back here
            return None
        try:
            return await self.store.get(ref)
        except PayloadNotFound as exc:
            return exc

    def _result(
        self, fetched: FetchResult, source: Source, body: bytes | PayloadNotFound | None
    ) -> ParseResult:
        attempt = fetched.attempt
        base: dict[str, Any] = {"attempt": attempt, "payload_ref": fetched.payload_ref}
        not_modified = fetched.outcome == "not_modified"
        if body is None:
            return ParseResult(**base, not_modified=not_modified)
        if isinstance(body, PayloadNotFound):
            self.counts.errors.add()
            return ParseResult(**base, not_modified=not_modified, error=clean(str(body), 2000))
        content_type = fetched.content_type
        if content_type and fetched.charset:
            content_type = f"{content_type}; charset={fetched.charset}"
        try:
            page = parse_payload(
                body,
                fetched.final_url or attempt.url,
                content_type=content_type,
                source=source,
                kind=attempt.kind,
                request=attempt.request,
                keyword=attempt.keyword,
            )
        except Exception as exc:
            self.counts.errors.add()
            log.warning(
                "parse failed",
                extra={"action": "parse_error", "url": attempt.url, "error": repr(exc)},
            )
            return ParseResult(**base, error=clean(f"{type(exc).__name__}: {exc}", 2000))
        self.counts.pages.add()
        self.counts.products.add(len(page.products) + (page.product is not None))
        return ParseResult(
            **base,
            product=capped(page.product) if page.product is not None else None,
            products=[capped(p) for p in page.products],
            # A NUL in a URL would fail the scheduler's insert of the whole page's links.
            links=[link for link in page.links if "\x00" not in link.url],
            not_modified=not_modified,
            error=clean(page.error, 2000) if page.error else None,
        )


def _span_attrs(fetched: FetchResult) -> dict[str, Any]:
    return {
        "url.full": fetched.attempt.url,
        "trawl.outcome": fetched.outcome,
        "trawl.job_id": fetched.attempt.job_id,
    }


async def start(rt: Runtime) -> list[Coroutine[Any, Any, None]]:
    parser = Parser(rt)
    consumer = rt.batch_consumer(
        FETCH_RESULTS,
        parser.on_fetched_group,
        concurrency=rt.settings.concurrency,
        batch=GROUP,
        span_attrs=_span_attrs,
    )
    return [consumer.run()]
