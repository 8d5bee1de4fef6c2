"""``trawl``: the command line. Every command has ``--json`` for scripts.

Each module of this package adds its own subcommands through ``register(sub)`` and implements
them with ``@command(name)``; ``build_parser`` collects them all.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import os
import signal
import sys
from collections.abc import Callable, Coroutine
from typing import Any

from shared.errors import ConfigError, SourceError, TrawlError
from shared.settings import Settings

Command = Callable[[argparse.Namespace, Settings], Coroutine[Any, Any, int]]
COMMANDS: dict[str, Command] = {}

# Modules that contribute subcommands, in help order.
MODULES = (
    "control.cli.core",
    "control.cli.scheduling",
    "control.cli.payloads",
    "control.cli.proxies",
    "control.cli.operator",
    "control.cli.changes",
    "control.cli.exports",
)


def command(name: str) -> Callable[[Command], Command]:
    def register(fn: Command) -> Command:
        COMMANDS[name] = fn
        return fn

    return register


def add_command(sub, name: str, help_text: str, *, json_flag: bool = True):
    sp = sub.add_parser(name, help=help_text, description=help_text)
    if json_flag:
        sp.add_argument("--json", action="store_true", help="machine-readable output")
    return sp


def build_parser() -> argparse.ArgumentParser:
    import importlib

    p = argparse.ArgumentParser(prog="trawl", description="Event-driven product catalog crawler.")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for module in MODULES:
        importlib.import_module(module).register(sub)
    return p


def main(argv: list[str] | None = None) -> None:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="trawl: %(message)s")
    try:
        settings = Settings.from_env()
        code = asyncio.run(COMMANDS[args.command](args, settings))
    except (ConfigError, SourceError, TrawlError) as exc:
        print(f"trawl: {exc}", file=sys.stderr)
        code = 2
    except KeyboardInterrupt:
        code = 130
    except BrokenPipeError:  # `trawl ... | head`: the reader left; nothing more to say
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        code = 0
    sys.exit(code)


def emit(args: argparse.Namespace, data: Any, human: Callable[[], object]) -> None:
    if getattr(args, "json", False):
        print(json.dumps(data, default=str, indent=2))
    else:
        human()


def install_stop(handler: Callable[[], None]) -> None:
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError):
            loop.add_signal_handler(sig, handler)
