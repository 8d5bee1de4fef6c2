"""Adding a product field is a three-file change: a migration adding its column to
``products``, the field on ``schemas.messages.Product``, and the parser filling it. Everything
between (the refresher's staging table and COPY rows, its upsert, the read model, the CLI's
and the API's product records, the payload diff) derives from the Struct. These tests add
nothing; they check the derivation for every field there is, so a field added tomorrow is
checked the same way."""

from __future__ import annotations

import typing
from typing import Any

import msgspec
import msgspec.inspect as mi

from control.payload_index import PRODUCT_DIFF_FIELDS
from schemas.messages import Attempt, ParseResult, Product
from schemas.read import ProductOut
from services.refresher import columns, store
from services.refresher.products import apply_results

FIELDS = [f.name for f in msgspec.structs.fields(Product)]
# What a column of each staged type may be in products (the migration's choice).
COMPATIBLE = {
    "text": {"text", "character varying", "numeric", "jsonb"},  # decimal strings, JSON text
    "bigint": {"bigint", "integer", "smallint", "numeric"},
    "double precision": {"double precision", "numeric"},
    "boolean": {"boolean"},
}


async def _column_types(conn) -> dict[str, str]:
    rows = await conn.fetch(
        "SELECT column_name, data_type FROM information_schema.columns "
        "WHERE table_schema = 'public' AND table_name = 'products'"
    )
    return {r["column_name"]: r["data_type"] for r in rows}


def test_every_product_field_is_a_field_of_the_read_model_and_of_the_diffs() -> None:
    out = {f.name: f for f in msgspec.structs.fields(ProductOut)}
    for f in msgspec.structs.fields(Product):
        assert f.name in out, f.name
        assert out[f.name].type == f.type, f.name
    assert list(PRODUCT_DIFF_FIELDS) == FIELDS
    assert tuple(FIELDS) == columns.PRODUCT_FIELDS
    assert ("source", *FIELDS, "last_seen_job") == columns.STAGED_COLUMNS
    for name in FIELDS:
        assert name in columns.FRAGMENTS["product_columns"].split(", ")
        assert name in columns.FRAGMENTS["product_out"].split(", ")
        if name != "key":  # the conflict target; every other field a sighting may change
            assert f"{name} = " in columns.FRAGMENTS["product_updates"], name


async def test_every_product_field_is_a_column_of_products_of_a_matching_type(pool) -> None:
    async with pool.acquire() as conn:
        types = await _column_types(conn)
    for name in [*FIELDS, *(f.name for f in msgspec.structs.fields(ProductOut))]:
        assert name in types, f"products has no column {name!r}: a migration must add it"
    for name in FIELDS:
        staged = columns.STAGE_TYPES[name]
        assert types[name] in COMPATIBLE[staged], (name, staged, types[name])
        if name in columns.JSON_FIELDS:
            assert types[name] == "jsonb", name


def _value(name: str, tp: mi.Type, column: str, n: int) -> Any:
    """A value of the field's type, not its default, different for each ``n``."""
    if isinstance(tp, mi.UnionType):
        tp = next(t for t in tp.types if not isinstance(t, mi.NoneType))
    if isinstance(tp, mi.LiteralType):
        return sorted(tp.values, key=str)[n % len(tp.values)]
    if isinstance(tp, mi.StrType):
        return f"{n + 1}.50" if column == "numeric" else f"{name}-{n}"
    if isinstance(tp, mi.BoolType):
        return n % 2 == 0
    if isinstance(tp, mi.IntType):
        return 7 + n
    if isinstance(tp, mi.FloatType):
        return 0.5 + n
    if isinstance(tp, mi.DictType):
        return {f"{name}-k": f"{n}.00"}
    if isinstance(tp, mi.ListType):
        return [f"{name}-{n}"]
    raise AssertionError(f"Product.{name}: extend this test for {tp!r}")


async def test_every_product_field_round_trips_through_the_refresher(pool) -> None:
    """A product with every field set, then every field changed: what the refresher stored is
    what the read model shows, field for field."""
    info = mi.type_info(Product)
    assert isinstance(info, mi.StructType)
    async with pool.acquire() as conn:
        types = await _column_types(conn)
        await conn.execute("INSERT INTO sources (name, definition) VALUES ('s', '{}')")
        for job in (1, 2):
            await conn.execute(
                "INSERT INTO jobs (id, source, status, definition) "
                "VALUES ($1, 's', 'completed', '{}')",
                job,
            )
        for n, job in enumerate((1, 2)):
            values = {
                f.name: _value(f.name, f.type, types.get(f.name, ""), n)
                for f in info.fields
                if f.name != "key"
            }
            product = Product(key="K", **values)
            result = ParseResult(
                attempt=Attempt(job_id=job, entry_id=job, source="s", url="https://s/p/K"),
                product=product,
            )
            assert (await apply_results(conn, [result])).upserts == 1
            (shown,) = await store.list_products(conn, "s")
            assert shown.source == "s" and shown.last_seen_job == job
            got = {name: getattr(shown, name) for name in FIELDS}
            assert got == msgspec.structs.asdict(product), n
            # The JSON the CLI and the API show carries every field, decoded as the read model.
            assert msgspec.convert(msgspec.to_builtins(shown), ProductOut) == shown


def test_api_availability_values_are_the_contracts() -> None:
    from control.api.products import ROUTES

    (param,) = [p for p in ROUTES[0].params if p.name == "availability"]
    availability = typing.get_type_hints(Product)["availability"]
    (literal,) = [a for a in typing.get_args(availability) if a is not type(None)]
    assert param.schema["enum"] == list(typing.get_args(literal))
