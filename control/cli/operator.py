"""CLI commands for operators: ``watch``, ``dlq``, ``domains``, ``workers``.

Everything but ``watch`` goes through the admin API (``TRAWL_API_LISTEN``, bearer
``TRAWL_API_TOKEN``), so the CLI does exactly what the API allows; ``watch`` follows job events
on NATS directly.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any

from control.cli import add_command, command, emit, install_stop
from shared.errors import TrawlError
from shared.settings import Settings


class ApiError(TrawlError):
    """The admin API refused or could not be reached."""


def register(sub) -> None:
    watch = add_command(sub, "watch", "stream job events live (one job, or every job)")
    watch.add_argument("job_id", nargs="?", type=int, help="only this job (from its start)")

    dlq = add_command(sub, "dlq", "dead letters: list, show, requeue, purge", json_flag=False)
    dlq_sub = dlq.add_subparsers(dest="action", required=True, metavar="ACTION")
    p = _json(dlq_sub.add_parser("list", help="newest dead letters"))
    p.add_argument("--stream", help="only letters from this stream (fetch, fetched, …)")
    p.add_argument("--limit", type=int, default=20)
    p = _json(dlq_sub.add_parser("show", help="one dead letter with its body and headers"))
    p.add_argument("seq", type=int)
    p = _json(dlq_sub.add_parser("requeue", help="republish letters to their original subject"))
    p.add_argument("seq", type=int, nargs="+")
    p = _json(dlq_sub.add_parser("purge", help="delete every dead letter (or one stream's)"))
    p.add_argument("--stream")

    dom = add_command(
        sub, "domains", "domains: pacing state, pause, resume, reset, pace, why", json_flag=False
    )
    dom_sub = dom.add_subparsers(dest="action", required=True, metavar="ACTION")
    p = _json(dom_sub.add_parser("list", help="domains with their pace and blocks"))
    p.add_argument("--limit", type=int, default=100)
    for name in ("pause", "resume"):
        _json(dom_sub.add_parser(name, help=f"{name} dispatch to a domain")).add_argument("domain")
    p = _json(
        dom_sub.add_parser(
            "reset", help="clear a domain's back-off and waits (Retry-After); retries due now"
        )
    )
    p.add_argument("domain")
    p = _json(dom_sub.add_parser("pace", help="set a domain's delays and concurrency"))
    p.add_argument("domain")
    p.add_argument("--min-delay", type=float)
    p.add_argument("--max-delay", type=float)
    p.add_argument("--max-in-flight", type=int)
    p = _json(dom_sub.add_parser("why", help="what the open work is waiting for"))
    p.add_argument("domain", nargs="?")
    p.add_argument("--url", help="one URL only")
    p.add_argument("--limit", type=int, default=20)

    add_command(sub, "workers", "live instances of every service, with their stats")


def _json(p: argparse.ArgumentParser) -> argparse.ArgumentParser:
    p.add_argument("--json", action="store_true", help="machine-readable output")
    return p


# -- the admin API ----------------------------------------------------------------------------
async def call(
    settings: Settings, method: str, path: str, *, body: Any = None, params: dict | None = None
) -> Any:
    import aiohttp

    headers = {"Authorization": f"Bearer {settings.api_token}"} if settings.api_token else {}
    url = f"http://{settings.api_listen}{path}"
    query = {k: str(v) for k, v in (params or {}).items() if v is not None}
    try:
        async with (
            aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=30)) as http,
            http.request(method, url, json=body, params=query, headers=headers) as resp,
        ):
            data = await resp.json(content_type=None) if resp.status != 204 else None
    except aiohttp.ClientConnectionError as exc:
        raise ApiError(
            f"admin API at {settings.api_listen} unreachable ({exc}); is a scheduler running?"
        ) from None
    if resp.status >= 400:
        detail = (data or {}).get("detail") or (data or {}).get("title") or resp.reason
        raise ApiError(f"{method} {path}: {resp.status} {detail}")
    return data


# -- commands ---------------------------------------------------------------------------------
@command("watch")
async def cmd_watch(args: argparse.Namespace, settings: Settings) -> int:
    import asyncio

    import msgspec
    from nats.js import api

    from control.client import TrawlClient
    from schemas.messages import JobEvent

    decoder = msgspec.json.Decoder(JobEvent)
    stopped = asyncio.Event()
    install_stop(stopped.set)
    async with TrawlClient(settings) as client:
        assert client.nc is not None
        js = client.nc.jetstream()
        # One job: its whole history, then live. Every job: only what happens from now on.
        subject = client.names.job_events(args.job_id if args.job_id else "*")
        policy = api.DeliverPolicy.ALL if args.job_id else api.DeliverPolicy.NEW
        sub = await js.subscribe(subject, ordered_consumer=True, deliver_policy=policy)
        try:
            while not stopped.is_set():
                try:
                    msg = await sub.next_msg(timeout=0.5)
                except TimeoutError:
                    continue
                event = decoder.decode(msg.data)
                _print_event(args, event)
                if args.job_id and event.event in ("refreshed", "cancelled"):
                    break
        finally:
            await sub.unsubscribe()
    return 0


def _print_event(args: argparse.Namespace, event: Any) -> None:
    import msgspec

    if args.json:
        print(json.dumps(msgspec.to_builtins(event)), flush=True)
        return
    c = event.counters
    when = time.strftime("%H:%M:%S", time.localtime(event.at or time.time()))
    print(
        f"{when} job {event.job_id} {event.source} {event.event:<10} {event.status:<10} "
        f"{c.get('total', 0) - c.get('open', 0)}/{c.get('total', 0)} pages "
        f"{c.get('products', 0)} products {c.get('failed', 0)} failed",
        flush=True,
    )


@command("dlq")
async def cmd_dlq(args: argparse.Namespace, settings: Settings) -> int:
    if args.action == "list":
        page = await call(
            settings, "GET", "/api/dlq", params={"stream": args.stream, "limit": args.limit}
        )

        def human() -> None:
            print(f"{page['total']} dead letters")
            for letter in page["items"]:
                seq, stream, n = letter["seq"], letter["stream"], letter["num_delivered"]
                print(f"{seq:>6}  {stream:<8} {n}x  {letter['reason'][:100]}")

        emit(args, page, human)
    elif args.action == "show":
        letter = await call(settings, "GET", f"/api/dlq/{args.seq}")

        def show() -> None:
            n = letter["num_delivered"]
            print(f"#{letter['seq']} from {letter['subject']} after {n} deliveries")
            print(f"reason: {letter['reason']}")
            for k, v in letter["headers"].items():
                print(f"  {k}: {v}")
            print(
                json.dumps(letter["body"], indent=2)
                if letter["body"] is not None
                else letter["data"]
            )

        emit(args, letter, show)
    elif args.action == "requeue":
        done = [await call(settings, "POST", f"/api/dlq/{seq}/requeue") for seq in args.seq]
        emit(args, done, lambda: [print(f"#{d['seq']} → {d['subject']}") for d in done])
    else:
        out = await call(settings, "POST", "/api/dlq/purge", body={"stream": args.stream})
        emit(args, out, lambda: print(f"purged {out['purged']} dead letters"))
    return 0


@command("domains")
async def cmd_domains(args: argparse.Namespace, settings: Settings) -> int:
    if args.action == "list":
        rows = await call(settings, "GET", "/api/domains", params={"limit": args.limit})
        emit(args, rows, lambda: _print_domains(rows))
    elif args.action in ("pause", "resume"):
        out = await call(settings, "POST", f"/api/domains/{args.domain}/{args.action}")
        emit(args, out, lambda: print(f"{out['domain']} {out['status']}"))
    elif args.action == "reset":
        out = await call(settings, "POST", f"/api/domains/{args.domain}/reset")
        emit(args, out, lambda: print(f"{out['domain']} reset, {out['retries_due']} retries due"))
    elif args.action == "pace":
        body = {
            "min_delay": args.min_delay,
            "max_delay": args.max_delay,
            "max_in_flight": args.max_in_flight,
        }
        out = await call(settings, "POST", f"/api/domains/{args.domain}/pace", body=body)
        emit(args, out, lambda: print(f"{out['domain']} paced"))
    else:
        path = f"/api/domains/{args.domain}/why" if args.domain else "/api/domains/why"
        rows = await call(settings, "GET", path, params={"url": args.url, "limit": args.limit})
        emit(
            args,
            rows,
            lambda: [print(f"{r['url']}\n    {r['state']}: {r['reason']}") for r in rows],
        )
    return 0


def _print_domains(rows: list[dict[str, Any]]) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(
        "domain", "state", "in flight", "delay s", "backoff", "pending", "waiting", "blocks/h"
    )
    for d in rows:
        table.add_row(
            d["domain"],
            "paused" if d["paused"] else "active",
            f"{d['in_flight']}/{d['max_in_flight']}",
            f"{d['min_delay']:g}–{d['max_delay']:g}",
            f"{d['backoff']:.2f}",
            str(d["pending"]),
            str(d["waiting"]),
            str(d["blocked_last_hour"]),
        )
    Console().print(table)


@command("workers")
async def cmd_workers(args: argparse.Namespace, settings: Settings) -> int:
    rows = await call(settings, "GET", "/api/workers")

    def human() -> None:
        if not rows:
            print("no live workers", file=sys.stderr)
        for w in rows:
            stats = " ".join(f"{k}={v}" for k, v in w["stats"].items())
            print(f"{w['service']:<10} {w['instance']:<24} {stats}")

    emit(args, rows, human)
    return 0
