"""Product upserts keyed by (source, key), applied in batches, with a snapshot whenever price,
sale price or availability changes.

One batch is one transaction: record the attempt ids (``applied_results``, the idempotency key),
lock the products the new results touch (in key order, so concurrent batches of several
replicas never deadlock), upsert them with one statement and write the snapshots. A result whose
attempt id is already recorded changes nothing.

An API page lists many products: its result records one ``applied_results`` row per product
(the attempt id for the first, ``<attempt id>#<n>`` for the others), so the job's completion
wait and its seen keys count products, not pages, with the same queries as for HTML pages.

The SQL is the store's (``store.py``); which columns a product has comes from the ``Product``
Struct (``columns.py``), so this module names only the fields its rules are about: the prices
and stock a snapshot records, and the fields an absent value does not clear.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Any

import asyncpg
import msgspec

from schemas.messages import Attempt, Message, ParseResult, Product, ProductChange, ProductState
from services.refresher import changes, store, verification
from services.refresher.columns import JSON_FIELDS, KEEP_WHEN_ABSENT, PRODUCT_FIELDS

_json = msgspec.json.Encoder()


class ParsedProducts(Message, tag="parse_result", kw_only=True, frozen=True):
    """A ``ParseResult`` as the refresher reads it: the same message (tag, field names and
    types), minus what the refresher does not use. A product page carries dozens of links,
    and decoding them cost more than applying its product."""

    v: int = 2
    attempt: Attempt
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
    events: tuple[ProductChange, ...] = ()  # recorded, to publish after the commit
    candidates: int = 0  # changes held for verification (verification.py)
    confirmed: int = 0  # candidates a verify job's sightings confirmed (among ``events``)
    rechecks: tuple[store.Recheck, ...] = ()  # the verify jobs to ask for after the commit


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


# Positions in a product's values (``Product`` field order, as ``columns.PRODUCT_FIELDS``).
_PRICE = PRODUCT_FIELDS.index("price")
_SALE_PRICE = PRODUCT_FIELDS.index("sale_price")
_AVAILABILITY = PRODUCT_FIELDS.index("availability")
_JSON_AT = tuple(i for i, name in enumerate(PRODUCT_FIELDS) if name in JSON_FIELDS)
_JSON_EMPTY = {i: JSON_FIELDS[PRODUCT_FIELDS[i]] for i in _JSON_AT}
_KEEP_AT = tuple(i for i, name in enumerate(PRODUCT_FIELDS) if name in KEEP_WHEN_ABSENT)
_STORED = slice(1, 1 + len(PRODUCT_FIELDS))  # of a locked row: source, the fields, ...


def _values(p: Product, now: State) -> tuple[Any, ...]:
    """The product's column values in field order, as a locked row shows them: prices as
    Decimals (None when not a number), an empty JSON value as None, the rest as extracted.
    Price, sale price and stock are ``now``'s: a held sighting keeps the stored ones."""
    values = list(msgspec.structs.astuple(p))
    values[_PRICE], values[_SALE_PRICE], values[_AVAILABILITY] = now[0], now[1], now[2]
    for i in _JSON_AT:
        if not values[i]:
            values[i] = None
    return tuple(values)


def _same(stored: Any, new: Any) -> bool:
    if isinstance(stored, Decimal) and isinstance(new, str | float):
        return stored == to_decimal(str(new))  # a decimal string (or float) in a numeric column
    return stored == new


def _differs(row: asyncpg.Record, values: tuple[Any, ...], *, replay: bool) -> bool:
    if not replay and row["missed"]:
        return True  # seen again: the reset must not wait for the job's end
    stored = tuple(row)[_STORED]
    if stored == values:
        return False  # most sightings of a refresh: one comparison says so
    new = list(values)
    for i in _KEEP_AT:
        if new[i] is None:
            new[i] = stored[i]  # the page does not say: the stored value stays
    return not all(map(_same, stored, new))


def _staged(source: str, job_id: int, values: tuple[Any, ...]) -> tuple[Any, ...]:
    """A staging row (``columns.STAGED_COLUMNS``): decimals and JSON as text."""
    row = list(values)
    row[_PRICE], row[_SALE_PRICE] = _numeric(row[_PRICE]), _numeric(row[_SALE_PRICE])
    for i in _JSON_AT:
        row[i] = _JSON_EMPTY[i] if row[i] is None else _json_text(row[i])
    return (source, *row, job_id)


