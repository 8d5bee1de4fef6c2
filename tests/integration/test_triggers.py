"""Triggers against a real scheduler process: good ones start jobs exactly once, bad ones get a
clear error reply and land in the DLQ with their reason, and the scheduler keeps running."""

from __future__ import annotations

from pathlib import Path

import msgspec
import pytest

from control.client import TrawlClient
from schemas.messages import TriggerReply
from services.scheduler.catalog import save_source
from shared import names as n
from shared.names import Names
from shared.sources import source_from_dict
from tests.support.stack import Stack, eventually
from tests.support.streams import dead_letters

pytestmark = pytest.mark.timeout(90)

SOURCE = {"name": "shop", "seeds": ["http://127.0.0.2:9/c/a"], "allow_private": True}


async def _request(client: TrawlClient, body: bytes) -> TriggerReply:
    assert client.nc is not None
    msg = await client.nc.request(client.names.trigger, body, timeout=10)
    return msgspec.json.decode(msg.data, type=TriggerReply)


async def test_triggers_good_and_bad(env, settings, pool, tmp_path: Path) -> None:
    async with pool.acquire() as conn:
        await save_source(conn, source_from_dict(SOURCE))
        await save_source(conn, source_from_dict({**SOURCE, "name": "narrow"}))
    scale = "fetcher=0,parser=0,refresher=0"  # no crawling: only the trigger path is under test
    async with Stack(env, tmp_path / "logs", scale=scale), TrawlClient(settings) as client:
        bad_json = await _request(client, b'{"source": ')
        unknown = await _request(client, b'{"source": "nope"}')
        no_seed = await _request(client, b'{"source": "shop", "seeds": ["javascript:alert(1)"]}')
        assert bad_json.error and bad_json.error.startswith("malformed trigger")
        assert unknown.error and "unknown source 'nope'" in unknown.error
        assert no_seed.error and "no usable seed" in no_seed.error

        # The scheduler is still serving: a minimal trigger answers with a job id ...
        good = await _request(client, b'{"source": "shop"}')
        assert good.error is None and good.job_id is not None
        # ... and the same trigger again joins the running job instead of starting another.
        again = await client.trigger("shop")
        assert again.job_id == good.job_id and again.existing

        # A trigger with its own seeds starts a partial job (it counts no misses); a trigger
        # for the whole source that joins it widens it.
        partial = "SELECT partial FROM jobs WHERE id = $1"
        narrow = await client.trigger("narrow", seeds=["http://127.0.0.2:9/c/b"])
        async with pool.acquire() as conn:
            assert await conn.fetchval(partial, narrow.job_id) is True
        whole = await client.trigger("narrow")
        assert whole.job_id == narrow.job_id and whole.existing
        async with pool.acquire() as conn:
            assert await conn.fetchval(partial, narrow.job_id) is False

        # The stream copies of the bad triggers are dead-lettered with their reasons.
        js = client.nc.jetstream()  # type: ignore[union-attr]
        names = Names(settings.namespace)
        letters = [
            letter
            for letter, _ in await dead_letters(js, names, 3, stream_key=n.TRIGGER, timeout=30)
        ]
        reasons = sorted(letter.reason for letter in letters)
        assert any(r.startswith("malformed message") for r in reasons), reasons
        assert any("unknown source 'nope'" in r for r in reasons), reasons
        assert any("no usable seed" in r for r in reasons), reasons
        assert all(letter.stream == n.TRIGGER for letter in letters)

    # Request path and stream path saw every good trigger; each started or joined one job.
    async with pool.acquire() as conn:
        jobs = await conn.fetchval("SELECT count(*) FROM jobs WHERE source = 'shop'")
    assert jobs == 1


async def test_a_published_trigger_is_kept_until_a_scheduler_runs(
    env, settings, pool, tmp_path: Path
) -> None:
    async with pool.acquire() as conn:
        await save_source(conn, source_from_dict(SOURCE))
    async with TrawlClient(settings) as client:
        from shared.provision import provision

        await provision(client.nc.jetstream(), client.names)  # type: ignore[union-attr]
        reply = await client.trigger("shop")  # nobody answers: queued in the stream
        assert reply.job_id is None and "queued" in (reply.error or "")

    scale = "fetcher=0,parser=0,refresher=0"
    async with Stack(env, tmp_path / "logs", scale=scale):

        async def job_started() -> bool:
            async with pool.acquire() as conn:
                return bool(await conn.fetchval("SELECT count(*) FROM jobs"))

        await eventually(job_started, timeout=30, what="the queued trigger to start a job")


