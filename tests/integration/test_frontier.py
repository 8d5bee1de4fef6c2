"""The frontier in Postgres: aging order, schedule claiming across replicas, stale recovery."""

from __future__ import annotations

import asyncio
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import msgspec
import pytest

from control.client import TrawlClient
from schemas.messages import FetchWork
from services.scheduler.catalog import save_source
from services.scheduler.dispatch import Dispatcher
from services.scheduler.frontier import Admission, Candidate
from services.scheduler.jobs import JobSources
from services.scheduler.schedules import add_schedule, claim_due
from shared import names as n
from shared.names import Names
from shared.provision import provision
from shared.sources import source_from_dict
from tests.support.stack import Stack, eventually

ONE_DOMAIN = {
    "name": "aging",
    "seeds": ["http://127.0.0.2:9/seed"],
    "allow_private": True,
    "pacing": {"min_delay": 0, "max_delay": 0, "max_in_flight": 1},
}


async def _job(conn, definition: dict) -> tuple[int, Admission]:
    source = source_from_dict(definition)
    await save_source(conn, source)
    job_id = await conn.fetchval(
        "INSERT INTO jobs (source, definition) VALUES ($1, $2) RETURNING id",
        source.name,
        definition,
    )
    return job_id, Admission(source, ["127.0.0.2:9"])


async def _dispatched_urls(js, names: Names, count: int) -> list[str]:
    sub = await js.pull_subscribe(
        names.fetch, durable=names.consumer("fetcher", n.FETCH), stream=names.stream(n.FETCH)
    )
    urls: list[str] = []
    while len(urls) < count:
        for msg in await sub.fetch(count - len(urls), timeout=5):
            urls.append(msgspec.json.decode(msg.data, type=FetchWork).attempt.url)
            await msg.ack()
    return urls


async def test_an_old_low_priority_entry_overtakes_fresh_higher_ones(pool, nc, namespace) -> None:
    js = nc.jetstream()
    names = Names(namespace)
    await provision(js, names)
    now = time.time()
    async with pool.acquire() as conn:
        job_id, admission = await _job(conn, ONE_DOMAIN)
        # Three hours old at priority 40 (product) → aged 70: it beats a fresh seed (60),
        # a fresh pagination entry (50) and a one-hour-old product (aged 50).
        await admission.admit(
            conn, job_id, [Candidate("http://127.0.0.2:9/p/old", "product")], now=now - 3 * 3600
        )
        await admission.admit(
            conn, job_id, [Candidate("http://127.0.0.2:9/p/hour", "product")], now=now - 3600
        )
        await admission.admit(
            conn,
            job_id,
            [
                Candidate("http://127.0.0.2:9/c/next?page=2", "pagination"),
                Candidate("http://127.0.0.2:9/seed", "seed"),
            ],
            now=now,
        )
    dispatcher = Dispatcher(pool, js, names, JobSources())
    order = []
    for _ in range(4):  # max_in_flight 1: one release per cycle, then the slot must be freed
        assert await dispatcher.cycle() == 1
        order += await _dispatched_urls(js, names, 1)
        async with pool.acquire() as conn:
            await conn.execute("UPDATE domains SET in_flight = 0")
    assert order[:2] == ["http://127.0.0.2:9/p/old", "http://127.0.0.2:9/seed"]  # 70, 60
    # 40 + 10 (aged an hour) ties with a fresh 50: ties are broken randomly, by design.
    assert set(order[2:]) == {"http://127.0.0.2:9/p/hour", "http://127.0.0.2:9/c/next?page=2"}


async def test_each_due_schedule_is_claimed_by_exactly_one_replica(pool) -> None:
    async with pool.acquire() as conn:
        for i in range(40):
            await save_source(conn, source_from_dict({**ONE_DOMAIN, "name": f"s{i}"}))
            await add_schedule(conn, f"s{i}", "@every 1h")
        await conn.execute("UPDATE schedules SET next_run_at = now() - interval '1 minute'")
    claims: list[str] = []
    now = datetime.now(UTC)

    async def replica() -> None:
        async with pool.acquire() as conn:
            while (claimed := await claim_due(conn, now)) is not None:
                claims.append(claimed[1].id or "")

    await asyncio.gather(*(replica() for _ in range(4)))
    assert len(claims) == 40 and len(set(claims)) == 40
    async with pool.acquire() as conn:
        late = await conn.fetchval("SELECT count(*) FROM schedules WHERE next_run_at <= now()")
        nxt = await conn.fetchval("SELECT min(next_run_at) FROM schedules")
    assert late == 0 and nxt > now + timedelta(minutes=1)


async def test_a_run_is_skipped_while_the_previous_job_runs(pool) -> None:
    async with pool.acquire() as conn:
        job_id, _ = await _job(conn, ONE_DOMAIN)
        schedule_id = await add_schedule(conn, "aging", "@daily")
        await conn.execute("UPDATE schedules SET next_run_at = now() - interval '1 s'")
        assert await claim_due(conn, datetime.now(UTC)) is None
        row = await conn.fetchrow(
            "SELECT last_error, next_run_at FROM schedules WHERE id = $1", schedule_id
        )
    assert f"job {job_id}" in row["last_error"]
    assert row["next_run_at"] > datetime.now(UTC)


@pytest.mark.timeout(60)
async def test_lost_work_is_dispatched_again_after_the_visibility_timeout(
    env, settings, pool, tmp_path: Path
) -> None:
    env = {**env, "TRAWL_VISIBILITY_TIMEOUT": "1"}
    async with pool.acquire() as conn:
        await save_source(conn, source_from_dict(ONE_DOMAIN))
    # A scheduler alone: nobody fetches, so the work message can be deleted before use.
    async with (
        Stack(env, tmp_path / "logs", scale="fetcher=0,parser=0,refresher=0"),
        TrawlClient(settings) as client,
    ):
        reply = await client.trigger("aging")
        js = client.nc.jetstream()  # type: ignore[union-attr]
        names = Names(settings.namespace)

        async def attempts(count: int) -> bool:
            async with pool.acquire() as conn:
                got = await conn.fetchval(
                    "SELECT max(attempts) FROM entries WHERE job_id = $1", reply.job_id
                )
            return (got or 0) >= count

        await eventually(lambda: attempts(1), timeout=20, what="the first dispatch")
        await js.purge_stream(names.stream(n.FETCH))  # the work message is lost
        await eventually(lambda: attempts(2), timeout=20, what="a re-dispatch")
        info = await js.stream_info(names.stream(n.FETCH))
        assert info.state.messages >= 1  # the work is back in the queue
