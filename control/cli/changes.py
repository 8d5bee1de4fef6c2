"""Price monitoring commands: ``trawl changes`` (the product change events)."""

from __future__ import annotations

import argparse
import re
from datetime import UTC, datetime, timedelta
from typing import Any

import msgspec

from control.cli import add_command, command, emit
from schemas.messages import CHANGE_KINDS
from shared.errors import ConfigError
from shared.settings import Settings

_AGO = re.compile(r"(\d+)\s*([smhd])")
_UNIT = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days"}


def register(sub) -> None:
    changes = add_command(sub, "changes", "list a source's product change events")
    changes.add_argument("source")
    changes.add_argument("--since", help="a time (ISO 8601) or an age: 30m, 12h, 7d")
    changes.add_argument("--kind", action="append", choices=CHANGE_KINDS, help="repeatable")
    changes.add_argument("--after", type=int, default=0, help="the cursor: an event id")
    changes.add_argument("--limit", type=int, default=100)


def since(raw: str | None, now: datetime | None = None) -> datetime | None:
    """``--since``: an ISO time (UTC unless it says) or an age before now."""
    if raw is None:
        return None
    if m := _AGO.fullmatch(raw.strip()):
        return (now or datetime.now(UTC)) - timedelta(**{_UNIT[m[2]]: int(m[1])})
    try:
        at = datetime.fromisoformat(raw)
    except ValueError:
        raise ConfigError(f"--since: expected a time or an age like 12h, got {raw!r}") from None
    return at if at.tzinfo is not None else at.replace(tzinfo=UTC)


@command("changes")
async def cmd_changes(args: argparse.Namespace, settings: Settings) -> int:
    from control.client import TrawlClient
    from services.refresher import store

    where = store.ChangeFilter(source=args.source, since=since(args.since), kinds=args.kind)
    async with TrawlClient(settings, nats=False) as client, (await client.pool()).acquire() as conn:
        events = await store.list_events(conn, where, after=args.after, limit=args.limit)
    data = [msgspec.to_builtins(e) for e in events]
    emit(args, data, lambda: _print(args.source, data))
    return 0


def _state(s: dict[str, Any] | None) -> str:
    if not s:
        return ""
    price = s.get("sale_price") or s.get("price") or "?"
    return f"{price} {s.get('currency') or ''} {s.get('availability') or ''}".strip()


def _print(source: str, data: list[dict[str, Any]]) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table("id", "at", "kind", "key", "variant", "before", "after", "change", title=source)
    for e in data:
        at = datetime.fromtimestamp(e["at"], UTC).strftime("%Y-%m-%d %H:%M:%S")
        change = f"{e['percent']:+.2f} %" if e.get("percent") is not None else ""
        table.add_row(
            str(e["id"]),
            at,
            e["kind"],
            e["key"],
            e["variant"],
            _state(e.get("before")),
            _state(e.get("after")),
            change,
        )
    Console().print(table)
