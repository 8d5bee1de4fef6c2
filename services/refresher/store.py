"""The refresher's store: the only module that runs its queries (``queries.sql``).

The refresher owns ``products``, ``snapshots``, ``applied_results`` and ``miss_counts``; of the
frontier it reads only the views the scheduler keeps for other owners (``frontier_jobs``,
``frontier_job_pages``, ``frontier_payloads``, ``frontier_stored_copies``). Product column
lists come from the ``Product`` Struct (``columns.py``). The logic stays with its callers:
batching and snapshots in ``products.py``, the miss rules in ``misses.py``, image links in
``images.py``, replay in ``control/replay.py``; the API, the CLI and the job diff read products
here as the one read model (``schemas.read.ProductOut``).

Every function takes a connection, so a caller can run several in one transaction.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from pathlib import Path
from typing import Any, TypeAlias

import asyncpg
import msgspec
from asyncpg.pool import PoolConnectionProxy

from schemas.messages import LinkKind, ProductChange
from schemas.read import (
    HistoryPoint,
    MatchGroup,
    Page,
    ProductDetail,
    ProductOut,
    SnapshotOut,
)
from services.refresher import columns
from shared.errors import TrawlError
from shared.sql import Queries

Conn: TypeAlias = "asyncpg.Connection | PoolConnectionProxy"

_FRAGMENT = re.compile(r"\{([a-z_]+)\}")


class StoreError(TrawlError):
    """The refresher's store cannot run a query."""


class NoStagingTables(StoreError):
    """This database session has no staging tables yet (a new session, or DISCARD TEMP)."""


def _render(sql: str, fragments: Mapping[str, str]) -> str:
    """Fill the ``{name}`` fragments ``fragments`` has; the others stay for a later pass."""
    return _FRAGMENT.sub(lambda m: fragments.get(m[1], m[0]), sql)


def _uncommented(sql: str) -> str:
    return "\n".join(line for line in sql.splitlines() if not line.lstrip().startswith("--"))


_FILE = Queries(Path(__file__).with_name("queries.sql"))
# view_filter is no query but the product list's WHERE clause, written once for its five.
_FRAGMENTS = {**columns.FRAGMENTS, "view_filter": _uncommented(_FILE["view_filter"])}
_Q: dict[str, str] = {
    name: _render(sql, _FRAGMENTS) for name, sql in _FILE.items() if name != "view_filter"
}
# The two upserts cast staged values to the products columns' types, read from the catalog
# on first use (once per process: the schema does not change under a running service).
_CAST = ("upsert_products", "replay_products")
_cast: dict[str, str] = {}


async def _cast_queries(conn: Conn) -> dict[str, str]:
    if not _cast:
        types = {r["name"]: r["type"] for r in await conn.fetch(_Q["product_column_types"])}
        staged = {"staged_products": columns.staged_products(types)}
        _cast.update({name: _render(_Q[name], staged) for name in _CAST})
    return _cast


async def all_queries(conn: Conn) -> dict[str, str]:
    """Every named query as it runs, fragments filled (for the test that prepares them)."""
    return {**_Q, **await _cast_queries(conn)}


# -- applying parse results (products.py) -------------------------------------------------------
async def create_staging(conn: Conn) -> None:
    """The session's staging tables (temporary: they outlive a transaction, not the session)."""
    for name in ("create_staged_results", "create_staged_products", "create_staged_snapshots"):
        await conn.execute(_Q[name])


async def record_results(
    conn: Conn, records: Sequence[tuple[str, int, str, str | None, str | None, str | None]]
) -> set[str]:
    """Record (attempt id, job, source, product key, 304 URL, unknown page URL) rows; returns
    the attempt ids that are new (the others were applied before)."""
    try:
        await conn.copy_records_to_table("refresher_results", records=records)
    except asyncpg.UndefinedTableError as exc:
        raise NoStagingTables() from exc
    return {row[0] for row in await conn.fetch(_Q["record_results"])}


async def lock_products(
    conn: Conn, keys: Sequence[tuple[str, str]]
) -> dict[tuple[str, str], asyncpg.Record]:
    """The stored rows of these (source, key) products, locked, with a ``missed`` flag."""
    rows = await conn.fetch(_Q["lock_products"], [k[0] for k in keys], [k[1] for k in keys])
    return {(row["source"], row["key"]): row for row in rows}


