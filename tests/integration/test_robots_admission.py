"""robots.txt at admission: links a record the fetchers keep disallows are admitted settled
(done, ``robots_disallowed``, an attempt and its history row), never dispatched; with no
usable record they are admitted as before, for the fetcher to decide.

The records are written by the fetcher's own ``RobotsCache`` (its robots.txt "fetch" answers
from a table), into the real KV bucket; the job, its dispatch and its results are the
scheduler's own functions against a per-test database.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable
from typing import Any

import asyncpg
import msgspec
import pytest
from nats.js.kv import KeyValue

from schemas.messages import FetchWork, Link, ParseResult, Trigger
from services.fetcher.robots import RobotsCache
from services.scheduler import store
from services.scheduler.catalog import save_source
from services.scheduler.dispatch import Dispatcher
from services.scheduler.jobs import JobSources
from services.scheduler.results import apply_parse_result
from services.scheduler.robots import KnownRobots
from services.scheduler.triggers import start_job
from shared import names as n
from shared.db import connect
from shared.names import Names
from shared.provision import provision
from shared.sources import source_from_dict

BASE = "http://127.0.0.2:9"
OTHER = "http://127.0.0.3:9"  # an origin whose robots.txt no fetcher has read yet
SEED = f"{BASE}/"
RULES = b"""\
User-agent: *
Disallow: /private
Disallow: /*?sort=

User-agent: AcmeBot
Disallow: /acme
"""
TABLE: dict[str, tuple[int | None, bytes]] = {
    f"{BASE}/robots.txt": (200, RULES),
    "http://failing.example/robots.txt": (503, b""),
    "http://missing.example/robots.txt": (404, b""),
}


class Clock:
    def __init__(self) -> None:
        self.now = time.time()

    def __call__(self) -> float:
        return self.now


async def table_origin(robots_url: str) -> tuple[int | None, bytes]:
    return TABLE.get(robots_url, (404, b""))


@pytest.fixture
async def kv(nc: Any, namespace: str) -> KeyValue:
    js = nc.jetstream()
    names = Names(namespace)
    await provision(js, names)
    return await js.key_value(names.robots_bucket)


def known_robots(kv: KeyValue, **kwargs: Any) -> KnownRobots:
    async def bucket() -> KeyValue:
        return kv

    return KnownRobots(bucket, **kwargs)


async def fetched_robots(kv: KeyValue, url: str, clock: Callable[[], float] = time.time) -> None:
    """What a fetcher leaves in the bucket once it has checked ``url``."""
    await RobotsCache(kv, table_origin, clock=clock).check(url)


# -- the cache the scheduler reads records through -----------------------------------------


async def test_only_a_known_unexpired_2xx_record_disallows(kv: KeyValue) -> None:
    clock = Clock()
    robots = known_robots(kv, recheck=5.0, clock=clock)
    # No record yet: unknown, the link goes to the fetcher.
    assert not await robots.disallows(f"{BASE}/private/1", None)
    await fetched_robots(kv, SEED, clock)
    # Read at most every `recheck` seconds: the new record is seen on the next read.
    assert not await robots.disallows(f"{BASE}/private/1", None)
    clock.now += 5.0
    assert await robots.disallows(f"{BASE}/private/1", None)
    assert await robots.disallows(f"{BASE}/list?sort=price", None)
    assert not await robots.disallows(f"{BASE}/public/1", None)
    # The source's own crawler UA is obeyed too, as the fetcher obeys it.
    assert await robots.disallows(f"{BASE}/acme/1", "AcmeBot")
    assert not await robots.disallows(f"{BASE}/acme/1", None)
    # Never past the record's expiry (an hour after the fetch), whatever was read.
    clock.now += 3600.0
    assert not await robots.disallows(f"{BASE}/private/1", None)


async def test_records_that_are_not_rules_settle_nothing(kv: KeyValue) -> None:
    robots = known_robots(kv)
    for origin in ("http://failing.example", "http://missing.example"):
        await fetched_robots(kv, f"{origin}/")
        # The fetcher says "disallowed for now" after a 503: its call, not ours.
        fetcher = RobotsCache(kv, table_origin)
        assert (await fetcher.check(f"{origin}/p")).allowed == (origin.endswith("missing.example"))
        assert not await robots.disallows(f"{origin}/p", None)
    assert not await robots.disallows("ftp://127.0.0.2/private", None)


async def test_an_unreadable_bucket_means_unknown(kv: KeyValue) -> None:
    await fetched_robots(kv, SEED)
    calls = 0

    async def broken() -> KeyValue:
        nonlocal calls
        calls += 1
        raise OSError("NATS is down")

    clock = Clock()
    robots = KnownRobots(broken, recheck=5.0, clock=clock)
    assert not await robots.disallows(f"{BASE}/private/1", None)
    assert not await robots.disallows(f"{BASE}/private/2", None)
    assert calls == 1  # "unknown" is remembered until the next recheck, not retried per link
    clock.now += 5.0
    assert not await robots.disallows(f"{BASE}/private/1", None)
    assert calls == 2


# -- admission ----------------------------------------------------------------------------


class Job:
    def __init__(self, pool: asyncpg.Pool, conn: asyncpg.Connection, js: Any, names: Names):
        self.conn = conn
        self.js = js
        self.names = names
        self.job_sources = JobSources()
        self.dispatcher = Dispatcher(pool, js, names, self.job_sources)
        self.sub: Any = None
        self.job_id = 0

    async def start(self, **source: Any) -> FetchWork:
        definition = {
            "name": "shop",
            "seeds": [SEED],
            "allow_private": True,
            "allowed_domains": ["127.0.0.2:9", "127.0.0.3:9"],
            "pacing": {"min_delay": 0, "max_delay": 0, "max_in_flight": 8},
            **source,
        }
        await save_source(self.conn, source_from_dict(definition))
        reply, _ = await start_job(self.conn, Trigger(source="shop"), "test-trigger")
        assert reply.job_id is not None
        self.job_id = reply.job_id
        self.sub = await self.js.pull_subscribe(
            self.names.fetch,
            durable=self.names.consumer("fetcher", n.FETCH),
            stream=self.names.stream(n.FETCH),
        )
        (seed,) = await self.dispatch(1)
        return seed

    async def dispatch(self, count: int) -> list[FetchWork]:
        """Dispatch everything due: exactly ``count`` entries must go."""
        assert await self.dispatcher.cycle() == count
        assert await self.dispatcher.cycle() == 0
        works: list[FetchWork] = []
        while len(works) < count:
            for msg in await self.sub.fetch(count - len(works), timeout=10):
                works.append(msgspec.json.decode(msg.data, type=FetchWork))
                await msg.ack()
        return works

    async def entries(self) -> dict[str, tuple[str, str | None, int]]:
        rows = await self.conn.fetch(
            "SELECT url, state, last_outcome, attempts FROM entries WHERE job_id = $1",
            self.job_id,
        )
        return {r["url"]: (r["state"], r["last_outcome"], r["attempts"]) for r in rows}

    async def history(self) -> dict[str, tuple[str, str | None, str | None]]:
        rows = await self.conn.fetch(
            "SELECT attempt_id, url, outcome, error FROM attempts WHERE job_id = $1", self.job_id
        )
        return {r["url"]: (r["attempt_id"], r["outcome"], r["error"]) for r in rows}


@pytest.fixture
async def job(
    pool: asyncpg.Pool, database_url: str, nc: Any, namespace: str, kv: KeyValue
) -> AsyncIterator[Job]:
    conn = await connect(database_url)
    try:
        j = Job(pool, conn, nc.jetstream(), Names(namespace))
        yield j
        if j.sub is not None:
            await j.sub.unsubscribe()
    finally:
        await conn.close()


LINKS = [
    Link(url=f"{BASE}/private/1", kind="page"),
    Link(url=f"{BASE}/c/shoes?sort=price", kind="page"),
    Link(url=f"{BASE}/p/1", kind="product"),
    Link(url=f"{OTHER}/private/2", kind="page"),  # no record for this origin: the fetcher's
    Link(url=f"{BASE}/private/1", kind="page"),  # a repeat: admitted once
]


async def test_disallowed_links_are_admitted_settled_and_never_dispatched(
    job: Job, kv: KeyValue
) -> None:
    seed = await job.start()
    await fetched_robots(kv, seed.attempt.url)  # the fetcher checked the seed before its GET
    robots = known_robots(kv).batch()
    result = ParseResult(attempt=seed.attempt, links=LINKS)

    async def parsed() -> tuple[Any, int]:
        return await apply_parse_result(job.conn, result, job.job_sources, robots=robots)

    _, admitted = await parsed()
    assert admitted == 4 and robots.settled == 2
    entries = await job.entries()
    disallowed = ("done", "robots_disallowed", 1)
    assert entries == {
        SEED: ("dispatched", None, 1),
        f"{BASE}/private/1": disallowed,
        f"{BASE}/c/shoes?sort=price": disallowed,
        f"{BASE}/p/1": ("pending", None, 0),
        f"{OTHER}/private/2": ("pending", None, 0),
    }
    # Why they were not fetched, where a fetcher's result would have said it.
    history = await job.history()
    private = await job.conn.fetchval("SELECT id FROM entries WHERE url = $1", f"{BASE}/private/1")
    assert history[f"{BASE}/private/1"] == (
        f"{private}.1",
        "robots_disallowed",
        store.frontier.ROBOTS_ERROR,
    )
    assert history[f"{BASE}/c/shoes?sort=price"][1:] == (
        "robots_disallowed",
        store.frontier.ROBOTS_ERROR,
    )
    counts = await store.jobs.counters(job.conn, job.job_id)
    assert counts["outcome_robots_disallowed"] == 2, counts

    # A redelivered parse result settles nothing twice.
    assert await parsed() == (None, 0)
    assert await job.entries() == entries and await job.history() == history

    # Only the pending links go out; the settled ones never do.
    works = await job.dispatch(2)
    assert {w.attempt.url for w in works} == {f"{BASE}/p/1", f"{OTHER}/private/2"}


async def test_a_source_that_ignores_robots_txt_admits_every_link(job: Job, kv: KeyValue) -> None:
    seed = await job.start(robots="ignore")
    await fetched_robots(kv, seed.attempt.url)
    robots = known_robots(kv).batch()
    result = ParseResult(attempt=seed.attempt, links=LINKS)
    _, admitted = await apply_parse_result(job.conn, result, job.job_sources, robots=robots)
    assert admitted == 4 and robots.settled == 0
    await job.dispatch(4)


async def test_the_source_user_agent_group_is_obeyed_at_admission(job: Job, kv: KeyValue) -> None:
    seed = await job.start(user_agent="AcmeBot")
    await fetched_robots(kv, seed.attempt.url)
    robots = known_robots(kv).batch()
    links = [Link(url=f"{BASE}/acme/1", kind="page"), Link(url=f"{BASE}/p/1", kind="product")]
    result = ParseResult(attempt=seed.attempt, links=links)
    await apply_parse_result(job.conn, result, job.job_sources, robots=robots)
    assert robots.settled == 1
    assert (await job.entries())[f"{BASE}/acme/1"] == ("done", "robots_disallowed", 1)
