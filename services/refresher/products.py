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
import msgspec

from schemas.messages import Message, ParseResult, Product

# A batch goes in by binary COPY into staging tables, then on to the real tables with one
# statement each: binding one array per column costs several times the client CPU (asyncpg
# type-checks every array element). The staging tables are temporary, created once per
# session and emptied at every commit. Prices and JSON stage as text, cast on the way out:
# asyncpg's binary numeric encoder costs ~2 µs a value (text: a tenth), and COPY wants binary
# encoders, which the pool's JSON codec has not.
_STAGE = """
CREATE TEMP TABLE IF NOT EXISTS refresher_results (
    attempt_id text, job_id bigint, source text, product_key text, not_modified_url text
) ON COMMIT DELETE ROWS;
CREATE TEMP TABLE IF NOT EXISTS refresher_products (
    source text, key text, sku text, gtin text, mpn text, name text, brand text,
    price text, sale_price text, currency text, availability text, url text, image text,
    last_seen_job bigint, stock int, prices text, attributes text
) ON COMMIT DELETE ROWS;
CREATE TEMP TABLE IF NOT EXISTS refresher_snapshots (
    source text, key text, job_id bigint, price text, sale_price text, currency text,
    availability text, prices text
) ON COMMIT DELETE ROWS;
"""

# In attempt-id order: two replicas holding the same redelivered results then wait on each
# other's unique-index entries in the same order, and cannot deadlock.
_RECORD = """
INSERT INTO applied_results (attempt_id, job_id, source, product_key, not_modified_url)
SELECT attempt_id, job_id, source, product_key, not_modified_url FROM refresher_results
ORDER BY attempt_id
ON CONFLICT DO NOTHING
RETURNING attempt_id
"""

# The products the new results name, locked in key order. (Keys come as arrays: a join with
# the staging table, which has no statistics, can be planned as a scan of all products.)
# Only flags and non-empty JSON come back: less to decode.
_LOCK = """
SELECT p.source, p.key, p.sku, p.gtin, p.mpn, p.name, p.brand, p.price, p.sale_price,
       p.currency, p.availability, p.url, p.image, p.last_seen_job, p.stock,
       p.consecutive_misses <> 0 OR p.delisted_at IS NOT NULL AS missed,
       nullif(p.prices, '{}') AS prices, nullif(p.attributes, '{}') AS attributes
FROM products p JOIN unnest($1::text[], $2::text[]) AS k(source, key)
  ON p.source = k.source AND p.key = k.key
ORDER BY p.source, p.key
FOR UPDATE OF p
"""