async def upsert_products(conn: Conn, rows: Sequence[tuple[Any, ...]], *, replay: bool) -> None:
    """Write staged product rows (``columns.STAGED_COLUMNS`` order), in key order."""
    await conn.copy_records_to_table("refresher_products", records=rows)
    queries = await _cast_queries(conn)
    await conn.execute(queries["replay_products" if replay else "upsert_products"])


async def insert_snapshots(conn: Conn, rows: Sequence[tuple[Any, ...]]) -> None:
    """(source, key, job, price, sale price, currency, availability, price lists) rows."""
    await conn.copy_records_to_table("refresher_snapshots", records=rows)
    await conn.execute(_Q["insert_snapshots"])


async def seen_by_url(conn: Conn, sightings: Sequence[tuple[str, str, int]]) -> None:
    """(source, URL, job): the products of a 304 page that could not be re-parsed are seen."""
    await conn.execute(
        _Q["seen_by_url"],
        [s[0] for s in sightings],
        [s[1] for s in sightings],
        [s[2] for s in sightings],
    )


async def count_applied_products(conn: Conn, job_id: int) -> int:
    return int(await conn.fetchval(_Q["count_applied_products"], job_id))


async def job_products_found(conn: Conn, job_id: int) -> int:
    """The products the scheduler counted on the job's pages."""
    return int(await conn.fetchval(_Q["job_products_found"], job_id))


@dataclass(frozen=True)
class Claimed:
    """What the frontier knows of a claimed attempt's entry: its job's source and its attempts
    so far; ``None`` when no entry of the claimed job has the claimed id and URL."""

    source: str | None
    attempts: int | None


async def claimed_attempts(conn: Conn, claims: Sequence[tuple[int, int, str]]) -> list[Claimed]:
    """For each (entry id, job id, url) claimed, in order, what the frontier holds."""
    rows = await conn.fetch(
        _Q["claimed_attempts"],
        [c[0] for c in claims],
        [c[1] for c in claims],
        [c[2] for c in claims],
    )
    return [Claimed(r["source"], r["attempts"]) for r in rows]


# -- product change events (changes.py) -------------------------------------------------------
def _event(row: asyncpg.Record) -> ProductChange:
    return msgspec.convert(dict(row), ProductChange)


async def insert_events(conn: Conn, rows: Sequence[tuple[Any, ...]]) -> list[ProductChange]:
    """Record (source, key, variant, job, kind, url, before, after, direction, percent, gtin,
    verification, verify trigger, verify url) rows (``changes.Change.row``); returns the events
    that are new, in id order (pending candidates among them)."""
    if not rows:
        return []
    columns = [list(c) for c in zip(*rows, strict=True)]
    inserted = [_event(r) for r in await conn.fetch(_Q["insert_events"], *columns)]
    return sorted(inserted, key=lambda e: e.id)


async def mark_events_published(conn: Conn, ids: Sequence[int]) -> None:
    if ids:
        await conn.execute(_Q["mark_events_published"], list(ids))


async def unpublished_events(conn: Conn, older_than: float, limit: int) -> list[ProductChange]:
    """Events recorded over ``older_than`` seconds ago and not published, locked (run it in a
    transaction)."""
    return [_event(r) for r in await conn.fetch(_Q["unpublished_events"], older_than, limit)]


@dataclass(frozen=True)
class ChangeFilter:
    """What ``trawl changes`` and /api/changes ask; None asks nothing. ``verification``: the
    candidates in these states (``pending``, ``confirmed``, ``cancelled``, ``unknown``) instead
    of the emitted events."""

    source: str | None = None
    since: datetime | None = None
    kinds: list[str] | None = None
    verification: list[str] | None = None


# -- verification (verification.py) --------------------------------------------------------------
async def confirm_candidates(conn: Conn, rows: Sequence[tuple[Any, ...]]) -> list[ProductChange]:
    """(source, key, variant, kind, after, direction, percent, verify job) of a verify job's
    changes: the pending candidates they confirm, now confirmed, in id order."""
    if not rows:
        return []
    columns = [list(c) for c in zip(*rows, strict=True)]
    confirmed = [_event(r) for r in await conn.fetch(_Q["confirm_candidates"], *columns)]
    return sorted(confirmed, key=lambda e: e.id)


