"""Depth along a listing: its pages are one level of the site, however many there are.

The kill test once lost three products of 1,800 this way: discovery order (changed by the
kills) put some category pages at depth 10 (max_depth), and products only those pages list
were refused at depth 11. A pagination link now keeps its page's depth; a run of pagination
links is bounded by ``links.max_pagination`` instead.
"""

from __future__ import annotations

import asyncpg

from schemas.messages import Attempt, Link, ParseResult
from services.parser.page import parse_page
from services.scheduler.catalog import save_source
from services.scheduler.frontier import Admission, Candidate
from services.scheduler.jobs import JobSources
from services.scheduler.results import apply_parse_result
from shared.sources import source_from_dict

BASE = "http://127.0.0.2:9"


async def _crawl_listing(conn: asyncpg.Connection, links: dict, pages: int) -> int:
    """Parse a listing of ``pages`` pages, each linking the next page and one product."""
    definition = {"name": "deep", "seeds": [f"{BASE}/c/all?page=1"], "links": links}
    source = source_from_dict(definition)
    await save_source(conn, source)
    job_id = await conn.fetchval(
        "INSERT INTO jobs (source, definition) VALUES ($1, $2) RETURNING id", "deep", definition
    )
    await Admission(source, ["127.0.0.2:9"]).admit(
        conn, job_id, [Candidate(f"{BASE}/c/all?page=1", "seed")]
    )
    job_sources = JobSources()
    for page in range(1, pages + 1):
        entry = await conn.fetchrow(
            "UPDATE entries SET state = 'dispatched', attempts = 1 "
            "WHERE job_id = $1 AND url = $2 RETURNING id, depth",
            job_id,
            f"{BASE}/c/all?page={page}",
        )
        if entry is None:
            break  # refused: the listing ends here
        result = ParseResult(
            attempt=Attempt(
                job_id=job_id,
                entry_id=entry["id"],
                source="deep",
                url=f"{BASE}/c/all?page={page}",
                depth=entry["depth"],
            ),
            links=[
                Link(url=f"{BASE}/c/all?page={page + 1}", kind="pagination"),
                Link(url=f"{BASE}/p/{page}", kind="product"),
            ],
        )
        await apply_parse_result(conn, result, job_sources)
    return job_id


async def test_every_page_of_a_long_listing_and_its_products_are_admitted(pool) -> None:
    async with pool.acquire() as conn:
        job_id = await _crawl_listing(conn, {"max_depth": 2}, pages=25)
        rows = await conn.fetch("SELECT kind, depth FROM entries WHERE job_id = $1", job_id)
    pages = [r["depth"] for r in rows if r["kind"] in ("seed", "pagination")]
    products = [r["depth"] for r in rows if r["kind"] == "product"]
    assert len(pages) == 26 and set(pages) == {0}  # page 26 is admitted, not parsed here
    assert len(products) == 25 and set(products) == {1}


async def test_a_pagination_trap_is_cut_at_max_pagination(pool) -> None:
    async with pool.acquire() as conn:
        job_id = await _crawl_listing(conn, {"max_pagination": 5}, pages=50)
        hops = await conn.fetch(
            "SELECT pagination_hops FROM entries WHERE job_id = $1 AND kind <> 'product' "
            "ORDER BY pagination_hops",
            job_id,
        )
        products = await conn.fetchval(
            "SELECT count(*) FROM entries WHERE job_id = $1 AND kind = 'product'", job_id
        )
    assert [r["pagination_hops"] for r in hops] == [0, 1, 2, 3, 4, 5]
    assert products == 6  # the products of every admitted page are still taken


# -- traps, with the parser's own classification -------------------------------------------------
# The pages below are generated; each is parsed by the parser's real code path and its links
# admitted by the scheduler's, so the test covers what the classification lets in.

TRAP = "http://127.0.0.2:9"
COLORS = ("red", "blue", "green")
SIZES = ("s", "m", "l")