_COLUMNS = (
    "source, key, sku, gtin, mpn, name, brand, price, sale_price, currency, availability, url, "
    "image, last_seen_job, stock, prices, attributes"
)
_STAGED = (
    "SELECT source, key, sku, gtin, mpn, name, brand, price::numeric, sale_price::numeric, "
    "currency, availability, url, image, last_seen_job, stock, prices::jsonb, attributes::jsonb "
    "FROM refresher_products"
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
INSERT INTO products ({_COLUMNS}) {_STAGED}
ON CONFLICT (source, key) DO UPDATE SET {_FIELDS},
    consecutive_misses = 0, delisted_at = NULL, last_seen_at = now(),
    last_seen_job = greatest(products.last_seen_job, EXCLUDED.last_seen_job)
WHERE products.last_seen_job IS NULL OR products.last_seen_job <= EXCLUDED.last_seen_job
"""

# A replay corrects what was extracted, but it is no new sighting: misses, delisting and
# last-seen stay as the live crawls left them.
_REPLAY = f"""
INSERT INTO products ({_COLUMNS}) {_STAGED}
ON CONFLICT (source, key) DO UPDATE SET {_FIELDS}
WHERE products.last_seen_job IS NULL OR products.last_seen_job <= EXCLUDED.last_seen_job
"""

_SNAPSHOTS = """
INSERT INTO snapshots (source, key, job_id, price, sale_price, currency, availability, prices)
SELECT source, key, job_id, price::numeric, sale_price::numeric, currency, availability,
       prices::jsonb
FROM refresher_snapshots
"""

# A 304 whose stored payload could not be re-parsed still counts its page's products as seen.
_SEEN_BY_URL = """
UPDATE products p SET last_seen_at = now(), consecutive_misses = 0, delisted_at = NULL,
    last_seen_job = greatest(p.last_seen_job, u.job_id)
FROM unnest($1::text[], $2::text[], $3::bigint[]) AS u(source, url, job_id)
WHERE p.source = u.source AND p.url = u.url
"""

_json = msgspec.json.Encoder()


class ParsedProducts(Message, tag="parse_result", kw_only=True, frozen=True):
    """A ``ParseResult`` as the refresher reads it: the same message (tag, field names and
    types), minus what the refresher does not use. A product page carries dozens of links,
    and decoding them cost more than applying its product."""

    attempt_id: str
    job_id: int
    source: str
    url: str
    product: Product | None = None
    not_modified: bool = False
    products: list[Product] = []

    def sightings(self) -> list[Product]:
        return ([self.product] if self.product is not None else []) + list(self.products)


Result = ParseResult | ParsedProducts


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


# What a snapshot records (price, sale price, availability, price lists); a change in any of
# it is history.
State = tuple[Decimal | None, Decimal | None, str | None, dict[str, Decimal | None]]


def _state(product: Product) -> State:
    lists = {k: to_decimal(v) for k, v in product.prices.items()} if product.prices else {}
    return to_decimal(product.price), to_decimal(product.sale_price), product.availability, lists


def _stored_state(row: asyncpg.Record) -> State:
    lists = row["prices"]
    return (
        row["price"],
        row["sale_price"],
        row["availability"],
        {k: to_decimal(v) for k, v in lists.items()} if lists else {},
    )


def _differs(row: asyncpg.Record, p: Product, now: State, *, replay: bool) -> bool:
    if not replay and row["missed"]:
        return True  # seen again: the reset must not wait for the job's end
    return (
        (row["price"], row["sale_price"], row["availability"]) != now[:3]
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


def _jsonb(value: dict[str, str]) -> str:
    return _json.encode(value).decode() if value else "{}"


def _numeric(value: Decimal | None) -> str | None:
    return None if value is None else str(value)


async def apply_results(
    conn: asyncpg.Connection, results: Sequence[Result], *, replay: bool = False
) -> Applied:
    """Apply a batch of parse results in one transaction (opened here)."""
    try:
        async with conn.transaction():
            return await _apply(conn, results, replay=replay)
    except asyncpg.UndefinedTableError:
        # A new session: create its staging tables (outside the transaction, so they stay),
        # and go again. A table that is still missing after that is a real error.
        await conn.execute(_STAGE)
        async with conn.transaction():
            return await _apply(conn, results, replay=replay)


async def _apply(conn: asyncpg.Connection, results: Sequence[Result], *, replay: bool) -> Applied:
    unique: dict[str, Result] = {}
    for r in results:
        unique.setdefault(r.attempt_id, r)  # a redelivery inside one batch
    records: list[tuple[str, int, str, str | None, str | None]] = []
    for r in unique.values():
        # All rows of one result go in one statement: all new or all already applied.
        seen = r.sightings()
        first = seen[0].key if seen else None
        records.append((r.attempt_id, r.job_id, r.source, first, r.url if r.not_modified else None))
        for i in range(1, len(seen)):
            records.append((f"{r.attempt_id}#{i}", r.job_id, r.source, seen[i].key, None))
    await conn.copy_records_to_table("refresher_results", records=records)
    new_ids = {row[0] for row in await conn.fetch(_RECORD)}
    fresh = [r for r in unique.values() if r.attempt_id in new_ids]
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
    conn: asyncpg.Connection, sightings: list[tuple[Result, Product]], *, replay: bool
) -> tuple[int, int]:
    # Order of arrival within the batch is the order of observation: the last one wins the
    # row, and every change along the way gets its snapshot.
    sightings.sort(key=lambda s: s[0].job_id)  # stable: arrival order within a job
    keys = sorted({(r.source, p.key) for r, p in sightings})
    prev = {
        (row["source"], row["key"]): row
        for row in await conn.fetch(_LOCK, [k[0] for k in keys], [k[1] for k in keys])
    }
    state = {k: _stored_state(row) for k, row in prev.items()}
    final: dict[tuple[str, str], tuple[Result, Product, State]] = {}
    snaps: list[tuple] = []
    for r, p in sightings:
        k = (r.source, p.key)
        row = prev.get(k)
        if row is not None and row["last_seen_job"] is not None and row["last_seen_job"] > r.job_id:
            continue  # an older job's late result: the newer observation stands
        now = _state(p)
        if state.get(k) != now:
            prices = _jsonb(p.prices) if p.prices else None
            price, sale = _numeric(now[0]), _numeric(now[1])
            snaps.append((r.source, p.key, r.job_id, price, sale, p.currency, now[2], prices))
            state[k] = now
        final[k] = (r, p, now)
    # Most sightings of a refresh change nothing: those rows are not rewritten here. Their
    # last-seen mark is set once per job, when its misses are counted (misses.py).
    rows = [
        (
            r.source,
            p.key,
            p.sku,
            p.gtin,
            p.mpn,
            p.name,
            p.brand,
            _numeric(now[0]),
            _numeric(now[1]),
            p.currency,
            p.availability,
            p.url,
            p.image,
            r.job_id,
            p.stock,
            _jsonb(p.prices),
            _jsonb(p.attributes),
        )
        for k, (r, p, now) in sorted(final.items())  # key order, as locked: new rows too
        if k not in prev or _differs(prev[k], p, now, replay=replay)
    ]
    if rows:
        await conn.copy_records_to_table("refresher_products", records=rows)
        await conn.execute(_REPLAY if replay else _UPSERT)
    if snaps:
        await conn.copy_records_to_table("refresher_snapshots", records=snaps)
        await conn.execute(_SNAPSHOTS)
    return len(rows), len(snaps)


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