@dataclass(frozen=True)
class Recheck:
    """A verify trigger: its id, its source and the pages it asks to re-fetch."""

    trigger_id: str
    source: str
    urls: tuple[str, ...]


def _recheck(row: asyncpg.Record) -> Recheck:
    return Recheck(row["verify_trigger"], row["source"], tuple(row["urls"]))


async def candidate_rechecks(conn: Conn, trigger_ids: Sequence[str]) -> list[Recheck]:
    if not trigger_ids:
        return []
    return [_recheck(r) for r in await conn.fetch(_Q["candidate_rechecks"], list(trigger_ids))]


async def unlinked_rechecks(conn: Conn, older_than: float, limit: int) -> list[Recheck]:
    return [_recheck(r) for r in await conn.fetch(_Q["unlinked_rechecks"], older_than, limit)]


async def link_verify_job(conn: Conn, trigger_id: str, job_id: int) -> None:
    await conn.execute(_Q["link_verify_job"], trigger_id, job_id)


async def refused_recheck(conn: Conn, trigger_id: str) -> int:
    """The trigger's candidates that the scheduler refused to verify, now unknown; how many."""
    return _updated(await conn.execute(_Q["refused_recheck"], trigger_id))


async def abandon_unlinked(conn: Conn, older_than: float) -> int:
    return _updated(await conn.execute(_Q["abandon_unlinked"], older_than))


@dataclass(frozen=True)
class PendingCheck:
    id: int
    source: str
    key: str
    variant: str
    kind: str
    verify_url: str | None

    @property
    def row_key(self) -> str:
        """The products row the candidate is about: the variant's own row, or the product's."""
        return self.variant or self.key


async def pending_checks(conn: Conn, job_id: int) -> list[PendingCheck]:
    """The verify job's candidates still pending, locked (run it in a transaction)."""
    return [PendingCheck(**dict(r)) for r in await conn.fetch(_Q["pending_checks"], job_id)]


@dataclass(frozen=True)
class CheckedPage:
    url: str
    state: str
    last_outcome: str | None
    unsure: bool  # parsed without confidence


async def verify_pages(conn: Conn, job_id: int) -> list[CheckedPage]:
    return [CheckedPage(**dict(r)) for r in await conn.fetch(_Q["verify_pages"], job_id)]


async def settle_checks(conn: Conn, ids: Sequence[int], verification: str) -> None:
    if ids:
        await conn.execute(_Q["settle_checks"], list(ids), verification)


async def confirm_checks(conn: Conn, ids: Sequence[int], job_id: int) -> list[ProductChange]:
    if not ids:
        return []
    rows = await conn.fetch(_Q["confirm_checks"], list(ids), job_id)
    return sorted((_event(r) for r in rows), key=lambda e: e.id)


async def finished_verify_jobs(conn: Conn) -> list[tuple[int, str]]:
    return [(r["job_id"], r["source"]) for r in await conn.fetch(_Q["finished_verify_jobs"])]


async def job_candidates(conn: Conn, job_id: int) -> dict[str, int]:
    """The job's candidates by verification state."""
    return {r["verification"]: r["n"] for r in await conn.fetch(_Q["job_candidates"], job_id)}


async def verification_counts(conn: Conn, where: ChangeFilter) -> dict[str, int]:
    """Candidates by verification state (of a source, since a time)."""
    rows = await conn.fetch(_Q["verification_counts"], where.source, where.since)
    return {r["verification"]: r["n"] for r in rows}


async def list_events(
    conn: Conn,
    where: ChangeFilter,
    *,
    cursor: int = 0,
    newest_first: bool = False,
    limit: int = 100,
) -> list[ProductChange]:
    """Events after the cursor (an event id) in id order; or, ``newest_first``, before it
    (0: from the newest) newest first."""
    rows = await conn.fetch(
        _Q["list_events"],
        where.source,
        cursor,
        where.since,
        where.kinds,
        limit,
        newest_first,
        where.verification,
    )
    return [_event(r) for r in rows]


# -- misses (misses.py) -------------------------------------------------------------------------
async def claim_miss_count(conn: Conn, job_id: int, source: str) -> bool:
    """True for the first call of a job; a redelivered completion gets False."""
    return bool(await conn.fetchval(_Q["claim_miss_count"], job_id, source))


