"""``trawl export SOURCE --format csv|jsonl|parquet [--history] [--since] [-o FILE]``: a
source's products (or every snapshot) streamed from the database to a file or stdout, in
constant memory (control/export.py)."""

from __future__ import annotations

import argparse
import contextlib
import sys
from datetime import UTC, datetime
from typing import BinaryIO

from control.cli import add_command, command
from shared.errors import TrawlError
from shared.settings import Settings


def _since(raw: str) -> datetime:
    try:
        at = datetime.fromisoformat(raw)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an ISO 8601 date or time: {raw!r}") from None
    return at if at.tzinfo else at.replace(tzinfo=UTC)


def _open(path: str) -> BinaryIO:
    # A CLI writing one stream: blocking writes hold nothing else up.
    return open(path, "wb")


def register(sub) -> None:
    exp = add_command(
        sub,
        "export",
        "write a source's products or history as CSV, JSONL or Parquet",
        json_flag=False,
    )
    exp.add_argument("source")
    exp.add_argument("--format", choices=("csv", "jsonl", "parquet"), default="csv")
    exp.add_argument(
        "--history", action="store_true", help="every price/stock snapshot, not the products"
    )
    exp.add_argument(
        "--since", type=_since, help="only rows changed (products: updated) since, ISO 8601"
    )
    exp.add_argument("-o", "--output", help="a file to write (default: stdout)")


@command("export")
async def cmd_export(args: argparse.Namespace, settings: Settings) -> int:
    from control import export
    from control.client import TrawlClient
    from services.scheduler.store import sources

    export.check_format(args.format)  # Parquet without pyarrow fails before any output
    if args.format == "parquet" and args.output is None and sys.stdout.isatty():
        raise TrawlError("parquet is binary: give --output FILE or redirect stdout")
    async with TrawlClient(settings, nats=False) as client:
        pool = await client.pool()
        async with pool.acquire() as conn:
            if not await sources.exists(conn, args.source):
                raise TrawlError(f"no source {args.source!r}")
            with contextlib.ExitStack() as stack:
                out = stack.enter_context(_open(args.output)) if args.output else sys.stdout.buffer
                async with conn.transaction(readonly=True):
                    async for chunk in export.chunks(
                        conn, args.source, args.format, history=args.history, since=args.since
                    ):
                        out.write(chunk)
                out.flush()
    return 0
