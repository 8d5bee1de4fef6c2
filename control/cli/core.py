"""Core commands: the stack, migrations, sources, crawls, jobs, products, parse."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path

import msgspec

from control.cli import add_command, command, emit
from shared.settings import Settings


def register(sub) -> None:
    def add(name: str, help_text: str, *, json_flag: bool = True) -> argparse.ArgumentParser:
        return add_command(sub, name, help_text, json_flag=json_flag)

    up = add("up", "run all services locally as supervised processes", json_flag=False)
    up.add_argument("--demo", action="store_true", help="also run the demo shop and apply it")
    up.add_argument("--scale", help="replicas per service, e.g. fetcher=3,parser=2")
    up.add_argument("--logs", default=".trawl/logs", help="directory for service logs")

    demo = add(
        "demo", "run the stack, crawl the demo shop end to end, show the products", json_flag=False
    )
    demo.add_argument("--scale", help="replicas per service, e.g. fetcher=2")
    demo.add_argument("--logs", default=".trawl/logs")
    demo.add_argument("--keep", action="store_true", help="keep the stack running afterwards")

    add("migrate", "create the database if missing and apply pending migrations")

    src = add("source", "manage source definitions", json_flag=False)
    src_sub = src.add_subparsers(dest="action", required=True, metavar="ACTION")
    apply_p = src_sub.add_parser("apply", help="create or replace a source from a YAML/JSON file")
    apply_p.add_argument("file")
    apply_p.add_argument("--json", action="store_true")
    list_p = src_sub.add_parser("list", help="list sources")
    list_p.add_argument("--json", action="store_true")
    for name, text, arg in (
        ("validate", "check a source file without saving it", "file"),
        ("show", "print a stored source definition", "name"),
        ("rm", "delete a source that has no jobs", "name"),
    ):
        sp = src_sub.add_parser(name, help=text)
        sp.add_argument(arg)
        sp.add_argument("--json", action="store_true")

    crawl = add("crawl", "start a crawl of a source (publishes a trigger)")
    crawl.add_argument("source")
    crawl.add_argument("--wait", action="store_true", help="show progress until the job ends")
    crawl.add_argument("--kind", choices=("discovery", "refresh"), default="discovery")
    crawl.add_argument("--seed", action="append", default=[], help="seed URL (repeatable)")
    crawl.add_argument("--keyword", action="append", default=[], help="search keyword")
    crawl.add_argument("--priority", type=int)
    crawl.add_argument("--timeout", type=float, default=3600.0, help="--wait limit in seconds")

    jobs = add("jobs", "list recent jobs")
    jobs.add_argument("--limit", type=int, default=20)
    products = add("products", "list the products of a source")
    products.add_argument("source")
    products.add_argument("--limit", type=int)

    parse = add("parse", "show what trawl extracts from one page (file or URL)")
    parse.add_argument("target", help="a file (read as the raw HTTP body) or an http(s) URL")
    parse.add_argument("--url", help="the page's URL when TARGET is a file")
    parse.add_argument("--source", help="apply this source's rules (from the database)")


# -- commands ---------------------------------------------------------------------------------


@command("migrate")
async def cmd_migrate(args: argparse.Namespace, settings: Settings) -> int:
    from migrations.runner import migrate

    applied = await migrate(settings.database_url)
    emit(
        args,
        {"applied": applied},
        lambda: print(f"migrations applied: {applied}" if applied else "database up to date"),
    )
    return 0


@command("source")
async def cmd_source(args: argparse.Namespace, settings: Settings) -> int:
    from control.sources import apply_source
    from services.scheduler.catalog import list_sources
    from shared.db import open_pool
    from shared.sources import load_source_file

    if args.action == "validate":
        source = load_source_file(args.file)  # SourceError names the line and the field
        emit(
            args,
            {"name": source.name, "valid": True},
            lambda: print(f"{args.file}: source {source.name} is valid"),
        )
        return 0
    if args.action in ("show", "rm"):
        return await _source_by_name(args, settings)
    if args.action == "apply":
        source = load_source_file(args.file)
        from migrations.runner import migrate

        await migrate(settings.database_url)
        pool = await open_pool(settings.database_url, min_size=1, max_size=1, attempts=3)
        async with pool, pool.acquire() as conn:
            applied = await apply_source(conn, source)
        rules = applied.alerts
        counts = {k: len(getattr(rules, k)) for k in ("added", "updated", "removed", "kept")}
        done = "created" if applied.created else "updated"
        said = ", ".join(f"{n} {k}" for k, n in counts.items() if n and k != "kept")
        emit(
            args,
            {"name": source.name, "created": applied.created, "alerts": counts},
            lambda: print(
                f"source {source.name} {done}" + (f"; alert rules: {said}" if said else "")
            ),
        )
        return 0
    pool = await open_pool(settings.database_url, min_size=1, max_size=1, attempts=3)
    async with pool, pool.acquire() as conn:
        found = await list_sources(conn)
    data = [
        {
            "name": s.name,
            "seeds": list(s.definition.seeds),
            "updated_at": s.updated_at.isoformat(),
        }
        for s in found
    ]

    def human() -> None:
        for d in data:
            print(f"{d['name']:24} {len(d['seeds'])} seeds")

    emit(args, data, human)
    return 0


async def _source_by_name(args: argparse.Namespace, settings: Settings) -> int:
    from control.sources import remove_source
    from services.scheduler.operations import Conflict
    from services.scheduler.store import sources as source_records
    from shared.db import open_pool

    pool = await open_pool(settings.database_url, min_size=1, max_size=1, attempts=3)
    async with pool, pool.acquire() as conn:
        if args.action == "show":
            definition = await source_records.definition(conn, args.name)
            if definition is None:
                print(f"trawl: source {args.name!r} not found", file=sys.stderr)
                return 1
            emit(args, definition, lambda: print(json.dumps(definition, indent=2)))
            return 0
        try:
            deleted = await remove_source(conn, args.name)
        except Conflict as exc:
            print(f"trawl: {exc}", file=sys.stderr)
            return 1
    if not deleted:
        print(f"trawl: source {args.name!r} not found", file=sys.stderr)
        return 1
    emit(args, {"name": args.name, "deleted": True}, lambda: print(f"source {args.name} deleted"))
    return 0


@command("crawl")
async def cmd_crawl(args: argparse.Namespace, settings: Settings) -> int:
    from control.client import TrawlClient

    async with TrawlClient(settings) as client:
        reply = await client.trigger(
            args.source,
            kind=args.kind,
            seeds=args.seed,
            keywords=args.keyword,
            priority=args.priority,
        )
        if reply.error:
            emit(
                args,
                {"error": reply.error},
                lambda: print(f"trawl: {reply.error}", file=sys.stderr),
            )
            return 1
        if not args.wait:
            emit(
                args,
                {"job_id": reply.job_id, "existing": reply.existing},
                lambda: print(f"job {reply.job_id} {'running' if reply.existing else 'started'}"),
            )
            return 0
        assert reply.job_id is not None  # a reply without an error names its job
        summary = await client.wait(reply.job_id, timeout=args.timeout, progress=not args.json)
        emit(args, summary, lambda: client.print_summary(summary))
        return 0 if summary.get("status") == "completed" else 1


@command("jobs")
async def cmd_jobs(args: argparse.Namespace, settings: Settings) -> int:
    from control.client import TrawlClient

    async with TrawlClient(settings, nats=False) as client:
        data = await client.jobs(args.limit)
    emit(args, data, lambda: TrawlClient.print_jobs(data))
    return 0


@command("products")
async def cmd_products(args: argparse.Namespace, settings: Settings) -> int:
    from control.client import TrawlClient

    async with TrawlClient(settings, nats=False) as client:
        data = await client.products(args.source, args.limit)
    emit(args, data, lambda: TrawlClient.print_products(args.source, data))
    return 0


@command("parse")
async def cmd_parse(args: argparse.Namespace, settings: Settings) -> int:
    """An HTML page, a sitemap, or a JSON API payload (e.g. from ``trawl payloads get``):
    with ``--source``, a JSON payload is mapped by the source's ``api`` section and every
    product it lists is printed (``products``)."""
    from services.parser.formats import parse_payload

    source = None
    if args.source:
        from control.client import TrawlClient

        async with TrawlClient(settings, nats=False) as client:
            source = await client.source(args.source)
    content_type = None
    if args.target.startswith(("http://", "https://")):
        import aiohttp

        async with aiohttp.ClientSession() as session, session.get(args.target) as resp:
            body = await resp.read()
            content_type = resp.headers.get("Content-Type")
        url = args.url or args.target
    else:
        path = Path(args.target)
        body = await asyncio.to_thread(path.read_bytes)
        url = args.url or path.absolute().as_uri()  # noqa: ASYNC240 - no I/O
    page = parse_payload(body, url, content_type=content_type, source=source)
    links: dict[str, list[str]] = {"pagination": [], "product": [], "page": []}
    for link in page.links:
        links.setdefault(link.kind, []).append(link.url)
    data = {
        "product": msgspec.to_builtins(page.product) if page.product else None,
        "products": msgspec.to_builtins(page.products),
        "links": links,
    }
    if page.error:
        data["error"] = page.error
    print(json.dumps(data, indent=2))
    return 0


@command("up")
async def cmd_up(args: argparse.Namespace, settings: Settings) -> int:
    from control.stack import run_stack

    return await run_stack(
        settings, scale=args.scale, demo=args.demo, log_dir=Path(args.logs), crawl=False
    )


@command("demo")
async def cmd_demo(args: argparse.Namespace, settings: Settings) -> int:
    from control.stack import run_stack

    return await run_stack(
        settings, scale=args.scale, demo=True, log_dir=Path(args.logs), crawl=True, keep=args.keep
    )
