"""CLI commands of the scheduler's domain: one job and its operator actions, schedules."""

from __future__ import annotations

import argparse
import sys
from typing import Any

import msgspec

from control.cli import add_command, command, emit
from shared.settings import Settings

JOB_ACTIONS = ("show", "cancel", "retry", "boost", "pause", "resume")


def register(sub) -> None:
    job = add_command(sub, "job", "show one job, or act on it: trawl job [ACTION] ID")
    job.add_argument(
        "words",
        nargs="+",
        metavar="[ACTION] ID",
        help=f"ACTION is one of {', '.join(JOB_ACTIONS)} (default show)",
    )
    job.add_argument("--amount", type=int, default=20, help="boost: priority points to add")

    sched = add_command(sub, "schedules", "manage schedules", json_flag=False)
    ssub = sched.add_subparsers(dest="action", required=True, metavar="ACTION")
    add = ssub.add_parser("add", help="add a schedule: SOURCE SPEC (@daily, @every 4h, cron)")
    add.add_argument("source")
    add.add_argument("spec")
    add.add_argument("--kind", choices=("refresh", "discovery"), default="refresh")
    ssub.add_parser("list", help="list schedules")
    for name, text in (
        ("enable", "enable a schedule"),
        ("disable", "disable a schedule"),
        ("trigger", "run a schedule now"),
        ("rm", "remove a schedule"),
    ):
        p = ssub.add_parser(name, help=text)
        p.add_argument("schedule_id", type=int)
    for p in ssub.choices.values():
        p.add_argument("--json", action="store_true", help="machine-readable output")


def _job_words(words: list[str]) -> tuple[str, int]:
    if len(words) == 1:
        action, raw = "show", words[0]
    elif len(words) == 2 and words[0] in JOB_ACTIONS:
        action, raw = words
    else:
        raise SystemExit(f"trawl job: expected [ACTION] ID with ACTION in {', '.join(JOB_ACTIONS)}")
    if not raw.isdigit():
        raise SystemExit(f"trawl job: {raw!r} is not a job id")
    return action, int(raw)


@command("job")
async def cmd_job(args: argparse.Namespace, settings: Settings) -> int:
    from control.client import TrawlClient
    from services.scheduler import operations as ops

    action, job_id = _job_words(args.words)
    async with TrawlClient(settings, nats=False) as client:
        if action == "show":
            job = await client.job(job_id)
            if job is None:
                print(f"trawl: job {job_id} not found", file=sys.stderr)
                return 1
            emit(args, job, lambda: TrawlClient.print_job(job))
            return 0
        async with (await client.pool()).acquire() as conn:
            try:
                if action == "cancel":
                    result = await ops.cancel_job(conn, job_id)
                elif action == "retry":
                    result = await ops.retry_failed(conn, job_id)
                elif action == "boost":
                    result = await ops.boost_job(conn, job_id, args.amount)
                else:
                    result = await ops.pause_job(conn, job_id, paused=action == "pause")
            except (ops.NotFound, ops.Conflict) as exc:
                print(f"trawl: {exc}", file=sys.stderr)
                return 1
    data: dict[str, Any] = {
        "job_id": job_id,
        "action": action,
        "affected": result.affected,
        "status": result.status,
    }
    emit(args, data, lambda: print(f"job {job_id}: {action} done ({result.affected} entries)"))
    return 0


@command("schedules")
async def cmd_schedules(args: argparse.Namespace, settings: Settings) -> int:
    from control.client import TrawlClient
    from services.scheduler import schedules as sch
    from services.scheduler.operations import NotFound

    async with TrawlClient(settings, nats=False) as client, (await client.pool()).acquire() as conn:
        try:
            if args.action == "add":
                try:
                    schedule_id = await sch.add_schedule(conn, args.source, args.spec, args.kind)
                except ValueError as exc:
                    print(f"trawl: {exc}", file=sys.stderr)
                    return 2
                data: Any = msgspec.to_builtins(await sch.get_schedule(conn, schedule_id))
            elif args.action == "list":
                data = msgspec.to_builtins(await sch.list_schedules(conn))
            elif args.action in ("enable", "disable"):
                await sch.set_schedule_enabled(conn, args.schedule_id, args.action == "enable")
                data = msgspec.to_builtins(await sch.get_schedule(conn, args.schedule_id))
            elif args.action == "trigger":
                await sch.trigger_schedule_now(conn, args.schedule_id)
                data = msgspec.to_builtins(await sch.get_schedule(conn, args.schedule_id))
            else:
                await sch.remove_schedule(conn, args.schedule_id)
                data = {"id": args.schedule_id, "removed": True}
        except NotFound as exc:
            print(f"trawl: {exc}", file=sys.stderr)
            return 1
    emit(args, data, lambda: _print_schedules(data if isinstance(data, list) else [data]))
    return 0


def _print_schedules(rows: list[dict[str, Any]]) -> None:
    for r in rows:
        if r.get("removed"):
            print(f"schedule {r['id']} removed")
            continue
        state = "on " if r["enabled"] else "off"
        print(
            f"{r['id']:>4} {state} {r['source']:20} {r['kind']:9} {r['spec']:16} "
            f"next {r['next_run_at'][:19]}  last job {r['last_job_id'] or '-'}"
            f"{'  (' + r['last_error'] + ')' if r['last_error'] else ''}"
        )
