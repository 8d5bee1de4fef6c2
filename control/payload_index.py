"""Read side of stored pages and product history: the payload index (list, meta, latest for a
URL), a diff of two payloads of a page, and a job-to-job diff of a source.

Used by the CLI (``trawl payloads …``, ``trawl diff``) and the admin API; every function takes a
connection (and the store where bodies are needed) and returns JSON-ready dicts.
"""

from __future__ import annotations

import difflib
from decimal import Decimal
from typing import Any, cast

import msgspec

from schemas.messages import Product
from schemas.read import JobDiff, PayloadOut, PriceChange, StockChange
from schemas.source import Source
from services.refresher import store as refresher
from services.scheduler.store import Conn
from services.scheduler.store import jobs as job_records
from services.scheduler.store import payloads as payload_records
from shared.errors import TrawlError
from shared.payloads import PayloadStore
from shared.sources import source_from_dict

# Lines of unified diff returned at most: a rewritten page must not produce megabytes.
MAX_DIFF_LINES = 2000
# The product fields a payload diff compares: every field the parser extracts.
PRODUCT_DIFF_FIELDS = tuple(f.name for f in msgspec.structs.fields(Product))


class PayloadIndexError(TrawlError):
    """The payload or job is not known."""


def _record(payload: PayloadOut) -> dict[str, Any]:
    """A payload record as JSON-ready data."""
    out: dict[str, Any] = msgspec.to_builtins(payload)
    return out


async def list_payloads(
    conn: Conn,
    *,
    url: str | None = None,
    job_id: int | None = None,
    limit: int = 50,
    offset: int = 0,
) -> list[dict[str, Any]]:
    """Payload records, newest first, optionally of one URL and/or one job."""
    found = await payload_records.list_all(conn, url=url, job_id=job_id, limit=limit, offset=offset)
    return [_record(p) for p in found]


async def payload_meta(conn: Conn, ref: str) -> dict[str, Any] | None:
    """The latest record of a payload reference, with how often that body was fetched.

    Bodies are content-addressed, so one reference can stand for several fetches (of several
    URLs even); ``fetches`` counts them.
    """
    found = await payload_records.meta(conn, ref)
    if found is None:
        return None
    out = _record(found)
    out["fetches"] = await payload_records.fetches(conn, ref)
    return out


async def latest_payload(conn: Conn, url: str) -> dict[str, Any] | None:
    """The newest stored payload of a URL."""
    found = await payload_records.latest(conn, url)
    return _record(found) if found else None


async def recent_refs(conn: Conn, url: str, limit: int = 2) -> list[str]:
    """The URL's most recent distinct bodies, newest first (for "diff its last two")."""
    return await payload_records.recent_refs(conn, url, limit)


async def _job_source(conn: Conn, job_id: int | None) -> Source | None:
    if job_id is None:
        return None
    definition = await job_records.definition(conn, job_id)
    return source_from_dict(definition) if definition else None


async def _page(store: PayloadStore, conn: Conn, ref: str) -> dict[str, Any]:
    # The parser is imported here: only diffs need it, and listing payloads must stay light.
    from services.parser.decode import decode_html
    from services.parser.page import parse_page

    meta = await payload_meta(conn, ref)
    if meta is None:
        raise PayloadIndexError(f"payload {ref} not found")
    body = await store.get(ref)
    text = decode_html(body, meta["content_type"])
    parsed = parse_page(
        body,
        meta["url"],
        content_type=meta["content_type"],
        source=await _job_source(conn, meta["job_id"]),
    )
    product = msgspec.to_builtins(parsed.product) if parsed.product else None
    return {"meta": meta, "text": text, "product": product}


async def diff_payloads(store: PayloadStore, conn: Conn, ref_a: str, ref_b: str) -> dict[str, Any]:
    """Unified diff of two decoded pages and the product fields whose extraction differs."""
    a = await _page(store, conn, ref_a)
    b = await _page(store, conn, ref_b)
    lines = list(
        difflib.unified_diff(
            a["text"].splitlines(),
            b["text"].splitlines(),
            fromfile=f"{ref_a} ({a['meta']['fetched_at']})",
            tofile=f"{ref_b} ({b['meta']['fetched_at']})",
            lineterm="",
        )
    )
    pa, pb = a["product"] or {}, b["product"] or {}
    fields = {
        f: {"a": pa.get(f), "b": pb.get(f)} for f in PRODUCT_DIFF_FIELDS if pa.get(f) != pb.get(f)
    }
    return {
        "a": a["meta"],
        "b": b["meta"],
        "same_body": a["meta"]["sha256"] == b["meta"]["sha256"],
        "diff": "\n".join(lines[:MAX_DIFF_LINES]),
        "diff_truncated": len(lines) > MAX_DIFF_LINES,
        "product_a": a["product"],
        "product_b": b["product"],
        "product_changes": fields,
    }


def _changed(a: str | None, b: str | None) -> bool:
    # As numbers: a price stored as 10.50 once and 10.5 later did not change.
    return (None if a is None else Decimal(a)) != (None if b is None else Decimal(b))


async def diff_jobs(conn: refresher.Conn, source: str, job_a: int, job_b: int) -> dict[str, Any]:
    """What changed in a source's catalog between two of its jobs: products added (seen in B
    only), removed (seen in A only), and price and stock changes of products seen in both."""
    for job_id in (job_a, job_b):
        job = await refresher.job(conn, job_id)
        if job is None or job.source != source:
            raise PayloadIndexError(f"job {job_id} is not a job of source {source!r}")
    seen_a = await refresher.applied_keys(conn, job_a, source)
    seen_b = await refresher.applied_keys(conn, job_b, source)
    both = sorted(seen_a & seen_b)
    state_a = await refresher.states_as_of(conn, source, job_a, both)
    state_b = await refresher.states_as_of(conn, source, job_b, both)
    price_changes, stock_changes = [], []
    for key in both:
        a, b = state_a.get(key), state_b.get(key)
        if a is None or b is None:
            continue
        if _changed(a.price, b.price) or _changed(a.sale_price, b.sale_price):
            price_changes.append(
                PriceChange(
                    key=key,
                    price_a=a.price,
                    price_b=b.price,
                    sale_price_a=a.sale_price,
                    sale_price_b=b.sale_price,
                    currency=b.currency,
                )
            )
        if a.availability != b.availability:
            stock_changes.append(
                StockChange(key=key, availability_a=a.availability, availability_b=b.availability)
            )
    diff = JobDiff(
        source=source,
        job_a=job_a,
        job_b=job_b,
        seen_a=len(seen_a),
        seen_b=len(seen_b),
        added=sorted(seen_b - seen_a),
        removed=sorted(seen_a - seen_b),
        price_changes=price_changes,
        stock_changes=stock_changes,
    )
    return cast(dict[str, Any], msgspec.to_builtins(diff))
