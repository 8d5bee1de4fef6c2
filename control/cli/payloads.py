"""CLI commands on stored pages and history: ``payloads list|show|latest|diff``, ``diff`` (job to
job of a source) and ``replay`` (re-parse a job's payloads). See control/cli/__init__.py for how
commands register."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from control.cli import add_command, command, emit
from shared.settings import Settings


def register(sub) -> None:
    pay = add_command(
        sub, "payloads", "stored pages: list, show, latest for a URL, diff two", json_flag=False
    )
    psub = pay.add_subparsers(dest="action", required=True, metavar="ACTION")
    lst = psub.add_parser("list", help="payload records, newest first")
    lst.add_argument("--url", help="only this URL")
    lst.add_argument("--job", type=int, help="only this job")
    lst.add_argument("--limit", type=int, default=50)
    lst.add_argument("--offset", type=int, default=0)
    show = psub.add_parser("show", help="one payload's record (and its decoded body)")
    show.add_argument("ref", help="payload reference, e.g. js:<sha256>")
    show.add_argument("--body", action="store_true", help="print the decoded page too")
    latest = psub.add_parser("latest", help="the newest payload of a URL")
    latest.add_argument("url")
    diff = psub.add_parser(
        "diff", help="diff two payloads of a page: REF_A REF_B, or --url for its last two"
    )
    diff.add_argument("refs", nargs="*", metavar="REF")
    diff.add_argument("--url", help="diff the two newest different payloads of this URL")
    for p in (lst, show, latest, diff):
        p.add_argument("--json", action="store_true", help="machine-readable output")

    jd = add_command(sub, "diff", "what changed in a source between two jobs")
    jd.add_argument("source")
    jd.add_argument("job_a", type=int)
    jd.add_argument("job_b", type=int)

    rp = add_command(sub, "replay", "re-parse a job's stored payloads and re-apply the products")
    rp.add_argument("job_id", type=int)


def _store(client):
    from shared.payloads import JetStreamPayloadStore

    return JetStreamPayloadStore(client.nc.jetstream(), client.names)


@command("payloads")
async def cmd_payloads(args: argparse.Namespace, settings: Settings) -> int:
    from control import payload_index as idx
    from control.client import TrawlClient

    needs_store = args.action == "diff" or (args.action == "show" and args.body)
    async with (
        TrawlClient(settings, nats=needs_store) as client,
        (await client.pool()).acquire() as conn,
    ):
        if args.action == "list":
            data: Any = await idx.list_payloads(
                conn, url=args.url, job_id=args.job, limit=args.limit, offset=args.offset
            )
            emit(args, data, lambda: _print_list(data))
            return 0
        if args.action == "latest":
            data = await idx.latest_payload(conn, args.url)
            return _one(args, data, f"no payload stored for {args.url}")
        if args.action == "show":
            data = await idx.payload_meta(conn, args.ref)
            if data is not None and args.body:
                from services.parser.decode import decode_html

                body = await _store(client).get(args.ref)
                data["body"] = decode_html(body, data["content_type"])
            return _one(args, data, f"payload {args.ref} not found")
        refs = list(args.refs)
        if args.url and not refs:
            refs = list(reversed(await idx.recent_refs(conn, args.url, 2)))
        if len(refs) != 2:
            print(
                "trawl: payloads diff needs two payloads (REF_A REF_B or --url URL with two "
                "different stored bodies)",
                file=sys.stderr,
            )
            return 2
        data = await idx.diff_payloads(_store(client), conn, refs[0], refs[1])
    emit(args, data, lambda: _print_payload_diff(data))
    return 0


@command("diff")
async def cmd_diff(args: argparse.Namespace, settings: Settings) -> int:
    from control.client import TrawlClient
    from control.payload_index import diff_jobs

    async with (
        TrawlClient(settings, nats=False) as client,
        (await client.pool()).acquire() as conn,
    ):
        data = await diff_jobs(conn, args.source, args.job_a, args.job_b)
    emit(args, data, lambda: _print_job_diff(data))
    return 0


@command("replay")
async def cmd_replay(args: argparse.Namespace, settings: Settings) -> int:
    from control.client import TrawlClient
    from control.replay import replay_job

    async with TrawlClient(settings) as client:
        report = await replay_job(await client.pool(), _store(client), args.job_id)
    data = report.to_dict()
    emit(
        args,
        data,
        lambda: print(
            f"job {report.job_id} ({report.source}) replayed: {report.pages} pages, "
            f"{report.products} products, {report.snapshots} changed, "
            f"{report.missing_payloads} payloads missing"
        ),
    )
    return 0


# -- human output -----------------------------------------------------------------------------


def _one(args: argparse.Namespace, data: dict | None, missing: str) -> int:
    if data is None:
        print(f"trawl: {missing}", file=sys.stderr)
        return 1

    def human() -> None:
        body = data.pop("body", None)
        for k, v in data.items():
            print(f"{k:14} {v}")
        if body is not None:
            print()
            print(body)

    emit(args, data, human)
    return 0


def _print_list(rows: list[dict]) -> None:
    for r in rows:
        print(
            f"{r['fetched_at'][:19]}  job {r['job_id'] or '-':>5}  {r['status'] or '-':>3}  "
            f"{r['size']:>8}  {r['ref'][:19]}  {r['url']}"
        )
    if not rows:
        print("no payloads")


def _print_payload_diff(data: dict) -> None:
    if data["same_body"]:
        print("identical bodies")
    elif data["diff"]:
        print(data["diff"])
        if data["diff_truncated"]:
            print("… (diff truncated)")
    changes = data["product_changes"]
    if changes:
        print("\nproduct fields:")
        for field, ab in changes.items():
            print(f"  {field:13} {ab['a']!s:>24} → {ab['b']!s}")
    else:
        print("\nproduct fields: no change")


def _print_job_diff(data: dict) -> None:
    print(
        f"{data['source']}: job {data['job_a']} ({data['seen_a']} products) → "
        f"job {data['job_b']} ({data['seen_b']} products)"
    )
    print(f"added   {len(data['added']):5}  {' '.join(data['added'][:20])}")
    print(f"removed {len(data['removed']):5}  {' '.join(data['removed'][:20])}")
    print(f"price changes {len(data['price_changes'])}:")
    for c in data["price_changes"]:
        print(f"  {c['key']:16} {c['price_a']} → {c['price_b']} {c['currency'] or ''}")
    print(f"stock changes {len(data['stock_changes'])}:")
    for c in data["stock_changes"]:
        print(f"  {c['key']:16} {c['availability_a']} → {c['availability_b']}")