async def seen_keys(conn: Conn, job_id: int, source: str) -> list[str]:
    return [r["key"] for r in await conn.fetch(_Q["seen_keys"], job_id, source)]


async def mark_seen(conn: Conn, source: str, keys: list[str], job_id: int) -> None:
    await conn.execute(_Q["mark_seen"], source, keys, job_id)


async def job_page_failures(conn: Conn, job_id: int) -> tuple[int, int]:
    """(failed, total) of the job's pages, images left out."""
    row = await conn.fetchrow(_Q["job_page_failures"], job_id)
    assert row is not None  # an aggregate always returns its row
    return row["failed"], row["total"]


async def stopped_at_pagination_guard(conn: Conn, job_id: int) -> bool:
    return bool(await conn.fetchval(_Q["stopped_at_pagination_guard"], job_id))


async def record_not_counted(conn: Conn, job_id: int, reason: str) -> None:
    await conn.execute(_Q["record_not_counted"], job_id, reason)


async def unknown_urls(conn: Conn, job_id: int) -> list[str]:
    """The job's pages that say nothing about their products (failed, unsure, empty)."""
    return [r["url"] for r in await conn.fetch(_Q["unknown_urls"], job_id)]


async def count_missed(
    conn: Conn, source: str, seen: list[str], failed: list[str], job_id: int
) -> list[str]:
    """Add a miss to the source's products neither seen nor on a failed page; their keys."""
    rows = await conn.fetch(_Q["count_missed"], source, seen, failed, job_id)
    return [r["key"] for r in rows]


@dataclass(frozen=True)
class Delisted:
    key: str
    variant_of: str | None
    url: str | None
    gtin: str | None
    price: Decimal | None
    sale_price: Decimal | None
    currency: str | None
    before: str | None  # availability before the delisting


async def delist_products(
    conn: Conn, source: str, threshold: int, *, held: Sequence[str] = ()
) -> list[Delisted]:
    """Mark out of stock the products at ``threshold`` misses not delisted yet, except those
    ``held`` (their delisting is a candidate to verify first)."""
    rows = await conn.fetch(_Q["delist_products"], source, threshold, list(held))
    return [Delisted(**dict(r)) for r in rows]


async def due_for_delisting(conn: Conn, source: str, threshold: int) -> list[Delisted]:
    """The products at ``threshold`` misses not delisted yet, locked; ``before`` is their
    availability now."""
    rows = await conn.fetch(_Q["due_for_delisting"], source, threshold)
    return [Delisted(**dict(r)) for r in rows]


async def delist_keys(conn: Conn, source: str, keys: Sequence[str]) -> list[Delisted]:
    """Delist these products (verified) unless they are already."""
    rows = await conn.fetch(_Q["delist_keys"], source, list(keys))
    return [Delisted(**dict(r)) for r in rows]


async def snapshot_delisted(conn: Conn, source: str, job_id: int, rows: list[Delisted]) -> None:
    await conn.executemany(
        _Q["snapshot_delisted"],
        [(source, d.key, job_id, d.price, d.sale_price, d.currency) for d in rows],
    )


async def record_counted(conn: Conn, job_id: int, seen: int, missed: int, delisted: int) -> None:
    await conn.execute(_Q["record_counted"], job_id, seen, missed, delisted)


# -- images (images.py) -------------------------------------------------------------------------
def _updated(status: str) -> int:
    return int(status.rsplit(" ", 1)[-1])


async def link_images_by_url(conn: Conn, source: str, job_id: int) -> int:
    """Point the job's products at the stored copy of their image URL as written; how many
    rows changed."""
    return _updated(await conn.execute(_Q["link_images_by_url"], source, job_id))


async def unmatched_images(conn: Conn, source: str, job_id: int) -> dict[str, str]:
    """Key → image URL of the job's products whose image URL as written has no stored copy."""
    rows = await conn.fetch(_Q["unmatched_images"], source, job_id)
    return {r["key"]: r["image"] for r in rows}


async def set_image_refs(conn: Conn, source: str, keys: list[str], refs: list[str | None]) -> int:
    return _updated(await conn.execute(_Q["set_image_refs"], source, keys, refs))


