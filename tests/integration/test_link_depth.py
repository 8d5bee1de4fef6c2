"""Depth along a listing: its pages are one level of the site, however many there are.

The kill test once lost three products of 1,800 this way: discovery order (changed by the
kills) put some category pages at depth 10 (max_depth), and products only those pages list
were refused at depth 11. A pagination link now keeps its page's depth; a run of pagination
links is bounded by ``links.max_pagination`` instead.
"""

from __future__ import annotations

import asyncpg

from schemas.messages import Attempt, Link, ParseResult
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
