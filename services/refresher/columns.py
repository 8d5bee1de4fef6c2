"""The product columns the refresher writes, derived from the ``Product`` Struct.

Every field of ``schemas.messages.Product`` is a column of ``products`` of the same name; the
refresher adds its bookkeeping (``source``, ``last_seen_job``, misses, timestamps). So the
staging table, the COPY rows, the upsert's column and SET lists and the comparison of a
sighting with its stored row all come from ``msgspec.structs.fields(Product)``: a new product
field is a migration adding its column, the field, and the parser filling it, and nothing here.

A field stages by its Python type: text for strings (and string Literals), bigint for ints,
double precision for floats, boolean, and JSON text for dicts and lists. On the way from the
staging table to ``products`` each staged value is cast to its column's own type, read from
the catalog (``numeric`` prices, ``jsonb`` price lists), so the migration decides the type.
"""

from __future__ import annotations

from collections.abc import Mapping

import msgspec
import msgspec.inspect as mi

from schemas.messages import Product
from schemas.read import ProductOut
from shared.errors import TrawlError

# Every Product field, in declaration order (``key`` first).
PRODUCT_FIELDS: tuple[str, ...] = tuple(f.name for f in msgspec.structs.fields(Product))
# A staged product row: the Product fields between the two bookkeeping columns.
STAGED_COLUMNS: tuple[str, ...] = ("source", *PRODUCT_FIELDS, "last_seen_job")
# What the read model shows: the Product fields plus the bookkeeping (schemas/read.py).
OUT_COLUMNS: tuple[str, ...] = tuple(f.name for f in msgspec.structs.fields(ProductOut))
# Fields a page may leave out although the product has them (a listing tile without the
# brand, an API page without the image): an absent value keeps the stored one. Every other
# field says what the page says, absent included (a sku or a sale price can go away).
KEEP_WHEN_ABSENT = frozenset({"name", "brand", "url", "image"})


class ColumnError(TrawlError):
    """The products table does not match the Product Struct."""


def _stage_type(name: str, tp: mi.Type) -> str:
    if isinstance(tp, mi.UnionType):
        rest = [t for t in tp.types if not isinstance(t, mi.NoneType)]
        if len(rest) == 1:
            return _stage_type(name, rest[0])
    elif isinstance(tp, mi.StrType) or (
        isinstance(tp, mi.LiteralType) and all(isinstance(v, str) for v in tp.values)
    ):
        return "text"
    elif isinstance(tp, mi.BoolType):
        return "boolean"
    elif isinstance(tp, mi.IntType):
        return "bigint"
    elif isinstance(tp, mi.FloatType):
        return "double precision"
    elif isinstance(tp, (mi.DictType, mi.ListType)):
        return "text"  # JSON, cast to the column's jsonb on the way out
    raise ColumnError(f"Product.{name}: no staging type for {tp!r}")


def _json_empty(tp: mi.Type) -> str | None:
    """The empty JSON value of a dict or list field ('{}' or '[]'), None for other fields."""
    if isinstance(tp, mi.UnionType):
        return next(filter(None, map(_json_empty, tp.types)), None)
    if isinstance(tp, mi.DictType):
        return "{}"
    if isinstance(tp, mi.ListType):
        return "[]"
    return None


_INFO = mi.type_info(Product)
assert isinstance(_INFO, mi.StructType)
STAGE_TYPES: dict[str, str] = {
    "source": "text",
    **{f.name: _stage_type(f.name, f.type) for f in _INFO.fields},
    "last_seen_job": "bigint",
}
# Fields stored as JSON, with their empty value: staged as JSON text, read back decoded.
JSON_FIELDS: dict[str, str] = {
    f.name: empty for f in _INFO.fields if (empty := _json_empty(f.type)) is not None
}


def _locked(name: str) -> str:
    # An empty JSON value comes back as NULL: nothing to decode for most rows.
    if name in JSON_FIELDS:
        return f"nullif(p.{name}, '{JSON_FIELDS[name]}'::jsonb) AS {name}"
    return f"p.{name}"


def _update(name: str) -> str:
    if name in KEEP_WHEN_ABSENT:
        return f"{name} = coalesce(EXCLUDED.{name}, products.{name})"
    return f"{name} = EXCLUDED.{name}"


# The fragments of queries.sql that come from the Struct (see the head of that file).
FRAGMENTS: dict[str, str] = {
    "staged_product_columns": ", ".join(f"{c} {STAGE_TYPES[c]}" for c in STAGED_COLUMNS),
    "product_columns": ", ".join(STAGED_COLUMNS),
    "locked_products": ", ".join(_locked(c) for c in STAGED_COLUMNS),
    "product_updates": ", ".join(_update(c) for c in PRODUCT_FIELDS if c != "key"),
    "product_out": ", ".join(OUT_COLUMNS),
    # A change event as schemas.messages.ProductChange (store.py decodes it).
    "product_event": "id, source, kind, key, variant, gtin, url, before, after, direction, "
    "percent, job_id, extract(epoch FROM at)::float8 AS at, "
    "CASE WHEN verification = 'confirmed' THEN verify_job END AS verified_by",
}


def staged_products(column_types: Mapping[str, str]) -> str:
    """The select list from the staging table into ``products``: each staged column cast to
    its column's type where the two differ (``column_types``: name → SQL type, from the
    catalog)."""
    out = []
    for name in STAGED_COLUMNS:
        target = column_types.get(name)
        if target is None:
            raise ColumnError(
                f"products has no column {name!r} (a Product field): a migration must add it"
            )
        out.append(f"s.{name}" if target == STAGE_TYPES[name] else f"s.{name}::{target}")
    return ", ".join(out)
