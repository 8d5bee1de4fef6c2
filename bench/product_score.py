"""Score product extraction on real shop pages: ``python -m bench.product_score [-v]``.

Runs trawl's own parse path (``parse_page``, as ``trawl parse`` does) over the
``product-pages-dev`` dataset (``../shared/datasets/`` beside the checkout; its README gives
the metric) and prints per-field precision, recall and F1, the rate of pages that yield a
product, and the parser's CPU time per page.

The metric is the dataset's own: per field and page, no prediction while a value is expected is
a miss (fn); a prediction among the expected values is correct (tp); any other prediction is
wrong (fp, and fn too when a value is expected). Price is compared as a number; the other
fields as strings. Availability is ``OutOfStock`` when trawl says ``out_of_stock`` or
``discontinued`` and ``InStock`` otherwise (also when nothing was found); the two classes are
scored apart as well. ``currency`` is annotated as the symbol the page shows, so an ISO code
counts as right when the symbol denotes it.

``--leave-out host,host`` or ``--only host,host`` score a subset of the sites, which is how a
rule is checked for generalisation: build it without some sites, then score them.

``--visible-only`` strips every page of its structured data first (JSON-LD scripts and the
microdata, RDFa and OpenGraph attributes), so the visible reader alone is scored: the pages
of the held-out half that carry no markup depend on it, and the dev half has few such pages.
"""

from __future__ import annotations

import argparse
import gzip
import json
import re
import sys
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from pathlib import Path
from urllib.parse import urlsplit

from schemas.messages import Product
from services.parser.page import parse_page
from services.parser.prices import currency_in_text

ROOT = Path(__file__).resolve().parent.parent
DATASET = ROOT.parent / "shared" / "datasets" / "product-pages-dev"
TARGETS = ("price", "sku", "availability")
INFO = ("currency", "brand", "gtin", "mpn")
_OUT = ("out_of_stock", "discontinued")
_JSONLD = re.compile(rb"<script[^>]*application/ld\+json[^>]*>.*?</script>", re.S | re.I)
_MARKUP = re.compile(
    rb"\s(?:itemscope|itemtype|itemprop|itemid|typeof|property|vocab)(?:=\"[^\"]*\")?", re.I
)
# Symbols that several currencies share: any of these codes is the symbol's meaning.
_SHARED_SYMBOLS = {
    "$": {"USD", "CAD", "AUD", "NZD", "HKD", "SGD", "MXN", "ARS", "CLP", "COP", "TWD", "BRL"},
    "rs": {"PKR", "INR", "LKR", "NPR"},
    "kr": {"SEK", "NOK", "DKK", "ISK"},
    "тг.": {"KZT"},
    "ر.س": {"SAR"},
    "원": {"KRW"},
    "원~": {"KRW"},
    "р.": {"RUB", "BYN"},
}


@dataclass
class FieldScore:
    tp: int = 0
    fp: int = 0
    fn: int = 0

    def add(self, expected: list[str], got: str | None, same: bool) -> bool:
        if got is None:
            self.fn += bool(expected)
            return not expected
        if same:
            self.tp += 1
            return True
        self.fp += 1
        self.fn += bool(expected)
        return False

    @property
    def precision(self) -> float:
        return self.tp / (self.tp + self.fp) if self.tp + self.fp else 0.0

    @property
    def recall(self) -> float:
        return self.tp / (self.tp + self.fn) if self.tp + self.fn else 0.0

    @property
    def f1(self) -> float:
        p, r = self.precision, self.recall
        return 2 * p * r / (p + r) if p + r else 0.0


@dataclass
class Report:
    pages: int = 0
    found: int = 0
    cpu_ms: float = 0.0
    fields: dict[str, FieldScore] = field(
        default_factory=lambda: {
            name: FieldScore() for name in (*TARGETS, "InStock", "OutOfStock", *INFO)
        }
    )
    misses: list[str] = field(default_factory=list)

    @property
    def found_rate(self) -> float:
        return self.found / self.pages if self.pages else 0.0

    @property
    def mean_f1(self) -> float:
        return sum(self.fields[name].f1 for name in TARGETS) / len(TARGETS)

    def lines(self) -> list[str]:
        out = [f"{'field':<13} {'precision':>9} {'recall':>7} {'F1':>6}   tp  fp  fn"]
        for name, s in self.fields.items():
            out.append(
                f"{name:<13} {s.precision:9.3f} {s.recall:7.3f} {s.f1:6.3f}  "
                f"{s.tp:3d} {s.fp:3d} {s.fn:3d}" + ("" if name in TARGETS else "  (info)")
            )
        out.append(f"mean F1 (price, sku, availability): {self.mean_f1:.3f}")
        out.append(f"product found on {self.found}/{self.pages} pages ({self.found_rate:.1%})")
        per_page = self.cpu_ms / self.pages if self.pages else 0.0
        out.append(f"parser CPU: {per_page:.2f} ms/page")
        return out


