"""Instructions per warm ``parse_page``, counted by valgrind.

``python -m bench.parser_instructions``. Timing the parser on a busy 2-core machine moves by
more than most changes save; an instruction count does not. This generates the static shop
(``bench.static_site``, 1,000 products, seed 13), then runs valgrind's cachegrind (no cache
simulation) twice over one process that parses 120 product pages and 20 listing pages once to
fill the memos, as a crawl has them after its first pages, then ``--passes`` more times. The
difference between a run of 3 passes and a run of 1, over two passes of 140 pages, is what one
warm page costs: start-up, imports and the warm-up cancel out.

``--dev`` counts the real pages of ``product-pages-dev`` instead (``../shared/datasets/``,
each page parsed once more per pass; ~500 KB pages, ~1,000 anchors, ~10,000 elements): a rule
can be free on the bench's 45 KB pages and dear on real ones. Session 9: a label scan before
the title was +0.08 % on the bench pages and +8 % on these. That count takes about 4 minutes.

``PYTHONHASHSEED`` is fixed for both runs: string hashes change dict and set layouts, and
unseeded runs of one build differed by up to 3 %; seeded, by about 0.2 %. Needs valgrind
(``apt-get install valgrind``); one count takes about a minute.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

PRODUCT_PAGES = 120
LISTING_PAGES = 20
ORIGIN = "http://127.0.0.2:8080"
DEV = "dev"  # --inner's name for the real dev pages


def _pages(root: Path) -> list[tuple[str, bytes]]:
    products = sorted((root / "p").rglob("*.html"))[:PRODUCT_PAGES]
    listings = sorted((root / "c").rglob("*.html"))[:LISTING_PAGES]
    return [(f"{ORIGIN}/{f.relative_to(root)}", f.read_bytes()) for f in products + listings]


def _dev_pages() -> list[tuple[str, bytes]]:
    from bench.product_score import DATASET, load, page_body

    return [
        (truth["url"], page_body(DATASET, page_id))
        for page_id, truth in sorted(load(DATASET).items())
    ]


def parse_passes(root: Path | None, passes: int) -> None:
    """What valgrind counts: a warm-up pass, then ``passes`` passes over the same pages (the
    static shop's under ``root``, else the real dev pages)."""
    from services.parser.page import parse_page

    pages = _pages(root) if root is not None else _dev_pages()
    for _ in range(1 + passes):
        for url, body in pages:
            parse_page(body, url, content_type="text/html")


def _count(root: Path | None, passes: int) -> int:
    env = dict(os.environ, PYTHONHASHSEED="0")
    run = subprocess.run(
        [
            "valgrind",
            "--tool=cachegrind",
            "--cache-sim=no",
            "--cachegrind-out-file=/dev/null",
            sys.executable,
            "-m",
            "bench.parser_instructions",
            "--inner",
            str(root) if root is not None else DEV,
            str(passes),
        ],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    found = re.search(r"I\s+refs:\s+([\d,]+)", run.stderr)
    if found is None:
        raise RuntimeError(f"no instruction count in valgrind's output:\n{run.stderr[-2000:]}")
    return int(found.group(1).replace(",", ""))


def main() -> None:
    ap = argparse.ArgumentParser(prog="python -m bench.parser_instructions", description=__doc__)
    ap.add_argument("--passes", type=int, default=3, help="passes of the longer run (default 3)")
    ap.add_argument("--dev", action="store_true", help="count the real dev pages instead")
    ap.add_argument("--inner", nargs=2, metavar=("SITE", "PASSES"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.inner:
        site, passes = args.inner
        parse_passes(None if site == DEV else Path(site), int(passes))
        return
    if shutil.which("valgrind") is None:
        print("skipped: valgrind is not installed (apt-get install valgrind)")
        return
    if args.passes < 2:
        ap.error("--passes must be at least 2")
    if args.dev:
        from bench.product_score import DATASET

        if not (DATASET / "ground-truth.json").is_file():
            print(f"skipped: no dataset at {DATASET}")
            return
        pages = len(_dev_pages())
        one, more = _count(None, 1), _count(None, args.passes)
        per_page = (more - one) / ((args.passes - 1) * pages)
        print(f"{pages} real dev pages, warm: {per_page / 1e6:.2f} M instructions per page")
        return
    from bench.static_site import generate

    with tempfile.TemporaryDirectory() as tmp:
        site = generate(Path(tmp), products=1000)
        pages = len(_pages(site.root))
        one, more = _count(site.root, 1), _count(site.root, args.passes)
    per_page = (more - one) / ((args.passes - 1) * pages)
    print(f"{pages} pages of the static shop, warm: {per_page / 1e6:.2f} M instructions per page")


if __name__ == "__main__":
    main()
