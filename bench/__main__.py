"""``make bench`` / ``python -m bench``: run every benchmark and print its figures.

Each benchmark is its own module, runnable alone with its own options
(``python -m bench.dispatch_bench --help``); this runs them with moderate defaults.
"""

from __future__ import annotations

import subprocess
import sys

BENCHMARKS: list[tuple[str, list[str]]] = [
    ("bench.parser_bench", []),
    ("bench.parser_instructions", []),
    ("bench.parser_instructions", ["--dev", "--passes", "2"]),  # the real pages too
    ("bench.pagination_score", []),
    ("bench.product_score", []),
    ("bench.parser_service_bench", []),
    ("bench.refresher_bench", []),
    ("bench.fetcher_bench", []),
    ("bench.dispatch_bench", []),
    ("bench.e2e_bench", ["--products", "5000"]),
    ("bench.render_bench", []),
    # Last, so that its table ends the output: the figures notes quote (issue 13).
    ("bench.static_bench", ["--products", "5000", "--rounds", "3"]),
]


def main() -> None:
    only = set(sys.argv[1:])
    failed = []
    for module, args in BENCHMARKS:
        if only and module.split(".")[-1] not in only:
            continue
        print(f"\n== {module} ==", flush=True)
        if subprocess.call([sys.executable, "-m", module, *args]) != 0:
            failed.append(module)
    if failed:
        print(f"\nfailed: {', '.join(failed)}")
        sys.exit(1)


if __name__ == "__main__":
    main()