def _facet_page(url: str) -> bytes:
    """A shoe listing where every filter links every combination with one more filter (the
    classic facet trap), each combination with a numbered pager of three pages."""
    query = dict(pair.split("=", 1) for pair in url.partition("?")[2].split("&") if "=" in pair)
    page = int(query.pop("page", "1"))
    base = "/c/shoes?" + "&".join(f"{k}={v}" for k, v in sorted(query.items()))
    facets = []
    for name, values in (("color", COLORS), ("size", SIZES)):
        for value in values:
            if name not in query:
                combo = sorted({**query, name: value}.items())
                href = "/c/shoes?" + "&".join(f"{k}={v}" for k, v in combo)
                facets.append(f'<li><a href="{href.replace("&", "&amp;")}">{value} (12)</a></li>')
    pager = "".join(
        f'<a href="{base.replace("&", "&amp;")}&amp;page={n}">{n}</a>'
        for n in (1, 2, 3)
        if n != page
    )
    cards = "".join(
        f'<div class="product-card"><a href="/p/shoe-{abs(hash((url, i))) % 10**6}">Shoe</a></div>'
        for i in range(2)
    )
    return (
        f'<html><body><ul class="facets">{"".join(facets)}</ul>{cards}'
        f'<div class="pagination">{pager}</div></body></html>'
    ).encode()


def _endless_next_page(url: str) -> bytes:
    """A listing whose "Next" never ends: each page links a next cursor of its own."""
    token = int(url.rpartition("after=")[2] or 0) if "after=" in url else 0
    return (
        f'<html><body><div class="product-card"><a href="/p/item-{token}">Item {token}</a></div>'
        f'<a class="next" href="/feed?after={token + 7}">Next »</a></body></html>'
    ).encode()


async def _crawl(
    conn: asyncpg.Connection, seed: str, links: dict, render, *, steps: int = 500
) -> int:
    """Crawl ``seed`` breadth first: each admitted page (not products) is rendered, parsed by
    ``parse_page`` and its links admitted, until nothing is pending."""
    definition = {"name": "trap", "seeds": [seed], "links": links}
    source = source_from_dict(definition)
    await save_source(conn, source)
    job_id = await conn.fetchval(
        "INSERT INTO jobs (source, definition) VALUES ($1, $2) RETURNING id", "trap", definition
    )
    await Admission(source, ["127.0.0.2:9"]).admit(conn, job_id, [Candidate(seed, "seed")])
    job_sources = JobSources()
    for _ in range(steps):
        entry = await conn.fetchrow(
            "UPDATE entries SET state = 'dispatched', attempts = 1 WHERE id = ("
            "  SELECT id FROM entries WHERE job_id = $1 AND state = 'pending' AND kind <> 'product'"
            "  ORDER BY id LIMIT 1) RETURNING id, url, depth",
            job_id,
        )
        if entry is None:
            break
        parsed = parse_page(render(entry["url"]), entry["url"], source=source)
        result = ParseResult(
            attempt=Attempt(
                job_id=job_id,
                entry_id=entry["id"],
                source="trap",
                url=entry["url"],
                depth=entry["depth"],
            ),
            links=parsed.links,
        )
        await apply_parse_result(conn, result, job_sources)
    else:
        raise AssertionError("the crawl did not end")
    return job_id


async def test_a_facet_combination_trap_is_bounded_by_depth(pool) -> None:
    async with pool.acquire() as conn:
        job_id = await _crawl(conn, f"{TRAP}/c/shoes", {"max_depth": 2}, _facet_page)
        rows = await conn.fetch(
            "SELECT url, kind, depth, pagination_hops FROM entries WHERE job_id = $1", job_id
        )
    listings = [r for r in rows if r["kind"] != "product"]
    # filters add depth (they are pages, never pagination); a filter's pages keep its depth
    for r in listings:
        filters = sum(f"{name}=" in r["url"] for name in ("color", "size"))
        assert r["depth"] == filters, r["url"]
        assert r["kind"] == ("pagination" if "page=" in r["url"] else "page" if filters else "seed")
    assert max(r["depth"] for r in rows) <= 3  # products of depth-2 listings sit at 3
    # the seed, 6 one-filter and 9 two-filter combinations, each with pages 2 and 3 (and 1)
    combos = 1 + len(COLORS) + len(SIZES) + len(COLORS) * len(SIZES)
    assert len(listings) <= combos * 4


async def test_an_endless_next_is_cut_at_max_pagination(pool) -> None:
    async with pool.acquire() as conn:
        job_id = await _crawl(conn, f"{TRAP}/feed", {"max_pagination": 20}, _endless_next_page)
        rows = await conn.fetch(
            "SELECT kind, depth, pagination_hops FROM entries WHERE job_id = $1", job_id
        )
    pages = [r for r in rows if r["kind"] != "product"]
    assert sorted(r["pagination_hops"] for r in pages) == list(range(21))
    assert {r["depth"] for r in pages} == {0}
    assert sum(r["kind"] == "product" for r in rows) == 21  # every admitted page's product
