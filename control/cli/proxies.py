"""CLI commands: ``trawl proxies add URL | list | rm ID | enable ID``.

Writes go through the scheduler's ``proxies`` module (the same code the scheduler runs), which
also publishes the active list to the fetchers' KV bucket. URLs are shown masked.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import msgspec

from control.cli import add_command, command, emit
from shared.settings import Settings


def register(sub) -> None:
    proxies = add_command(sub, "proxies", "manage the proxy registry", json_flag=False)
    actions = proxies.add_subparsers(dest="action", required=True, metavar="ACTION")
    add = actions.add_parser("add", help="register a proxy: http://[user:password@]host:port")
    add.add_argument("url")
    actions.add_parser("list", help="list proxies with their health")
    rm = actions.add_parser("rm", help="remove a proxy")
    rm.add_argument("proxy_id", type=int, metavar="ID")
    enable = actions.add_parser("enable", help="re-activate a proxy and reset its failures")
    enable.add_argument("proxy_id", type=int, metavar="ID")
    for parser in (add, rm, enable, actions.choices["list"]):
        parser.add_argument("--json", action="store_true", help="machine-readable output")


@asynccontextmanager
async def _clients(settings: Settings, *, nats: bool) -> AsyncIterator[tuple[Any, Any, Any]]:
    """(connection, JetStream context or None, names); NATS only for writes."""
    from shared.bus import connect
    from shared.db import open_pool
    from shared.names import Names

    pool = await open_pool(settings.database_url, min_size=1, max_size=1, attempts=3)
    nc = None
    try:
        if nats:
            nc = await connect(settings.nats_url, name="trawl-cli-proxies", attempts=3)
        async with pool.acquire() as conn:
            yield conn, nc.jetstream() if nc else None, Names(settings.namespace)
    finally:
        if nc is not None:
            await nc.close()
        await pool.close()


def _out(row: dict[str, Any]) -> dict[str, Any]:
    """A registry row as the ``ProxyOut`` read model (URL masked, health judged), JSON-ready."""
    from services.scheduler.proxies import proxy_out

    out: dict[str, Any] = msgspec.to_builtins(proxy_out(row))
    return out


def _print_rows(rows: list[dict[str, Any]]) -> None:
    if not rows:
        print("no proxies")
        return
    print(f"{'ID':>4}  {'ACTIVE':6}  {'OK':>7}  {'FAIL':>6}  {'STREAK':>6}  URL / LAST ERROR")
    for r in rows:
        print(
            f"{r['id']:>4}  {'yes' if r['active'] else 'no':6}  {r['successes']:>7}  "
            f"{r['failures']:>6}  {r['consecutive_failures']:>6}  {r['url']}"
        )
        if r["last_error"]:
            print(f"{'':>37}{r['last_error'][:80]}")


@command("proxies")
async def cmd_proxies(args: argparse.Namespace, settings: Settings) -> int:
    from services.scheduler import proxies as registry

    writes = args.action != "list"
    async with _clients(settings, nats=writes) as (conn, js, names):
        if args.action == "add":
            from shared.guard import ProxyRules, UnsafeURL, check_proxy_resolved

            try:
                await check_proxy_resolved(args.url.strip(), ProxyRules.from_settings(settings))
            except UnsafeURL as exc:
                print(f"trawl: proxy refused: {exc.reason}", file=sys.stderr)
                return 2
            row = _out(await registry.add_proxy(conn, js, names, args.url))
            emit(args, row, lambda: print(f"proxy {row['id']} added: {row['url']}"))
            return 0
        if args.action == "list":
            rows = [_out(r) for r in await registry.list_proxies(conn)]
            emit(args, rows, lambda: _print_rows(rows))
            return 0
        if args.action == "rm":
            found = await registry.remove_proxy(conn, js, names, args.proxy_id)
            result: dict[str, Any] = {"id": args.proxy_id, "removed": found}
            done = f"proxy {args.proxy_id} removed"
        else:
            enabled = await registry.enable_proxy(conn, js, names, args.proxy_id)
            found = enabled is not None
            result = _out(enabled) if enabled else {"id": args.proxy_id, "enabled": False}
            done = f"proxy {args.proxy_id} enabled"
    if not found:
        missing = f"trawl: proxy {args.proxy_id} not found"
        emit(args, result, lambda: print(missing, file=sys.stderr))
        return 1
    emit(args, result, lambda: print(done))
    return 0
