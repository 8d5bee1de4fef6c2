"""Product upserts keyed by (source, key), applied in batches, with a snapshot whenever price,
sale price or availability changes.

One batch is one transaction: record the attempt ids (``applied_results``, the idempotency key),
lock the products the new results touch (in key order, so concurrent batches of several
replicas never deadlock), upsert them with one statement and write the snapshots. A result whose
attempt id is already recorded changes nothing.

An API page lists many products: its result records one ``applied_results`` row per product
(the attempt id for the first, ``<attempt id>#<n>`` for the others), so the job's completion
wait and its seen keys count products, not pages, with the same queries as for HTML pages.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation

import asyncpg

from schemas.messages import ParseResult, Product

_RECORD = """
INSERT INTO applied_results (attempt_id, job_id, source, product_key, not_modified_url)
SELECT * FROM unnest($1::text[], $2::bigint[], $3::text[], $4::text[], $5::text[])
ON CONFLICT DO NOTHING
RETURNING attempt_id
"""

_LOCK = """
SELECT p.source, p.key, p.sku, p.gtin, p.mpn, p.name, p.brand, p.price, p.sale_price,
       p.currency, p.availability, p.url, p.image, p.last_seen_job,
       p.consecutive_misses, p.delisted_at, p.stock, p.prices, p.attributes
FROM products p JOIN unnest($1::text[], $2::text[]) AS k(source, key)
  ON p.source = k.source AND p.key = k.key
ORDER BY p.source, p.key
FOR UPDATE OF p
"""

_COLUMNS = (
    "source, key, sku, gtin, mpn, name, brand, price, sale_price, currency, availability, url, "
    "image, last_seen_job, stock, prices, attributes"
)
_UNNEST = (
    "SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], "
    "$6::text[], $7::text[], $8::numeric[], $9::numeric[], $10::text[], $11::text[], "
    "$12::text[], $13::text[], $14::bigint[], $15::int[], $16::jsonb[], $17::jsonb[])"
)
_FIELDS = """
    sku = EXCLUDED.sku, gtin = EXCLUDED.gtin, mpn = EXCLUDED.mpn,
    name = coalesce(EXCLUDED.name, products.name), brand = coalesce(EXCLUDED.brand, products.brand),
    price = EXCLUDED.price, sale_price = EXCLUDED.sale_price, currency = EXCLUDED.currency,
    availability = EXCLUDED.availability, url = coalesce(EXCLUDED.url, products.url),
    image = coalesce(EXCLUDED.image, products.image), stock = EXCLUDED.stock,
    prices = EXCLUDED.prices, attributes = EXCLUDED.attributes, updated_at = now()"""

# A sighting: the product is back in the feed, so its misses reset and a delisting is undone.
# A late result of an older job never overwrites what a newer job saw.
_UPSERT = f"""
INSERT INTO products ({_COLUMNS}) {_UNNEST}
ON CONFLICT (source, key) DO UPDATE SET {_FIELDS},
    consecutive_misses = 0, delisted_at = NULL, last_seen_at = now(),
    last_seen_job = greatest(products.last_seen_job, EXCLUDED.last_seen_job)
WHERE products.last_seen_job IS NULL OR products.last_seen_job <= EXCLUDED.last_seen_job
"""

# A replay corrects what was extracted, but it is no new sighting: misses, delisting and
# last-seen stay as the live crawls left them.
_REPLAY = f"""
INSERT INTO products ({_COLUMNS}) {_UNNEST}
ON CONFLICT (source, key) DO UPDATE SET {_FIELDS}
WHERE products.last_seen_job IS NULL OR products.last_seen_job <= EXCLUDED.last_seen_job
"""

_SNAPSHOTS = """
INSERT INTO snapshots (source, key, job_id, price, sale_price, currency, availability, prices)
SELECT * FROM unnest($1::text[], $2::text[], $3::bigint[], $4::numeric[], $5::numeric[],
                     $6::text[], $7::text[], $8::jsonb[])
"""

# A 304 whose stored payload could not be re-parsed still counts its page's products as seen.
_SEEN_BY_URL = """
UPDATE products p SET last_seen_at = now(), consecutive_misses = 0, delisted_at = NULL,
    last_seen_job = greatest(p.last_seen_job, u.job_id)
