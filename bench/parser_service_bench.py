"""Parser service throughput on the demo shop's pages: ``python -m bench.parser_service_bench``.

1. Serves the demo shop in this process and downloads every product and listing page once.
2. ``parse_page`` alone over those bodies (pages/s), and a BeautifulSoup (lxml) extraction of
   the same fields (JSON-LD product: key, name, brand, price, currency, availability, image,
   url; links resolved, canonicalised and classified by the source's rules) in the same run.
3. The parser service end to end in a scratch namespace: bodies in the payload store, fetch
   results preloaded on ``<ns>.fetched``, the service's consumer running in this process, timed
   until every page's parse result is published (payload read, parse, publish, ack).

Needs beautifulsoup4 and lxml (``pip install beautifulsoup4 lxml``) for step 2's comparison.

``--static N``: the pages of ``bench.static_site`` with N products instead (the shape
``static_bench`` crawls), read from disk; step 2 is then ``parse_payload`` alone (warm, CPU per
page) and step 3 reports the service's CPU per page and its own share: that minus the parse's.
Run under uvloop with the collector settled, as ``shared.service`` runs a service.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import resource
import tempfile
import threading
import time
import uuid
from pathlib import Path
from urllib.parse import urljoin

import aiohttp

from bench import static_site
from demo.shop import DemoShop
from schemas.messages import Attempt, FetchResult
from services.parser.formats import parse_payload
from services.parser.page import parse_page
from shared.service import run, settle_heap
from shared.sources import source_from_dict
from shared.urls import canonicalize

NATS = os.environ.get("NATS_URL", "nats://127.0.0.1:4222")
AVAILABILITY = {
    "InStock": "in_stock",
    "OutOfStock": "out_of_stock",
    "PreOrder": "preorder",
    "BackOrder": "backorder",
    "Discontinued": "discontinued",
    "LimitedAvailability": "limited",
}


async def download(shop: DemoShop) -> list[tuple[str, bytes, str]]:
    cat = shop.catalog
    urls = [cat.url(p) for p in cat.products]
    for c in cat.categories:
        pages = -(-len(cat.listing(c, 0)) // shop.per_page)
        urls += [cat.category_url(c, n) for n in range(1, pages + 1)]
    out = []
    async with aiohttp.ClientSession() as session:
        for url in urls:
            async with session.get(url) as resp:
                out.append((url, await resp.read(), resp.headers.get("Content-Type", "")))
    return out


def static_pages(products: int) -> tuple[list[tuple[str, bytes, str]], dict]:
    """Every page of a generated static shop (home, info, listings, products) at the URL a
    crawl of it on 127.0.0.2:8080 gives, and a source definition like ``static_bench``'s."""
    base = "http://127.0.0.2:8080"
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "site"
        static_site.generate(root, products=products)
        files = sorted(root.rglob("*.html"))
        paths = [(f"/{f.relative_to(root)}".removesuffix("index.html"), f) for f in files]
        pages = [(f"{base}{path}", f.read_bytes(), "text/html") for path, f in paths]
    definition = {
        "name": "static",
        "seeds": [f"{base}/"],
        "allowed_domains": ["127.0.0.2:8080"],
        "robots": "obey",
    }
    return pages, definition


def parse_cpu(pages, source, rounds: int) -> float:
    """CPU seconds per page of ``parse_payload`` over ``pages``, warm (a pass first), as the
    service calls it."""
    for url, body, ctype in pages:
        parse_payload(body, url, content_type=ctype, source=source)
    started = time.thread_time()
    for _ in range(rounds):
        for url, body, ctype in pages:
            parse_payload(body, url, content_type=ctype, source=source)
    return (time.thread_time() - started) / (rounds * len(pages))


def _time_parse() -> list[float]:
    """Time the service's ``parse_payload`` calls (CPU seconds, summed in the list returned):
    a parse in the service can cost more than the same parse in a loop (colder caches)."""
    from services.parser import service

    spent = [0.0]
    parse = service.parse_payload

    def timed(*args, **kwargs):  # type: ignore[no-untyped-def]
        started = time.thread_time()
        try:
            return parse(*args, **kwargs)
        finally:
            spent[0] += time.thread_time() - started

    service.parse_payload = timed  # type: ignore[assignment]
    return spent