async def stored_copies(conn: Conn, source: str, urls: list[str]) -> dict[str, str]:
    """URL → payload ref of the URLs the source has a stored copy of."""
    rows = await conn.fetch(_Q["stored_copies"], source, urls)
    return {r["url"]: r["payload_ref"] for r in rows}


# -- jobs and pages of the frontier (its views) -------------------------------------------------
@dataclass(frozen=True)
class FrontierJob:
    job_id: int
    source: str
    kind: str
    status: str
    partial: bool  # its trigger named its own seeds or keywords
    definition: dict[str, Any]  # the source as it was when the job started


async def job(conn: Conn, job_id: int) -> FrontierJob | None:
    row = await conn.fetchrow(_Q["job"], job_id)
    return None if row is None else FrontierJob(**dict(row))


@dataclass(frozen=True)
class ReplayPage:
    entry_id: int
    url: str
    depth: int
    keyword: str | None
    kind: LinkKind
    request: Any  # an API page's ApiRequest as stored (jsonb), else None
    ref: str  # the payload to parse
    content_type: str | None


async def replay_pages(conn: Conn, job_id: int, source: str) -> list[ReplayPage]:
    """The job's fetched or re-validated pages, each with the payload to parse it from."""
    return [ReplayPage(**dict(r)) for r in await conn.fetch(_Q["replay_pages"], job_id, source)]


# -- reading products (the API, the CLI, the client, the job diff) ------------------------------
def _shown(value: Any) -> Any:
    # Decimal strings as written, never in exponent form ("0.00000001", not "1E-8").
    return f"{value:f}" if isinstance(value, Decimal) else value


def _product(row: asyncpg.Record) -> ProductOut:
    # sort_value: the key-set queries' cursor column, not a product field.
    return ProductOut(**{k: _shown(v) for k, v in row.items() if k != "sort_value"})


def _snapshot(row: asyncpg.Record) -> SnapshotOut:
    return SnapshotOut(**{k: _shown(v) for k, v in row.items() if k != "key"})


async def count_products(conn: Conn, source: str) -> int:
    return int(await conn.fetchval(_Q["count_products"], source))


async def list_products(conn: Conn, source: str, *, limit: int | None = None) -> list[ProductOut]:
    """A source's products by key (all of them without a limit)."""
    return [_product(r) for r in await conn.fetch(_Q["list_products"], source, limit)]


@dataclass(frozen=True)
class ProductFilter:
    """The API's product filters; None asks nothing."""

    source: str | None = None
    availability: str | None = None
    min_misses: int | None = None
    text: str | None = None  # name contains it, or the exact sku or key
    delisted: bool | None = None

    def args(self) -> tuple[Any, ...]:
        return self.source, self.availability, self.min_misses, self.text, self.delisted


async def product_page(
    conn: Conn, where: ProductFilter, *, limit: int, offset: int
) -> Page[ProductOut]:
    total = await conn.fetchval(_Q["count_filtered_products"], *where.args())
    rows = await conn.fetch(_Q["filter_products"], *where.args(), limit, offset)
    return Page(items=[_product(r) for r in rows], total=total, limit=limit, offset=offset)


async def product_detail(conn: Conn, source: str, key: str) -> ProductDetail | None:
    row = await conn.fetchrow(_Q["product"], source, key)
    if row is None:
        return None
    snapshots = await conn.fetch(_Q["product_snapshots"], source, key)
    return ProductDetail(product=_product(row), snapshots=[_snapshot(s) for s in snapshots])


async def applied_keys(conn: Conn, job_id: int, source: str) -> set[str]:
    """The products a job saw by its applied parse results."""
    return {r["key"] for r in await conn.fetch(_Q["applied_keys"], job_id, source)}


async def states_as_of(
    conn: Conn, source: str, job_id: int, keys: Iterable[str]
) -> dict[str, SnapshotOut]:
    """Key → the product's last snapshot up to that job: its state then."""
    rows = await conn.fetch(_Q["states_as_of"], source, job_id, list(keys))
    return {r["key"]: _snapshot(r) for r in rows}