def load(dataset: Path = DATASET) -> dict[str, dict]:
    """The ground truth, ``{page id: {"url": …, field: [acceptable values]}}``."""
    return json.loads((dataset / "ground-truth.json").read_text(encoding="utf-8"))


def page_body(dataset: Path, page_id: str) -> bytes:
    """A page of the dataset as it was fetched (stored gzipped)."""
    return gzip.decompress((dataset / "pages" / f"{page_id}.html.gz").read_bytes())


def site(url: str) -> str:
    host = urlsplit(url).hostname or ""
    return host.removeprefix("www.")


def score(
    dataset: Path = DATASET,
    *,
    only: Iterable[str] = (),
    leave_out: Iterable[str] = (),
    visible_only: bool = False,
) -> Report:
    only_sites, left_out = set(only), set(leave_out)
    report = Report()
    for page_id, truth in sorted(load(dataset).items()):
        host = site(truth["url"])
        if (only_sites and host not in only_sites) or host in left_out:
            continue
        body = page_body(dataset, page_id)
        if visible_only:
            body = strip_structured(body)
        start = time.process_time()
        product = parse_page(body, truth["url"]).product
        report.cpu_ms += (time.process_time() - start) * 1e3
        report.pages += 1
        report.found += product is not None
        _score_page(report, f"{page_id[:8]} {host}", truth, product)
    return report


def strip_structured(body: bytes) -> bytes:
    """The page without its JSON-LD, microdata, RDFa and OpenGraph: what the shopper sees."""
    return _MARKUP.sub(b"", _JSONLD.sub(b"", body))


def _score_page(report: Report, name: str, truth: dict, product: Product | None) -> None:
    got = _predictions(product)
    for key, score_ in report.fields.items():
        expected = [v for v in truth.get(key, []) if isinstance(v, str)]
        value = got.get(key)
        if key in ("InStock", "OutOfStock"):
            value = key if got["availability"] == key else None
        if not score_.add(expected, value, _same(key, expected, value)):
            report.misses.append(f"{name} {key}: expected {expected}, got {value!r}")


def _predictions(product: Product | None) -> dict[str, str | None]:
    if product is None:
        return {"availability": "InStock"}
    return {
        "price": product.price,
        "sku": product.sku,
        "availability": "OutOfStock" if product.availability in _OUT else "InStock",
        "currency": product.currency,
        "brand": product.brand,
        "gtin": product.gtin,
        "mpn": product.mpn,
    }


def _same(key: str, expected: list[str], value: str | None) -> bool:
    if value is None:
        return False
    if key == "price":
        got = _number(value)
        return got is not None and any(_number(e) == got for e in expected)
    if key == "currency":
        return any(value in _currency_codes(e) for e in expected)
    return value.strip() in (e.strip() for e in expected)


def _number(text: str) -> Decimal | None:
    try:
        return Decimal(text.strip())
    except InvalidOperation:
        return None


def _currency_codes(symbol: str) -> set[str]:
    text = symbol.strip()
    if len(text) == 3 and text.isalpha() and text.isupper():
        return {text}
    shared = _SHARED_SYMBOLS.get(text.lower())
    if shared:
        return shared
    code = currency_in_text(text)
    return {code} if code else set()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dataset", type=Path, default=DATASET)
    parser.add_argument("--only", default="", help="comma-separated sites (hosts) to score")
    parser.add_argument("--leave-out", default="", help="comma-separated sites to skip")
    parser.add_argument(
        "--visible-only", action="store_true", help="strip structured data: the visible reader"
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="list every wrong field")
    args = parser.parse_args()
    if not (args.dataset / "ground-truth.json").is_file():
        print(f"dataset not found: {args.dataset}", file=sys.stderr)
        sys.exit(2)
    split = [s.strip().removeprefix("www.") for s in args.only.split(",") if s.strip()]
    left = [s.strip().removeprefix("www.") for s in args.leave_out.split(",") if s.strip()]
    report = score(args.dataset, only=split, leave_out=left, visible_only=args.visible_only)
    print(f"product-pages-dev: {report.pages} pages" + (" (visible only)" * args.visible_only))
    for line in report.lines():
        print(line)
    if args.verbose:
        for miss in report.misses:
            print("  MISS", miss)


if __name__ == "__main__":
    main()
