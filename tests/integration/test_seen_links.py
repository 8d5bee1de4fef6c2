"""The scheduler's seen-set: known links skip the admission query, and dedup stays exact.

Each replica keeps its own set and Postgres decides (the unique index, ON CONFLICT): two
replicas admitting overlapping links, in either order and at once, admit each URL once; a set
that starts empty (a restart) or forgets admits nothing twice; a rolled-back transaction
teaches the set nothing, so no link is lost.
"""

from __future__ import annotations

import asyncio
import itertools

import asyncpg
import pytest

from schemas.messages import Attempt, Link, ParseResult
from services.scheduler.catalog import save_source
from services.scheduler.frontier import Admission, Candidate
from services.scheduler.jobs import JobSources
from services.scheduler.results import apply_parse_result
from services.scheduler.seen import SeenLinks
from services.scheduler.store import Conn
from shared.sources import source_from_dict

BASE = "http://127.0.0.2:9"
_pages = itertools.count()


async def _job(conn: Conn) -> int:
    definition = {"name": "seen", "seeds": [f"{BASE}/"], "links": {"max_depth": 100}}
    source = source_from_dict(definition)
    await save_source(conn, source)
    job_id = await conn.fetchval(
        "INSERT INTO jobs (source, definition) VALUES ($1, $2) RETURNING id", "seen", definition
    )
    await Admission(source, ["127.0.0.2:9"]).admit(conn, job_id, [Candidate(f"{BASE}/", "seed")])
    return int(job_id)


async def _result(conn: Conn, job_id: int, urls: list[str]) -> ParseResult:
    """A parse result of a fresh dispatched page linking ``urls``."""
    page = f"{BASE}/parsed/{next(_pages)}"
    entry_id = await conn.fetchval(
        "INSERT INTO entries (job_id, url, domain, kind, depth, priority, rank, state, attempts)"
        " VALUES ($1, $2, '127.0.0.2:9', 'page', 1, 0, 0, 'dispatched', 1) RETURNING id",
        job_id,
        page,
    )
    return ParseResult(
        attempt=Attempt(job_id=job_id, entry_id=entry_id, source="seen", url=page, depth=1),
        links=[Link(url=u, kind="product") for u in urls],
    )


async def _linked(conn: Conn, job_id: int) -> list[str]:
    rows = await conn.fetch(
        "SELECT url FROM entries WHERE job_id = $1 AND url LIKE $2 ORDER BY url",
        job_id,
        f"{BASE}/p/%",
    )
    return [r["url"] for r in rows]


def _urls(numbers: range) -> list[str]:
    return [f"{BASE}/p/{n}" for n in numbers]


@pytest.mark.parametrize("order", ["a_first", "b_first"])
async def test_two_replicas_with_overlapping_links_admit_each_url_once(pool, order) -> None:
    replica_a, replica_b = SeenLinks(), SeenLinks()
    job_sources = JobSources()
    async with pool.acquire() as conn:
        job_id = await _job(conn)
        batches = [
            (replica_a, _urls(range(0, 30))),
            (replica_b, _urls(range(20, 50))),
            (replica_a, _urls(range(10, 60))),
            (replica_b, _urls(range(0, 60))),
        ]
        if order == "b_first":
            batches.reverse()
        admitted = 0
        for replica, urls in batches:
            _, n = await apply_parse_result(
                conn, await _result(conn, job_id, urls), job_sources, replica
            )
            admitted += n
        assert admitted == 60
        assert await _linked(conn, job_id) == sorted(_urls(range(60)))
        # Each replica has learned every link it saw, sent to Postgres once each.
        assert len(replica_a) == len(replica_b) == 60


async def test_replicas_admitting_at_once_admit_each_url_once(pool) -> None:
    replicas = [SeenLinks(), SeenLinks(), SeenLinks()]
    job_sources = JobSources()
    async with pool.acquire() as conn:
        job_id = await _job(conn)
        results = [
            (replicas[i % 3], await _result(conn, job_id, _urls(range(i * 5, i * 5 + 40))))
            for i in range(12)
        ]

    async def apply(replica: SeenLinks, result: ParseResult) -> int:
        async with pool.acquire() as conn:
            for _ in range(5):
                try:
                    return (await apply_parse_result(conn, result, job_sources, replica))[1]
                except asyncpg.DeadlockDetectedError:
                    await asyncio.sleep(0.05)  # the service retries it (Retry)
            raise AssertionError("deadlocked five times")

    counts = await asyncio.gather(*(apply(r, res) for r, res in results))
    async with pool.acquire() as conn:
        assert await _linked(conn, job_id) == sorted(_urls(range(11 * 5 + 40)))
    assert sum(counts) == 11 * 5 + 40


async def test_a_restart_or_an_evicted_link_admits_nothing_twice(pool) -> None:
    job_sources = JobSources()
    async with pool.acquire() as conn:
        job_id = await _job(conn)
        small = SeenLinks(capacity=5)
        _, first = await apply_parse_result(
            conn, await _result(conn, job_id, _urls(range(20))), job_sources, small
        )
        assert first == 20 and len(small) == 5
        _, again = await apply_parse_result(
            conn, await _result(conn, job_id, _urls(range(25))), job_sources, small
        )
        _, restarted = await apply_parse_result(
            conn, await _result(conn, job_id, _urls(range(30))), job_sources, SeenLinks()
        )
        assert (again, restarted) == (5, 5)
        assert await _linked(conn, job_id) == sorted(_urls(range(30)))


async def test_a_rolled_back_admission_teaches_the_set_nothing(pool) -> None:
    seen = SeenLinks()
    job_sources = JobSources()
    async with pool.acquire() as conn:
        job_id = await _job(conn)
        result = await _result(conn, job_id, _urls(range(10)))
        # Nested in a caller's transaction that rolls back: nothing is remembered.
        with pytest.raises(RuntimeError):
            async with conn.transaction():
                await apply_parse_result(conn, result, job_sources, seen)
                raise RuntimeError("rolled back")
        assert len(seen) == 0
        _, admitted = await apply_parse_result(
            conn, await _result(conn, job_id, _urls(range(10))), job_sources, seen
        )
        assert admitted == 10 and len(seen) == 10
        assert await _linked(conn, job_id) == sorted(_urls(range(10)))