FROM unnest($1::text[], $2::text[], $3::bigint[]) AS u(source, url, job_id)
WHERE p.source = u.source AND p.url = u.url
"""


@dataclass(frozen=True)
class Applied:
    """What one batch did."""

    results: int = 0  # new results (redeliveries excluded)
    duplicates: int = 0
    upserts: int = 0
    snapshots: int = 0


def to_decimal(value: str | None) -> Decimal | None:
    if value is None:
        return None
    try:
        number = Decimal(value)
    except (InvalidOperation, ValueError):
        return None
    return number if number.is_finite() else None


def _state(product: Product) -> tuple[Decimal | None, Decimal | None, str | None, dict]:
    """What a snapshot records; a change in any of it is history."""
    lists = {k: to_decimal(v) for k, v in sorted(product.prices.items())}
    return to_decimal(product.price), to_decimal(product.sale_price), product.availability, lists


def _differs(row: asyncpg.Record, p: Product, *, replay: bool) -> bool:
    if not replay and (row["consecutive_misses"] or row["delisted_at"] is not None):
        return True  # seen again: the reset must not wait for the job's end
    price, sale, availability, _ = _state(p)
    return (
        (row["price"], row["sale_price"], row["availability"]) != (price, sale, availability)
        or (row["prices"] or {}) != p.prices
        or (row["attributes"] or {}) != p.attributes
        or (row["sku"], row["gtin"], row["mpn"], row["currency"])
        != (p.sku, p.gtin, p.mpn, p.currency)
        or (p.name is not None and row["name"] != p.name)
        or (p.brand is not None and row["brand"] != p.brand)
        or (p.url is not None and row["url"] != p.url)
        or (p.image is not None and row["image"] != p.image)
        or row["stock"] != p.stock
    )


async def apply_results(
    conn: asyncpg.Connection, results: Sequence[ParseResult], *, replay: bool = False
) -> Applied:
    """Apply a batch of parse results in one transaction (opened here)."""
    async with conn.transaction():
        return await _apply(conn, results, replay=replay)


async def _apply(
    conn: asyncpg.Connection, results: Sequence[ParseResult], *, replay: bool
) -> Applied:
    unique: dict[str, ParseResult] = {}
    for r in results:
        unique.setdefault(r.attempt_id, r)  # a redelivery inside one batch
    batch = list(unique.values())
    records: list[tuple[str, int, str, str | None, str | None]] = []
    for r in batch:
        keys: list[str | None] = [p.key for p in r.sightings()] or [None]
        for i, key in enumerate(keys):
            # All rows of one result go in one statement: all new or all already applied.
            record_id = r.attempt_id if i == 0 else f"{r.attempt_id}#{i}"
            records.append((record_id, r.job_id, r.source, key, None))
        if r.not_modified:
            records[-len(keys)] = (*records[-len(keys)][:4], r.url)
    new_ids = {
        row["attempt_id"]
        for row in await conn.fetch(_RECORD, *[list(c) for c in zip(*records, strict=True)])
    }
    fresh = [r for r in batch if r.attempt_id in new_ids]
    sightings = [(r, p) for r in fresh for p in r.sightings()]
    upserts, snapshots = await _upsert(conn, sightings, replay=replay) if sightings else (0, 0)
    bare = [r for r in fresh if not r.sightings() and r.not_modified and not replay]
    if bare:
        await conn.execute(
            _SEEN_BY_URL, [r.source for r in bare], [r.url for r in bare], [r.job_id for r in bare]
        )
    return Applied(
        results=len(fresh),
        duplicates=len(results) - len(fresh),
        upserts=upserts,
        snapshots=snapshots,
    )


async def _upsert(
    conn: asyncpg.Connection, sightings: list[tuple[ParseResult, Product]], *, replay: bool
) -> tuple[int, int]:
    # Order of arrival within the batch is the order of observation: the last one wins the
    # row, and every change along the way gets its snapshot.
    sightings.sort(key=lambda s: s[0].job_id)  # stable: arrival order within a job
    keys = sorted({(r.source, p.key) for r, p in sightings})
    prev = {
        (row["source"], row["key"]): row
        for row in await conn.fetch(_LOCK, [k[0] for k in keys], [k[1] for k in keys])
    }
    state: dict[tuple[str, str], tuple] = {
        k: (
            row["price"],
            row["sale_price"],
            row["availability"],
            {n: to_decimal(v) for n, v in sorted((row["prices"] or {}).items())},
        )
        for k, row in prev.items()
    }
    seen_job = {k: row["last_seen_job"] for k, row in prev.items()}
    final: dict[tuple[str, str], tuple[ParseResult, Product]] = {}
    snaps: list[tuple] = []
    for r, p in sightings:
        k = (r.source, p.key)
        newer = seen_job.get(k)
        if newer is not None and newer > r.job_id:
            continue  # an older job's late result: the newer observation stands
        now = _state(p)
        if state.get(k, ()) != now:
            snaps.append(
                (r.source, p.key, r.job_id, now[0], now[1], p.currency, now[2], p.prices or None)
            )
            state[k] = now
        final[k] = (r, p)
    # Most sightings of a refresh change nothing: those rows are not rewritten here. Their
    # last-seen mark is set once per job, when its misses are counted (misses.py).
    final = {
        k: s for k, s in final.items() if k not in prev or _differs(prev[k], s[1], replay=replay)
    }
    if final:
        rows = [final[k] for k in sorted(final)]
        cols: list[list] = [[] for _ in range(17)]
        for r, p in rows:
            price, sale, _, _ = _state(p)
            for i, v in enumerate(
                (
                    r.source,
                    p.key,
                    p.sku,
                    p.gtin,
                    p.mpn,
                    p.name,
                    p.brand,
                    price,
                    sale,
                    p.currency,
                    p.availability,
                    p.url,
                    p.image,
                    r.job_id,
                    p.stock,
                    p.prices,
                    p.attributes,
                )
            ):
                cols[i].append(v)
        await conn.execute(_REPLAY if replay else _UPSERT, *cols)
    if snaps:
        await conn.execute(_SNAPSHOTS, *[list(c) for c in zip(*snaps, strict=True)])
    return len(final), len(snaps)


PRODUCT_FIELDS = (
    "key",
    "sku",
    "name",
    "brand",
    "price",
    "sale_price",
    "currency",
    "availability",
    "url",
    "image",
    "image_ref",
    "stock",
    "prices",
    "attributes",
    "consecutive_misses",
    "delisted_at",
    "first_seen_at",
    "last_seen_at",
    "last_seen_job",
)


async def list_products(
    conn: asyncpg.Connection, source: str, *, limit: int | None = None
) -> list[dict]:
    """Product records as the CLI and API show them (prices as decimal strings)."""
    rows = await conn.fetch(
        f"SELECT {', '.join(PRODUCT_FIELDS)} FROM products WHERE source = $1 ORDER BY key LIMIT $2",
        source,
        limit,
    )
    out = []
    for r in rows:
        item = dict(r)
        for key in ("price", "sale_price"):
            if item[key] is not None:
                item[key] = f"{item[key]:f}"
        for key in ("delisted_at", "first_seen_at", "last_seen_at"):
            if item[key] is not None:
                item[key] = item[key].isoformat()
        out.append(item)
    return out