def _numeric(value: Decimal | None) -> str | None:
    return None if value is None else str(value)


def _json_text(value: Any) -> str:
    return _json.encode(value).decode()


async def apply_results(
    conn: store.Conn,
    results: Sequence[Result],
    *,
    replay: bool = False,
    policies: verification.Policies | None = None,
) -> Applied:
    """Apply a batch of parse results in one transaction (opened here). ``policies``: the
    jobs' verification (the service's); without it no change is held for verification."""
    try:
        async with conn.transaction():
            return await _apply(conn, results, replay=replay, policies=policies)
    except store.NoStagingTables:
        # A new session: create its staging tables and go again. Created in the transaction
        # that uses them: behind a transaction-mode pooler (PgBouncer) the next transaction
        # may run on another server session. Temp tables outlive the commit (only their rows
        # go), so this happens once per server session. Still missing after that: a real error.
        async with conn.transaction():
            await store.create_staging(conn)
            return await _apply(conn, results, replay=replay, policies=policies)


async def _apply(
    conn: store.Conn,
    results: Sequence[Result],
    *,
    replay: bool,
    policies: verification.Policies | None,
) -> Applied:
    unique: dict[str, Result] = {}
    for r in results:
        unique.setdefault(r.attempt.id, r)  # a redelivery inside one batch
    records: list[tuple[str, int, str, str | None, str | None, str | None]] = []
    for r in unique.values():
        # All rows of one result go in one statement: all new or all already applied.
        # A product parsed without confidence is unknown: not applied, neither seen nor missed;
        # its page is recorded as one that says nothing.
        all_seen = r.sightings()
        seen = [p for p in all_seen if p.confident]
        first = seen[0].key if seen else None
        a = r.attempt
        unsure = a.url if len(seen) < len(all_seen) else None
        # A 304 re-parsed from the stored payload says what its page shows; only a bare one
        # (nothing re-parsed) stands for every product at its URL. Otherwise a variant gone
        # from an unchanged page would count as seen through the URL it shares.
        bare_304 = a.url if r.not_modified and not all_seen else None
        records.append((a.id, a.job_id, a.source, first, bare_304, unsure))
        for i in range(1, len(seen)):
            records.append((f"{a.id}#{i}", a.job_id, a.source, seen[i].key, None, None))
    new_ids = await store.record_results(conn, records)
    fresh = [r for r in unique.values() if r.attempt.id in new_ids]
    sightings = [(r, p) for r in fresh for p in r.sightings() if p.confident]
    jobs = {r.attempt.job_id for r, _ in sightings}
    held = await policies.of(conn, jobs) if policies is not None else {}
    done = await _upsert(conn, sightings, replay=replay, policies=held) if sightings else _NONE
    bare = [r for r in fresh if not r.sightings() and r.not_modified and not replay]
    if bare:
        await store.seen_by_url(
            conn, [(r.attempt.source, r.attempt.url, r.attempt.job_id) for r in bare]
        )
    return Applied(
        results=len(fresh),
        duplicates=len(results) - len(fresh),
        upserts=done.upserts,
        snapshots=done.snapshots,
        events=tuple(done.events),
        candidates=done.candidates,
        confirmed=done.confirmed,
        rechecks=tuple(done.rechecks),
    )


def _shown_state(now: State, currency: str | None) -> ProductState:
    return changes.state(now[0], now[1], currency, now[2])


@dataclass(frozen=True)
class _Upserted:
    upserts: int = 0
    snapshots: int = 0
    events: Sequence[ProductChange] = ()
    candidates: int = 0
    rechecks: Sequence[store.Recheck] = ()
    confirmed: int = 0


_NONE = _Upserted()


