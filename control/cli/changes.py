"""Price monitoring commands: ``trawl changes`` (the product change events) and ``trawl alerts``
(the notifier's rules)."""

from __future__ import annotations

import argparse
import re
from datetime import UTC, datetime, timedelta
from typing import Any

import msgspec

from control.cli import add_command, command, emit
from schemas.messages import CHANGE_KINDS
from schemas.read import AlertCondition, AlertRuleIn
from shared.alert_rules import percent, seconds
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
    changes.add_argument(
        "--verification",
        action="append",
        choices=("pending", "confirmed", "cancelled", "unknown"),
        help="list the candidates held for verification in this state (repeatable) instead "
        "of the emitted events",
    )

    alerts = add_command(sub, "alerts", "manage alert rules (webhooks, Apprise)", json_flag=False)
    actions = alerts.add_subparsers(dest="action", required=True, metavar="ACTION")
    add = actions.add_parser("add", help="alert on a source's changes")
    add.add_argument("source")
    when = add.add_mutually_exclusive_group(required=True)
    when.add_argument("--below", metavar="PRICE", help="the price paid falls under PRICE")
    when.add_argument("--drop", metavar="N%%", help="the price falls by at least N %%")
    when.add_argument("--change", action="store_true", help="any price change")
    for kind in ("back-in-stock", "out-of-stock", "delisted"):
        when.add_argument(f"--{kind}", action="store_true", help=f"the product is {kind}")
    add.add_argument("--product", help="only this product key")
    add.add_argument("--variant", help="only this variant key")
    add.add_argument("--gtin", help="only this GTIN")
    add.add_argument("--min-change", default="0", metavar="N%%", help="least price change")
    add.add_argument("--debounce", default="1h", help="one alert per product per: 30m, 1h, 1d")
    add.add_argument("--webhook", help="https URL the signed event JSON is POSTed to")
    add.add_argument("--secret", help="HMAC key of the signature (default: generated)")
    add.add_argument("--apprise", help="an Apprise URL (needs the alerts extra)")
    add.add_argument(
        "--allow-private", action="append", default=[], metavar="CIDR", help="webhook network"
    )
    add.add_argument("--json", action="store_true")
    ls = actions.add_parser("list", help="list alert rules")
    ls.add_argument("source", nargs="?")
    ls.add_argument("--json", action="store_true")
    rm = actions.add_parser("rm", help="delete an alert rule")
    rm.add_argument("id", type=int)
    rm.add_argument("--json", action="store_true")


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


def rule_from_args(args: argparse.Namespace) -> AlertRuleIn:
    condition: AlertCondition
    threshold = None
    if args.below is not None:
        condition, threshold = "below", args.below
    elif args.drop is not None:
        condition, threshold = "drop", str(percent(args.drop, "--drop"))
    elif args.change:
        condition = "change"
    elif args.back_in_stock:
        condition = "back_in_stock"
    elif args.out_of_stock:
        condition = "out_of_stock"
    else:
        condition = "delisted"
    return AlertRuleIn(
        source=args.source,
        condition=condition,
        threshold=threshold,
        product_key=args.product,
        variant_key=args.variant,
        gtin=args.gtin,
        min_change=percent(args.min_change, "--min-change"),
        debounce_seconds=seconds(args.debounce, "--debounce"),
        webhook=args.webhook,
        secret=args.secret,
        apprise=args.apprise,
        allow_private=args.allow_private,
    )


@command("alerts")
async def cmd_alerts(args: argparse.Namespace, settings: Settings) -> int:
    from control.client import TrawlClient
    from services.notifier import store
    from services.notifier.alerts import validate

    async with TrawlClient(settings, nats=False) as client, (await client.pool()).acquire() as conn:
        if args.action == "add":
            rule = validate(rule_from_args(args))
            out = await store.add_rule(conn, rule)
            data: Any = msgspec.to_builtins(out)
            emit(
                args, data, lambda: print(f"rule {out.id}: {_describe(data)}; secret {out.secret}")
            )
        elif args.action == "list":
            rules = [
                msgspec.to_builtins(msgspec.structs.replace(r, secret=""))
                for r in await store.list_rules(conn, args.source)
            ]
            emit(args, rules, lambda: [print(f"{r['id']}: {_describe(r)}") for r in rules])
        else:
            if not await store.delete_rule(conn, args.id):
                raise ConfigError(f"no alert rule {args.id}")
            emit(args, {"deleted": args.id}, lambda: print(f"rule {args.id} deleted"))
    return 0


def _describe(r: dict[str, Any]) -> str:
    what = r["condition"] + (f" {r['threshold']}" if r.get("threshold") else "")
    scope = " ".join(f"{k}={r[k]}" for k in ("product_key", "variant_key", "gtin") if r.get(k))
    to = r.get("webhook") or r.get("apprise") or "?"
    origin = " (in the source file)" if r.get("origin") == "source" else ""
    return f"{r['source']} {scope} {what} → {to}{origin}".replace("  ", " ")


@command("changes")
async def cmd_changes(args: argparse.Namespace, settings: Settings) -> int:
    from control.client import TrawlClient
    from services.refresher import store

    where = store.ChangeFilter(
        source=args.source,
        since=since(args.since),
        kinds=args.kind,
        verification=args.verification,
    )
    async with TrawlClient(settings, nats=False) as client, (await client.pool()).acquire() as conn:
        events = await store.list_events(conn, where, cursor=args.after, limit=args.limit)
        counts = await store.verification_counts(conn, where)
    data = [msgspec.to_builtins(e) for e in events]
    emit(args, data, lambda: _print(args.source, data, counts))
    return 0


def _state(s: dict[str, Any] | None) -> str:
    if not s:
        return ""
    price = s.get("sale_price") or s.get("price") or "?"
    return f"{price} {s.get('currency') or ''} {s.get('availability') or ''}".strip()


def _print(source: str, data: list[dict[str, Any]], counts: dict[str, int]) -> None:
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
    if counts:  # what verification before alerting did (docs/architecture.md)
        shown = ", ".join(
            f"{counts.get(k, 0)} {k}" for k in ("confirmed", "cancelled", "unknown", "pending")
        )
        print(f"verified candidates: {shown}")