async def test_a_verify_trigger_runs_beside_the_crawl(env, settings, pool, tmp_path: Path) -> None:
    """The refresher's re-check of change candidates: a job of its own even while the source's
    crawl runs, partial, only its pages (product entries, no link followed), ahead of the
    crawl's work; the same trigger id again is the same job."""
    from schemas.messages import FetchWork, Trigger
    from services.scheduler import store

    async with pool.acquire() as conn:  # fast: the verify job's work is dispatched at once
        await save_source(conn, source_from_dict({**SOURCE, "pacing": {"profile": "fast"}}))
    scale = "fetcher=0,parser=0,refresher=0"
    async with Stack(env, tmp_path / "logs", scale=scale), TrawlClient(settings) as client:
        crawl = await client.trigger("shop")
        assert crawl.job_id is not None
        # The crawl fetched the page (stored): the re-check must not present that face.
        seen = "http://127.0.0.2:9/p/one"
        async with pool.acquire() as conn:
            entry = await conn.fetchval(
                "INSERT INTO entries (job_id, url, domain, kind, priority, rank, state) "
                "VALUES ($1, $2, '127.0.0.2:9', 'product', 40, 40, 'done') RETURNING id",
                crawl.job_id,
                seen,
            )
            await conn.execute(
                "INSERT INTO attempts (attempt_id, entry_id, job_id, url, outcome, proxy, "
                "fingerprint) VALUES ($1, $2, $3, $4, 'ok', 'p7', 'firefox152-mac')",
                f"{entry}.1",
                entry,
                crawl.job_id,
                seen,
            )
            await conn.execute(
                "INSERT INTO payloads (ref, url, job_id, attempt_id, size, sha256) "
                "VALUES ('r', $1, $2, $3, 1, 'h')",
                seen,
                crawl.job_id,
                f"{entry}.1",
            )
            await conn.execute(  # what a crawl would revalidate with
                "INSERT INTO url_state (source, url, etag, payload_ref) VALUES ('shop', $1, "
                "'\"e1\"', 'r')",
                seen,
            )
        page = "http://127.0.0.2:9/p/one?utm_source=x"
        body = msgspec.json.encode(
            Trigger(
                source="shop",
                id="verify-shop-1-2.1",
                kind="verify",
                seeds=[page],
                priority=100,
                requested_by="verify",
            )
        )
        first = await _request(client, body)
        again = await _request(client, body)
        assert first.error is None and first.job_id not in (None, crawl.job_id)
        assert again.job_id == first.job_id
        async with pool.acquire() as conn:
            job = await conn.fetchrow(
                "SELECT kind, status, partial FROM jobs WHERE id = $1", first.job_id
            )
            entries = await conn.fetch(
                "SELECT url, kind, depth, priority FROM entries WHERE job_id = $1", first.job_id
            )
            assert await store.jobs.verify_avoid(conn, crawl.job_id) is None  # not a verify job
            assert await store.jobs.verify_avoid(conn, first.job_id) == (["firefox152-mac"], ["p7"])
            definition = await store.jobs.definition(conn, first.job_id)
        assert tuple(job) == ("verify", "running", True)
        assert [tuple(e) for e in entries] == [("http://127.0.0.2:9/p/one", "product", 0, 80)]
        assert definition["links"]["max_depth"] == 0 and definition["images"] is False
        # The crawl is still the source's running job: a plain trigger joins it.
        assert (await client.trigger("shop")).job_id == crawl.job_id
        # Its work: a fresh visitor (no validators) that avoids the crawl's identity and proxy.
        js = client.nc.jetstream()  # type: ignore[union-attr]
        stream = Names(settings.namespace).stream(n.FETCH)

        async def work() -> list[FetchWork]:
            info = await js.stream_info(stream)
            found = []
            for seq in range(info.state.first_seq, info.state.last_seq + 1):
                raw = await js.get_msg(stream, seq)
                body = msgspec.json.decode(raw.data, type=FetchWork)
                if body.attempt.job_id == first.job_id:
                    found.append(body)
            return found

        async def dispatched() -> bool:
            return bool(await work())

        await eventually(dispatched, timeout=30, what="the verify job's work")
        [fetch] = await work()
        assert fetch.attempt.url == seen and fetch.etag is None and fetch.last_modified is None
        assert fetch.policy.avoid_identities == ["firefox152-mac"]
        assert fetch.policy.avoid_proxies == ["p7"]
