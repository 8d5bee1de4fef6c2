"""Exports of a source's products or history as CSV, JSON Lines or Parquet, written as a
stream of byte chunks: rows come from a server-side cursor in batches and leave encoded, so
memory stays flat at a million rows. The CLI (``trawl export``) writes the chunks to a file
or stdout; the API streams them as a download.

Parquet needs pyarrow, an optional extra (``pip install 'trawl[parquet]'``): one row group per
batch, written to a sink that hands its bytes on after every group.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import AsyncIterator, Sequence
from datetime import datetime
from decimal import Decimal
from typing import Any, Protocol

import msgspec

from services.refresher import store
from shared.errors import TrawlError

FORMATS = ("csv", "jsonl", "parquet")
MEDIA_TYPES = {
    "csv": "text/csv; charset=utf-8",
    "jsonl": "application/jsonl",
    "parquet": "application/vnd.apache.parquet",
}
BATCH = 2000  # rows per encoded chunk (and per Parquet row group)


class ExportError(TrawlError):
    """An export cannot be made as asked (a format, a missing optional extra)."""


class Writer(Protocol):
    def batch(self, rows: Sequence[Sequence[Any]]) -> bytes: ...
    def finish(self) -> bytes: ...


def _text(value: Any) -> Any:
    """A value as CSV or JSON shows it: decimals as written, times in ISO 8601, maps as JSON."""
    if isinstance(value, Decimal):
        return f"{value:f}"
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, dict | list):
        return json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    return value


class CsvWriter:
    def __init__(self, names: list[str]) -> None:
        self.names = names
        self.head = True

    def batch(self, rows: Sequence[Sequence[Any]]) -> bytes:
        out = io.StringIO()
        w = csv.writer(out, lineterminator="\n")
        if self.head:
            w.writerow(self.names)
            self.head = False
        w.writerows([[_text(v) for v in row] for row in rows])
        return out.getvalue().encode()

    def finish(self) -> bytes:
        return self.batch([]) if self.head else b""  # an empty export still has its header


class JsonlWriter:
    def __init__(self, names: list[str]) -> None:
        self.names = names
        self.encoder = msgspec.json.Encoder(decimal_format="string")

    def batch(self, rows: Sequence[Sequence[Any]]) -> bytes:
        buf = bytearray()
        for row in rows:
            self.encoder.encode_into(dict(zip(self.names, row, strict=True)), buf, -1)
            buf += b"\n"
        return bytes(buf)

    def finish(self) -> bytes:
        return b""


class _Sink:
    """A write-only file for pyarrow that keeps what it was given until taken."""

    def __init__(self) -> None:
        self.parts: list[bytes] = []
        self.position = 0
        self.closed = False

    def write(self, data: bytes) -> int:
        self.parts.append(bytes(data))
        self.position += len(data)
        return len(data)

    def tell(self) -> int:
        return self.position

    def flush(self) -> None:
        pass

    def close(self) -> None:
        self.closed = True

    def take(self) -> bytes:
        out, self.parts = b"".join(self.parts), []
        return out


def _pyarrow() -> Any:
    try:
        import pyarrow
        import pyarrow.parquet  # the submodule must load too
    except ImportError:
        raise ExportError(
            "parquet needs pyarrow, an optional extra: pip install 'trawl[parquet]' "
            "(or choose --format csv or jsonl)"
        ) from None
    return pyarrow


class ParquetWriter:
    def __init__(self, columns: list[tuple[str, str]]) -> None:
        pa = _pyarrow()
        self.pa = pa
        types = {
            "int2": pa.int64(),
            "int4": pa.int64(),
            "int8": pa.int64(),
            "float4": pa.float64(),
            "float8": pa.float64(),
            "bool": pa.bool_(),
            "timestamptz": pa.timestamp("us", tz="UTC"),
        }
        # Prices stay decimal strings as written (a numeric has no fixed scale); JSON as text.
        self.convert = [t not in types for _, t in columns]
        self.schema = pa.schema([(name, types.get(t, pa.string())) for name, t in columns])
        self.sink = _Sink()
        self.writer = pa.parquet.ParquetWriter(self.sink, self.schema, compression="zstd")

    def batch(self, rows: Sequence[Sequence[Any]]) -> bytes:
        if not rows:
            return b""
        arrays = []
        for i, field in enumerate(self.schema):
            values = [row[i] for row in rows]
            if self.convert[i]:
                values = [None if v is None else str(_text(v)) for v in values]
            arrays.append(self.pa.array(values, type=field.type))
        self.writer.write_table(self.pa.Table.from_arrays(arrays, schema=self.schema))
        return self.sink.take()

    def finish(self) -> bytes:
        self.writer.close()
        return self.sink.take()


def writer(fmt: str, columns: list[tuple[str, str]]) -> Writer:
    names = [name for name, _ in columns]
    if fmt == "csv":
        return CsvWriter(names)
    if fmt == "jsonl":
        return JsonlWriter(names)
    if fmt == "parquet":
        return ParquetWriter(columns)
    raise ExportError(f"format: one of {', '.join(FORMATS)}, not {fmt!r}")


def check_format(fmt: str) -> None:
    """Fail before any byte goes out: an unknown format, or Parquet without its extra."""
    if fmt not in FORMATS:
        raise ExportError(f"format: one of {', '.join(FORMATS)}, not {fmt!r}")
    if fmt == "parquet":
        _pyarrow()


async def chunks(
    conn: store.Conn, source: str, fmt: str, *, history: bool, since: datetime | None
) -> AsyncIterator[bytes]:
    """The export's bytes, a batch at a time. Runs inside a transaction of ``conn``."""
    check_format(fmt)
    export = await store.export(conn, source, history=history, since=since, prefetch=BATCH)
    out = writer(fmt, export.columns)
    batch: list[Sequence[Any]] = []
    async for row in export.rows:
        batch.append(tuple(row))
        if len(batch) >= BATCH:
            yield out.batch(batch)
            batch = []
    if batch:
        yield out.batch(batch)
    yield out.finish()


def filename(source: str, fmt: str, *, history: bool) -> str:
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in source) or "source"
    return f"{safe}-{'history' if history else 'products'}.{fmt}"