def soup_extract(body: bytes, url: str, product_css: str, product_re, pagination_re) -> dict:
    """The same fields with BeautifulSoup: the comparison baseline."""
    from bs4 import BeautifulSoup

    soup = BeautifulSoup(body, "lxml")
    product = None
    for script in soup.find_all("script", type="application/ld+json"):
        try:
            data = json.loads(script.string or "")
        except ValueError:
            continue
        if isinstance(data, dict) and data.get("@type") == "Product":
            offer = data.get("offers") or {}
            brand = data.get("brand")
            product = {
                "key": data.get("sku"),
                "name": data.get("name"),
                "brand": brand.get("name") if isinstance(brand, dict) else brand,
                "price": offer.get("price"),
                "currency": offer.get("priceCurrency"),
                "availability": AVAILABILITY.get(
                    str(offer.get("availability", "")).rsplit("/", 1)[-1], "unknown"
                ),
                "image": urljoin(url, data.get("image") or ""),
                "url": urljoin(url, data.get("url") or url),
            }
    canonical = soup.find("link", rel="canonical")
    if product and canonical and canonical.get("href"):
        product["url"] = urljoin(url, canonical["href"])
    cards = {id(a) for a in soup.select(product_css)}
    links: dict[str, set[str]] = {"product": set(), "pagination": set(), "page": set()}
    for a in soup.find_all("a", href=True):
        href = urljoin(url, a["href"])
        if not href.startswith(("http://", "https://")):
            continue
        href = canonicalize(href)
        if href is None:
            continue
        if id(a) in cards or product_re.search(href):
            links["product"].add(href)
        elif pagination_re.search(href) and href != url:
            links["pagination"].add(href)
        else:
            links["page"].add(href)
    return {"product": product, "links": links}


def bench_parse(pages, source, definition) -> tuple[float, float | None]:
    started = time.perf_counter()
    products = 0
    for url, body, ctype in pages:
        products += parse_page(body, url, content_type=ctype, source=source).product is not None
    trawl_rate = len(pages) / (time.perf_counter() - started)
    print(f"parse_page alone:      {trawl_rate:8,.0f} pages/s ({products} products)")
    try:
        import bs4  # noqa: F401
        import lxml  # noqa: F401
    except ImportError:
        print("BeautifulSoup: not installed (pip install beautifulsoup4 lxml)")
        return trawl_rate, None
    links = definition["links"]
    product_re = re.compile(links["product"]["pattern"])
    pagination_re = re.compile(links["pagination"]["pattern"])
    started = time.perf_counter()
    soup_products = 0
    for url, body, _ in pages:
        got = soup_extract(body, url, links["product"]["css"], product_re, pagination_re)
        soup_products += got["product"] is not None
    soup_rate = len(pages) / (time.perf_counter() - started)
    print(f"BeautifulSoup (lxml):  {soup_rate:8,.0f} pages/s ({soup_products} products)")
    return trawl_rate, soup_rate


def _feed(work: list, pace: float) -> threading.Thread:
    """Publish ``work`` at ``pace`` messages a second from a thread with its own loop and
    connection, as fetchers do during a crawl (the service then pulls a few at a time); its CPU
    is left out of the service's (the service's is its thread's: RUSAGE_THREAD)."""
    from shared.bus import connect, publish_many

    async def feed() -> None:
        nc = await connect(NATS, name="parser-bench-feed", attempts=3)
        js = nc.jetstream(timeout=10)
        started, sent = time.monotonic(), 0
        while sent < len(work):
            due = min(len(work), int((time.monotonic() - started) * pace) + 1)
            await publish_many(js, work[sent:due])
            sent = due
            # A benchmark's pacing: asleep until the next message is due.
            await asyncio.sleep(max(0.0, started + sent / pace - time.monotonic()))
        await nc.close()

    thread = threading.Thread(target=asyncio.run, args=(feed(),), name="feed", daemon=True)
    thread.start()
    return thread


