"""Run the demo shop as a process: `python -m demo --hosts 127.0.0.2,127.0.0.3 --port 8801`.

Prints one "demo shop: <base urls>" line once every host is bound, then serves until SIGTERM
or SIGINT. Tests drive a running shop through its `/_shop/` control endpoints.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import signal
from pathlib import Path

from demo.faults import Faults
from demo.shop import DemoShop


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m demo", description=__doc__)
    parser.add_argument("--hosts", default="127.0.0.2,127.0.0.3", help="comma-separated IPs")
    parser.add_argument(
        "--advertise", help="comma-separated names for links, one per host (e.g. demo-shop)"
    )
    parser.add_argument("--port", type=int, default=8801, help="0: a free port per host")
    parser.add_argument("--products", type=int, default=60)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--epoch", type=int, default=0)
    parser.add_argument("--per-page", type=int, default=8)
    parser.add_argument("--log", type=Path, help="append a JSON line per request")
    parser.add_argument("--truth-file", type=Path, help="write the truth JSON at start")
    parser.add_argument("--no-etags", action="store_true", help="never answer 304")
    parser.add_argument(
        "--variants", action="store_true", help="product pages as groups of their options"
    )
    parser.add_argument("--latency", type=float, default=0.0, help="seconds per response")
    parser.add_argument("--rate-429", type=float, default=0.0)
    parser.add_argument("--rate-503", type=float, default=0.0)
    parser.add_argument("--fault-seed", type=int, default=0)
    return parser.parse_args(argv)


def write_truth(path: Path, shop: DemoShop) -> None:
    path.write_text(json.dumps(shop.truth(), indent=1), encoding="utf-8")


async def serve(args: argparse.Namespace) -> None:
    shop = DemoShop(
        hosts=[h.strip() for h in args.hosts.split(",") if h.strip()],
        port=args.port,
        products=args.products,
        seed=args.seed,
        epoch=args.epoch,
        per_page=args.per_page,
        faults=Faults(
            latency=args.latency,
            rate_429=args.rate_429,
            rate_503=args.rate_503,
            seed=args.fault_seed,
        ),
        log_path=args.log,
        etags=not args.no_etags,
        variants=args.variants,
        advertise=[a.strip() for a in args.advertise.split(",")] if args.advertise else None,
    )
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await shop.start()
    try:
        if args.truth_file:
            write_truth(args.truth_file, shop)
        print("demo shop: " + " ".join(shop.base_urls), flush=True)
        await stop.wait()
    finally:
        await shop.stop()


def main(argv: list[str] | None = None) -> None:
    asyncio.run(serve(parse_args(argv)))


if __name__ == "__main__":
    main()
