"""Score link discovery on real pagers: ``python -m bench.pagination_score [--show] [--sites …]``.

Runs the parser's own code path (``parse_page`` → ``extract_links``, no source: the page's host
is allowed) over ``../shared/datasets/pagination-dev/`` (real listing, forum and search pages
whose pagination links were annotated by hand) and prints the dataset README's metric: micro
precision / recall / F1 over (page, URL) pairs between trawl's ``pagination`` links and the
annotation, the share of pages whose set is exactly right, and the parser's CPU time per page
(``time.process_time``, the whole ``parse_page``).

Both sides are spelled by ``shared.urls.canonicalize``, so percent-encoding and default ports
do not count. As the README allows, a URL that trawl took only from a ``<link rel=next|prev>``
is set aside when the annotation lacks it (only ``<a>`` elements were annotated): the page is
parsed again without those elements, and what trawl then no longer finds came from them.

``--leave-out HOST…`` / ``--only HOST…`` score a subset of sites: build with some left out,
then score them alone to check that a rule generalises.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from services.parser.page import parse_page
from shared.urls import canonicalize, host_of

DATASET = Path(__file__).resolve().parent.parent.parent / "shared" / "datasets" / "pagination-dev"


@dataclass
class PageScore:
    name: str
    url: str
    expected: set[str]
    found: set[str]
    set_aside: set[str] = field(default_factory=set)
    product: str | None = None  # the product the parser took the page for (a listing has none)

    @property
    def exact(self) -> bool:
        return self.found - self.set_aside == self.expected


@dataclass
class Score:
    pages: list[PageScore] = field(default_factory=list)
    cpu: float = 0.0

    @property
    def listings_with_a_product(self) -> list[PageScore]:
        """Pages with a pager that the parser still read a product from: each would enter the
        catalog keyed by a listing URL and count misses."""
        return [p for p in self.pages if p.expected and p.product is not None]

    @property
    def tp(self) -> int:
        return sum(len(p.found & p.expected) for p in self.pages)

    @property
    def fp(self) -> int:
        return sum(len(p.found - p.expected - p.set_aside) for p in self.pages)

    @property
    def fn(self) -> int:
        return sum(len(p.expected - p.found) for p in self.pages)

    @property
    def precision(self) -> float:
        return self.tp / (self.tp + self.fp) if self.tp + self.fp else 1.0

    @property
    def recall(self) -> float:
        return self.tp / (self.tp + self.fn) if self.tp + self.fn else 1.0

    @property
    def f1(self) -> float:
        p, r = self.precision, self.recall
        return 2 * p * r / (p + r) if p + r else 0.0

    @property
    def exact(self) -> float:
        return sum(p.exact for p in self.pages) / len(self.pages) if self.pages else 1.0

    @property
    def clean(self) -> tuple[int, int]:
        """(pages without pagination, of which trawl found none)."""
        empty = [p for p in self.pages if not p.expected]
        return len(empty), sum(not (p.found - p.set_aside) for p in empty)

    def summary(self) -> str:
        empty, clean = self.clean
        ms = self.cpu / len(self.pages) * 1e3 if self.pages else 0.0
        return (
            f"{len(self.pages)} pages: precision {self.precision:.3f}  recall {self.recall:.3f}  "
            f"F1 {self.f1:.3f}  exact {sum(p.exact for p in self.pages)}/{len(self.pages)} "
            f"({self.exact:.1%})  clean {clean}/{empty}  "
            f"(tp={self.tp} fp={self.fp} fn={self.fn})  parser CPU {ms:.2f} ms/page  "
            f"listings with a product {len(self.listings_with_a_product)}/"
            f"{sum(1 for p in self.pages if p.expected)}"
        )


def load(dataset: Path = DATASET) -> dict[str, dict]:
    with (dataset / "expected.json").open(encoding="utf-8") as f:
        data: dict[str, dict] = json.load(f)
    return data


def _canon(urls: list[str]) -> set[str]:
    return {u for u in (canonicalize(url) for url in urls) if u}


_HEAD_REL = re.compile(r"<link\b[^>]*\brel\s*=\s*[\"']?\s*(?:next|prev|previous)\b[^>]*>", re.I)


def _head_only(text: str, url: str, found: set[str]) -> set[str]:
    """Of ``found``, the URLs trawl takes only from ``<link rel=next|prev>``: the ones it no
    longer finds once those elements are removed."""
    if not _HEAD_REL.search(text):
        return set()
    again = parse_page(
        _HEAD_REL.sub("", text).encode("utf-8"), url, content_type="text/html; charset=utf-8"
    )
    return found - {link.url for link in again.links if link.kind == "pagination"}


def score(
    dataset: Path = DATASET,
    *,
    only: set[str] | None = None,
    leave_out: set[str] | None = None,
    repeat: int = 1,
) -> Score:
    out = Score()
    for name, spec in sorted(load(dataset).items(), key=lambda kv: int(kv[0].split(".")[0])):
        host = host_of(spec["url"]).removeprefix("www.")
        if (only and host not in only) or (leave_out and host in leave_out):
            continue
        body = (dataset / "pages" / name).read_bytes()
        content_type = f"text/html; charset={spec['encoding']}"
        start = time.process_time()
        for _ in range(repeat):
            parsed = parse_page(body, spec["url"], content_type=content_type)
        out.cpu += (time.process_time() - start) / repeat
        found = {link.url for link in parsed.links if link.kind == "pagination"}
        expected = _canon(spec["pagination"])
        product = parsed.product.key if parsed.product is not None else None
        page = PageScore(name, spec["url"], expected, found, product=product)
        if found - expected:
            text = body.decode(spec["encoding"], errors="replace")
            page.set_aside = _head_only(text, spec["url"], found - expected)
        out.pages.append(page)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--dataset", type=Path, default=DATASET)
    parser.add_argument("--show", action="store_true", help="list each page's misses")
    parser.add_argument("--only", nargs="*", default=[], help="score only these hosts")
    parser.add_argument("--leave-out", nargs="*", default=[], help="skip these hosts")
    parser.add_argument("--repeat", type=int, default=3, help="parses per page for the CPU time")
    args = parser.parse_args(argv)
    if not (args.dataset / "expected.json").exists():
        print(f"no dataset at {args.dataset}", file=sys.stderr)
        return 2
    result = score(
        args.dataset,
        only=set(args.only) or None,
        leave_out=set(args.leave_out) or None,
        repeat=args.repeat,
    )
    if args.show:
        for page in result.pages:
            if page.exact:
                continue
            print(f"{page.name} {page.url}")
            for url in sorted(page.expected - page.found):
                print(f"   missing     {url}")
            for url in sorted(page.found - page.expected - page.set_aside):
                print(f"   unexpected  {url}")
    print(result.summary())
    return 0


if __name__ == "__main__":
    sys.exit(main())