async def _upsert(
    conn: store.Conn,
    sightings: list[tuple[Result, Product]],
    *,
    replay: bool,
    policies: dict[int, verification.JobPolicy],
) -> _Upserted:
    # Order of arrival within the batch is the order of observation: the last one wins the
    # row, and every change along the way gets its snapshot.
    sightings.sort(key=lambda s: s[0].attempt.job_id)  # stable: arrival order within a job
    keys = sorted({(r.attempt.source, p.key) for r, p in sightings})
    prev = await store.lock_products(conn, keys)
    state = {k: _stored_state(row) for k, row in prev.items()}
    final: dict[tuple[str, str], tuple[Result, tuple[Any, ...]]] = {}
    snaps: list[tuple[Any, ...]] = []
    # What change events compare: the stored state, then each sighting's in order.
    shown = {k: _shown_state(st, prev[k]["currency"]) for k, st in state.items()}
    relisted = {k for k, row in prev.items() if row["delisted"]}
    found: list[changes.Change] = []  # events (or, from a verify job, confirmations)
    held: list[changes.Change] = []  # candidates to verify before their event
    for r, p in sightings:
        a = r.attempt
        k = (a.source, p.key)
        row = prev.get(k)
        if row is not None and row["last_seen_job"] is not None and row["last_seen_job"] > a.job_id:
            continue  # an older job's late result: the newer observation stands
        now = _state(p)
        if state.get(k) != now or k in relisted:
            policy = policies.get(a.job_id, _NO_POLICY)
            after = _shown_state(now, p.currency)
            back = k in relisted and not replay
            kinds = changes.changes_of(a.source, a.job_id, p, shown.get(k), after, relisted=back)
            if row is not None and not back and any(policy.holds(c) for c in kinds):
                # A candidate: the row keeps its verified price and stock (no snapshot, no
                # event) until a verify job's re-check settles it. The sighting's other
                # changes wait with it (the row holds them back too), so that each is still
                # this job's event when confirmed. A replay, which observes nothing new, keeps
                # the verified values too (and asks for no re-check).
                if not replay:
                    held += kinds
                final[k] = (r, _values(p, state[k]))
                continue
            if not replay:
                relisted.discard(k)
                found += kinds
                shown[k] = after
            if state.get(k) != now:
                prices = _json_text(p.prices) if p.prices else None
                price, sale = _numeric(now[0]), _numeric(now[1])
                snaps.append((a.source, p.key, a.job_id, price, sale, p.currency, now[2], prices))
                state[k] = now
        final[k] = (r, _values(p, now))
    # Most sightings of a refresh change nothing: those rows are not rewritten here. Their
    # last-seen mark is set once per job, when its misses are counted (misses.py).
    rows = [
        _staged(r.attempt.source, r.attempt.job_id, values)
        for k, (r, values) in sorted(final.items())  # key order, as locked: new rows too
        if k not in prev or _differs(prev[k], values, replay=replay)
    ]
    if rows:
        await store.upsert_products(conn, rows, replay=replay)
    if snaps:
        await store.insert_snapshots(conn, snaps)
    confirming = [c for c in found if policies.get(c.job_id, _NO_POLICY).verifying]
    confirmed = await store.confirm_candidates(conn, [c.confirming() for c in confirming])
    settled = {(e.source, e.key, e.variant, e.kind) for e in confirmed}
    found = [c for c in found if (c.source, c.key, c.variant, c.kind) not in settled]
    pages = {(r.attempt.source, p.key): r.attempt.url for r, p in sightings}
    triggers = {
        c.job_id: verification.trigger_id(c.source, c.job_id, _tag(sightings, c.job_id))
        for c in held
    }
    # The page to re-fetch is the one that showed the change: a page the job was allowed to
    # fetch (a product's own URL may be a canonical on another host).
    candidates = [
        verification.as_candidate(
            c, triggers[c.job_id], pages.get((c.source, c.variant or c.key)) or c.url
        )
        for c in held
    ]
    events = await store.insert_events(conn, [c.row() for c in found])
    pending = await store.insert_events(conn, [c.row() for c in candidates])
    rechecks = await store.candidate_rechecks(conn, sorted(triggers.values())) if pending else []
    published = sorted(confirmed + events, key=lambda e: e.id)
    return _Upserted(len(rows), len(snaps), published, len(pending), rechecks, len(confirmed))


_NO_POLICY = verification.JobPolicy()


def _tag(sightings: list[tuple[Result, Product]], job_id: int) -> str:
    """Names the batch's candidates of a job: the first attempt id of that job in the batch
    (the same batch applied again, after a rollback, asks with the same trigger)."""
    return min(r.attempt.id for r, _ in sightings if r.attempt.job_id == job_id)