async def bench_service(
    pages, definition, rounds: int, parse_ms: float | None = None, pace: float = 0.0
) -> float:
    from services.parser.service import start
    from shared.bus import connect, publish_many
    from shared.names import PARSED, Names
    from shared.payloads import JetStreamPayloadStore
    from shared.provision import provision, teardown
    from shared.service import Runtime
    from shared.settings import Settings

    ns = f"bench{uuid.uuid4().hex[:8]}"
    names = Names(ns)
    settings = Settings.from_env({"NATS_URL": NATS, "TRAWL_NAMESPACE": ns})
    nc = await connect(NATS, name="parser-bench", attempts=3)
    js = nc.jetstream(timeout=10)
    try:
        await provision(js, names)
        kv = await js.key_value(names.sources_bucket)
        await kv.put("job.1", json.dumps(definition).encode())
        store = JetStreamPayloadStore(js, names)
        stored = [await store.put(body) for _, body, _ in pages]
        work = []
        for r in range(rounds):
            for i, ((url, _, ctype), ref) in enumerate(zip(pages, stored, strict=True)):
                n = r * len(pages) + i
                result = FetchResult(
                    attempt=Attempt(job_id=1, entry_id=n, source=definition["name"], url=url),
                    outcome="ok",
                    status=200,
                    payload_ref=ref.ref,
                    content_type=ctype.split(";")[0],
                    size=ref.size,
                )
                work.append((names.fetched, result, None, None))
        feeder = None
        if not pace:
            await publish_many(js, work)
        stop = asyncio.Event()
        rt = Runtime("parser", settings, names, nc, js, stop)
        inside = _time_parse() if parse_ms is not None else None
        settle_heap()
        started, cpu = time.perf_counter(), resource.getrusage(resource.RUSAGE_THREAD)
        tasks = [asyncio.create_task(c) for c in await start(rt)]
        if pace:
            feeder = _feed(work, pace)
        while rt.stats["parsed"] + rt.stats["parse_errors"] < len(work):
            if any(t.done() for t in tasks):
                raise SystemExit("the parser stopped early")
            await asyncio.sleep(0.1)  # a benchmark's progress probe
        took = time.perf_counter() - started
        stop.set()
        await asyncio.gather(*tasks)  # the last publishes and acks
        end = resource.getrusage(resource.RUSAGE_THREAD)
        if feeder is not None:
            feeder.join()
        user_ms = 1000 * (end.ru_utime - cpu.ru_utime) / len(work)
        sys_ms = 1000 * (end.ru_stime - cpu.ru_stime) / len(work)
        cpu_ms = user_ms + sys_ms
        rate = len(work) / took
        print(
            f"parser service e2e:    {rate:8,.0f} pages/s ({len(work)} pages in {took:.2f} s, "
            f"{rt.stats['products']} products, {rt.stats['parse_errors']} errors)"
        )
        parsed = (await js.stream_info(names.stream(PARSED))).state.messages
        print(
            f"parser service CPU:    {cpu_ms:8.3f} ms/page (user {user_ms:.3f}, system "
            f"{sys_ms:.3f}; {parsed} parse results published)"
        )
        if parse_ms is not None and inside is not None:
            in_ms = 1000 * inside[0] / len(work)
            print(
                f"service's own CPU:     {cpu_ms - parse_ms:8.3f} ms/page (minus parse_payload "
                f"alone); {cpu_ms - in_ms:.3f} minus its calls in the service ({in_ms:.3f} ms/page)"
            )
        return rate
    finally:
        await teardown(js, names)
        await nc.close()


async def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--products", type=int, default=400)
    ap.add_argument("--rounds", type=int, default=5, help="service: each page this many times")
    ap.add_argument("--static", type=int, metavar="N", help="the static shop with N products")
    ap.add_argument(
        "--only",
        choices=("parse", "service"),
        help="--static: run one step (for instruction counts: valgrind this at 1 and 3 rounds)",
    )
    ap.add_argument(
        "--pace", type=float, default=0.0, help="--static: fetch results a second (0: all first)"
    )
    args = ap.parse_args()
    if args.static:
        pages, definition = static_pages(args.static)
        source = source_from_dict(definition)
        settle_heap()
        parse_ms = None
        if args.only != "service":
            parse_ms = 1000 * parse_cpu(pages, source, args.rounds)
            print(f"{len(pages)} static shop pages; parse_payload alone: {parse_ms:.3f} ms/page")
        if args.only != "parse":
            await bench_service(pages, definition, args.rounds, parse_ms, args.pace)
        return
    async with DemoShop(hosts=("127.0.0.2", "127.0.0.3"), products=args.products) as shop:
        definition = shop.source_definition("bench-shop")
        pages = await download(shop)
    source = source_from_dict(definition)
    product_pages = sum(b"application/ld+json" in body for _, body, _ in pages)
    print(f"{len(pages)} demo shop pages ({product_pages} with JSON-LD)")
    trawl_rate, soup_rate = bench_parse(pages, source, definition)
    if soup_rate:
        print(f"trawl / BeautifulSoup: {trawl_rate / soup_rate:8.1f}x")
    await bench_service(pages, definition, args.rounds)


if __name__ == "__main__":
    run(main())