# -- the dashboard's views: key-set pages, history, matches, exports ---------------------------
@dataclass(frozen=True)
class ViewFilter:
    """The product list's filters; None asks nothing."""

    source: str | None = None
    availability: str | None = None
    text: str | None = None  # name contains it, or the exact sku or key
    changed_within_hours: int | None = None  # a price, sale price or stock change since
    delisted: bool | None = None
    has_alerts: bool | None = None  # an alert rule targets it (the product or its variant)

    def args(self) -> tuple[Any, ...]:
        return (
            self.source,
            self.availability,
            self.text,
            self.changed_within_hours,
            self.delisted,
            self.has_alerts,
        )


# Sort order → its query; each continues after a (sort value, source, key) cursor.
_BY = {
    "key": _Q["products_by_key"],
    "name": _Q["products_by_name"],
    "price": _Q["products_by_price"],
    "updated": _Q["products_by_updated"],
}
SORTS = tuple(_BY)
Cursor: TypeAlias = tuple[str, str, str]  # (sort value, source, key) of the last row shown


async def product_view_page(
    conn: Conn, where: ViewFilter, *, sort: str, after: Cursor | None, limit: int
) -> tuple[list[ProductOut], Cursor | None]:
    """Up to ``limit`` products after ``after`` in ``sort`` order, and the cursor of the next
    page (None when this one is the last)."""
    value, source, key = after or (None, None, None)
    rows = await conn.fetch(_BY[sort], *where.args(), value, source, key, limit + 1)
    more = len(rows) > limit
    rows = rows[:limit]
    items = [_product(r) for r in rows]
    last = rows[-1] if more else None
    return items, None if last is None else (str(last["sort_value"]), last["source"], last["key"])


async def count_view_products(conn: Conn, where: ViewFilter) -> int:
    return int(await conn.fetchval(_Q["count_view_products"], *where.args()))


async def product(conn: Conn, source: str, key: str) -> ProductOut | None:
    row = await conn.fetchrow(_Q["product"], source, key)
    return None if row is None else _product(row)


async def product_history(
    conn: Conn, source: str, key: str, *, after: tuple[Any, int] | None, limit: int
) -> tuple[list[HistoryPoint], tuple[Any, int] | None]:
    """The snapshots of the product and of its variants after ``after`` (observed_at, snapshot
    id), oldest first, and the cursor of the next page."""
    at, snapshot_id = after or (None, None)
    rows = await conn.fetch(_Q["product_history"], source, key, at, snapshot_id, limit + 1)
    more = len(rows) > limit
    rows = rows[:limit]
    points = [HistoryPoint(**{k: _shown(v) for k, v in r.items() if k != "id"}) for r in rows]
    return points, (rows[-1]["observed_at"], rows[-1]["id"]) if more else None


async def product_variants(conn: Conn, source: str, key: str) -> list[ProductOut]:
    """The product's variants (rows whose ``variant_of`` is its key), by key."""
    return [_product(r) for r in await conn.fetch(_Q["product_variants"], source, key)]


async def match_products(conn: Conn, gtin: str | None, mpn: str | None) -> list[ProductOut]:
    """Products of any source with this GTIN or MPN, cheapest first (at most 500)."""
    return [_product(r) for r in await conn.fetch(_Q["match_products"], gtin, mpn)]


async def match_groups(
    conn: Conn, *, after: str | None, min_sources: int, limit: int
) -> list[MatchGroup]:
    """GTINs that products of at least ``min_sources`` sources share, by GTIN after ``after``."""
    rows = await conn.fetch(_Q["match_groups"], after, min_sources, limit)
    return [MatchGroup(**{k: _shown(v) for k, v in r.items()}) for r in rows]


@dataclass(frozen=True)
class Export:
    """An export's columns (name, Postgres type) and its rows, streamed from the database."""

    columns: list[tuple[str, str]]
    rows: AsyncIterator[asyncpg.Record]


async def export(
    conn: Conn, source: str, *, history: bool, since: datetime | None, prefetch: int = 2000
) -> Export:
    """A source's products (or, with ``history``, its snapshots) through a server-side cursor:
    ``prefetch`` rows in memory at a time, however many there are. Needs a transaction."""
    stmt = await conn.prepare(_Q["export_history"] if history else _Q["export_products"])
    columns = [(a.name, a.type.name) for a in stmt.get_attributes()]
    return Export(columns, aiter(stmt.cursor(source, since, prefetch=prefetch)))
