"""Poison messages on the real subjects, handled by the real services: an undecodable body, a
future version and a result for an entry that does not exist end in the DLQ at once, a message
whose handler always fails after ``max_deliver``, each with its reason and original headers,
the services keep consuming, and ``trawl dlq requeue`` replays a letter once its cause is fixed.

And the corpus (issue 17): malformed bodies on every subject and forged messages whose claims
the database refutes, published while a crawl runs: every one dead-lettered by every consumer
that reads it, with its reason, and the crawl completes with every product exact."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path

import msgspec
import pytest

from control.client import TrawlClient
from demo.faults import Faults
from demo.shop import DemoShop
from schemas.messages import Attempt, DeadLetter, FetchResult
from shared import names as n
from shared.bus import encode
from shared.provision import consumer_specs
from tests.faults.crawl import FAULT_ENV, check_crawl, save_shop_source
from tests.faults.messages import (
    READERS,
    PoisonMessage,
    consumers_idle,
    dispatched_entries,
    forged_corpus,
    malformed_corpus,
    ok_result,
    product_page,
    save_shop,
)
from tests.support.stack import Stack, eventually
from tests.support.streams import dead_letters

pytestmark = [pytest.mark.faults, pytest.mark.timeout(120)]

MAX_DELIVER = 3
ORIGIN = {"X-Origin": "poison-test"}


async def _letters(client: TrawlClient) -> dict[int, tuple[DeadLetter, dict[str, str]]]:
    assert client.nc is not None
    js = client.nc.jetstream()
    stream = client.names.stream(n.DLQ)
    info = await js.stream_info(stream)
    out = {}
    for seq in range(info.state.first_seq, info.state.last_seq + 1):
        try:
            raw = await js.get_msg(stream, seq)
        except Exception:  # deleted (requeued) letters leave holes
            continue
        out[seq] = (msgspec.json.decode(raw.data or b"", type=DeadLetter), dict(raw.headers or {}))
    return out


def _trawl(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    """The real CLI, as an operator runs it."""
    return subprocess.run(
        [str(Path(sys.executable).with_name("trawl")), *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


async def test_poison_messages_are_dead_lettered_and_a_fixed_one_requeued(
    env, settings, pool, tmp_path: Path
) -> None:
    env = {**env, "TRAWL_MAX_DELIVER": str(MAX_DELIVER)}
    await save_shop(pool)
    # The parser runs; no fetcher does, so the only fetch results are the ones made here.
    async with (
        Stack(env, tmp_path / "logs", scale="fetcher=0") as stack,
        TrawlClient(settings) as client,
    ):
        assert client.nc is not None
        names = client.names
        js = client.nc.jetstream()
        reply = await client.trigger("shop")
        assert reply.job_id is not None, reply.error
        job_id = reply.job_id
        entry, other = await dispatched_entries(pool, job_id, 2)

        # 1. Undecodable bytes (read by the scheduler and the refresher); 2. a future version
        # of a fetch result (read by the scheduler and the parser); 3. a result for an entry
        # that does not exist: the scheduler refuses its claim.
        await js.publish(names.parsed, b"\xff{not json", headers=ORIGIN)
        future = msgspec.json.decode(
            encode(await ok_result(client.nc, names, job_id, other, b"<html></html>"))
        )
        await js.publish(names.fetched, json.dumps({**future, "v": 99}).encode(), headers=ORIGIN)
        orphan = FetchResult(
            attempt=Attempt(
                job_id=job_id, entry_id=999999999, source="shop", url="http://127.0.0.2:9/p/nowhere"
            ),
            outcome="gone",  # nothing to parse: only the scheduler handles it
            status=404,
        )
        await js.publish(names.fetched, encode(orphan), headers=ORIGIN)

        # 4. A good page whose job definition went missing from the sources bucket: the parser
        # retries until max_deliver, then dead-letters it.
        kv = await js.key_value(names.sources_bucket)
        definition = (await kv.get(f"job.{job_id}")).value
        await kv.delete(f"job.{job_id}")
        good = await ok_result(
            client.nc, names, job_id, entry, product_page("ANVIL-1", "Anvil", "49.90")
        )
        await js.publish(names.fetched, encode(good), headers=ORIGIN)

        letters: dict[int, tuple[DeadLetter, dict[str, str]]] = {}

        async def six_letters() -> bool:
            nonlocal letters
            letters = await _letters(client)
            return len(letters) >= 6

        await eventually(six_letters, timeout=60, what="six dead letters")
        by_reason = sorted((letter.reason, letter.subject) for letter, _ in letters.values())
        reasons = [r for r, _ in by_reason]
        assert sum(r.startswith("malformed message") for r in reasons) == 2, by_reason
        assert sum("unsupported message version v=99" in r for r in reasons) == 2, by_reason
        failing = [r for r in reasons if r.startswith(f"gave up after {MAX_DELIVER} deliveries")]
        assert len(failing) == 1, by_reason
        assert f"source of job {job_id} not published yet" in failing[0], failing
        # A result for an entry that does not exist is poison at once, not a handler failure.
        assert sum("no entry 999999999" in r for r in reasons) == 1, by_reason
        for letter, headers in letters.values():
            assert letter.headers.get("X-Origin") == "poison-test"  # the original headers
            assert headers[n.DLQ_REASON]
            assert letter.num_delivered in (1, MAX_DELIVER)

        # Fix the cause, then replay the parser's letter with the CLI.
        await kv.put(f"job.{job_id}", definition)
        seq = next(s for s, (letter, _) in letters.items() if "not published yet" in letter.reason)
        done = await asyncio.to_thread(_trawl, env, "dlq", "requeue", str(seq), "--json")
        assert done.returncode == 0, done.stderr
        assert json.loads(done.stdout)[0]["seq"] == seq

        async def replayed() -> bool:
            async with pool.acquire() as conn:
                state = await conn.fetchval("SELECT state FROM entries WHERE id = $1", entry["id"])
                product = await conn.fetchrow(
                    "SELECT name, price::text FROM products WHERE source = 'shop' AND key = $1",
                    "ANVIL-1",
                )
            return state == "done" and product is not None

        await eventually(replayed, timeout=30, what="the requeued page to be parsed and applied")
        async with pool.acquire() as conn:
            product = await conn.fetchrow(
                "SELECT name, price FROM products WHERE source = 'shop' AND key = 'ANVIL-1'"
            )
            links = await conn.fetchval(
                "SELECT count(*) FROM entries WHERE job_id = $1 AND url LIKE '%anvil-1-related'",
                job_id,
            )
        assert product["name"] == "Anvil" and str(product["price"]) == "49.90"
        assert links == 1
        remaining = await _letters(client)
        assert seq not in remaining and len(remaining) == 5
        # Every service kept running through all of it.
        assert not any(c.restarts for c in stack.sup.children), stack.logs()
        assert all(c.proc and c.proc.returncode is None for c in stack.sup.children)


@pytest.mark.timeout(300)
async def test_a_poisoned_crawl_dead_letters_every_poison_and_completes_exactly(
    env, settings, pool, tmp_path: Path
) -> None:
    env = {**env, **FAULT_ENV, "TRAWL_MAX_DELIVER": str(MAX_DELIVER)}
    # Latency keeps the job running while the corpus lands (a forged ``completed`` for it must
    # meet a running job).
    shop = DemoShop(hosts=("127.0.0.2",), port=0, products=120, faults=Faults(latency=0.05))
    async with shop:
        await save_shop_source(pool, shop, max_in_flight=4, images=False)
        async with (
            Stack(env, tmp_path / "logs") as stack,
            TrawlClient(settings) as client,
        ):
            assert client.nc is not None
            nc, names = client.nc, client.names
            reply = await client.trigger("shop")
            assert reply.job_id is not None, reply.error
            job_id = reply.job_id
            (entry,) = await dispatched_entries(pool, job_id, 1)
            corpus = malformed_corpus(names) + forged_corpus(names, job_id, "shop", entry)
            for poison in corpus:
                await nc.publish(poison.subject, poison.body, headers=poison.headers or None)
            await nc.flush()
            expected = sum(p.letters for p in corpus)

            async def refreshed() -> bool:
                async with pool.acquire() as conn:
                    return bool(
                        await conn.fetchval(
                            "SELECT j.status = 'completed' AND EXISTS "
                            "(SELECT 1 FROM miss_counts m WHERE m.job_id = j.id) "
                            "FROM jobs j WHERE j.id = $1",
                            job_id,
                        )
                    )

            # Not client.wait: it would take the forged ``completed`` for the real one.
            await eventually(refreshed, timeout=240, what="the job completed and refreshed")
            letters = await dead_letters(nc.jetstream(), names, expected, timeout=60)
            durables = [(s.stream_key, s.durable(names)) for s in consumer_specs(names)]
            await consumers_idle(nc, names, *durables)
            letters = await dead_letters(nc.jetstream(), names, expected, timeout=5)
            summary = {"job_id": job_id, "status": "completed", "source": "shop"}
            await check_crawl(client, pool, shop, summary, stack.logs(), dead_letters=expected)
            async with pool.acquire() as conn:
                missed = await conn.fetchval(
                    "SELECT count(*) FROM products WHERE consecutive_misses > 0 "
                    "OR delisted_at IS NOT NULL OR key = 'FORGED-1'"
                )
            assert missed == 0
            assert not any(c.restarts for c in stack.sup.children), stack.logs()

    # 100 %: every poison message made one letter per consumer that reads it, with its reason.
    assert len(letters) == expected
    found: dict[str, int] = {}
    for letter, headers in letters:
        assert headers[n.DLQ_REASON]
        assert not any(k.lower().startswith("nats-") for k in letter.headers)
        (poison,) = [p for p in corpus if _is_letter_of(letter, p)]
        assert poison.reason in letter.reason, (poison.name, letter.reason)
        found[poison.name] = found.get(poison.name, 0) + 1
    assert found == {p.name: p.letters for p in corpus}
    print(
        f"poison corpus: {len(corpus)} messages ({len(malformed_corpus(names))} malformed, "
        f"{len(corpus) - len(malformed_corpus(names))} forged) on {len(READERS)} subjects, "
        f"{expected} letters expected, {len(letters)} dead-lettered"
    )


def _is_letter_of(letter: DeadLetter, poison: PoisonMessage) -> bool:
    """Whether ``letter`` holds ``poison`` (whole, or its start when the letter was cut)."""
    if letter.subject != poison.subject or letter.size != len(poison.body):
        return False
    text = poison.body.decode("utf-8", "replace")
    return text.startswith(letter.data) if letter.truncated else text == letter.data
