"""The hostile-server corpus (issue 17): the four services crawl a site whose every page is a
hostile reply (tests/support/hostile.py): huge Retry-After, a 10 MB robots.txt, a gzip bomb,
endless and lying bodies, drips, silence, redirect loops and redirects to forbidden targets,
malformed heads. Every job completes, every entry ends done or failed (none stays dispatched or
fetched), the domain is not parked, and no forbidden target is ever connected to."""

from __future__ import annotations

from pathlib import Path

import pytest

from control.client import TrawlClient
from services.scheduler.catalog import save_source
from shared.sources import source_from_dict
from tests.support.hostile import HostileServer, html, text
from tests.support.stack import Stack

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(240)]

# Outcomes the corpus must produce for some replies (the rest only have to end).
EXPECTED = {
    "/fine": "ok",
    "/robots-blocked/page": "robots_disallowed",
    "/redirect-ipv4-compatible": "unsafe_url",
    "/redirect-nat64": "unsafe_url",
    "/redirect-metadata": "unsafe_url",
    "/redirect-file": "unsafe_url",
    "/redirect-credentials": "unsafe_url",
    "/retry-after-huge": "ok",  # 503 + Retry-After 9999999999, then a page: retried, capped
    "/retry-after-1e20": "ok",
    "/retry-after-year-9999": "ok",
    "/slow-drip": "timeout",
    "/silent": "timeout",
}


async def test_every_hostile_reply_ends_its_entry(env, settings, pool, tmp_path: Path) -> None:
    async with HostileServer("127.0.0.2") as site:
        paths = sorted(site.replies)
        definition = {
            "name": "hostile",
            "seeds": [site.base + p for p in paths],
            "allowed_domains": [f"127.0.0.2:{site.port}"],
            "allow_private": ["127.0.0.2/32"],
            "robots": "obey",
            "images": False,
            "timeout": 3,
            "max_bytes": 1024 * 1024,
            # The cap under test: a server's Retry-After is obeyed for 1 s at most.
            "pacing": {"min_delay": 0, "max_delay": 0, "max_in_flight": 8, "max_retry_after": 1},
            "retry": {
                "max_retries": 1,
                "base_delay": 0.2,
                "blocked_base_delay": 0.2,
                "jitter": 0,
                "cap": 1,
            },
        }
        async with pool.acquire() as conn:
            await save_source(conn, source_from_dict(definition))
        async with Stack(env, tmp_path / "logs") as stack, TrawlClient(settings) as client:
            reply = await client.trigger("hostile")
            try:
                summary = await client.wait(reply.job_id, timeout=180)
            except TimeoutError as exc:
                raise AssertionError(f"the job never completed\n{stack.logs()}") from exc
            async with pool.acquire() as conn:
                entries = await conn.fetch(
                    "SELECT url, state, last_outcome, attempts FROM entries WHERE job_id = $1",
                    reply.job_id,
                )
                first_attempts = {
                    r["url"]: (r["status"], r["outcome"], r["error"])
                    for r in await conn.fetch(
                        """SELECT DISTINCT ON (e.url) e.url, a.status, a.outcome, a.error
                           FROM attempts a JOIN entries e ON e.id = a.entry_id
                           WHERE e.job_id = $1 ORDER BY e.url, a.recorded_at, a.attempt_id""",
                        reply.job_id,
                    )
                }
                parked = await conn.fetchval(
                    "SELECT count(*) FROM domains WHERE next_allowed_at > now() + interval '1 min'"
                )
    assert summary["status"] == "completed", stack.logs()
    by_path = {e["url"].removeprefix(site.base): e for e in entries}
    assert set(by_path) == set(paths)
    open_ = {p: e["state"] for p, e in by_path.items() if e["state"] not in ("done", "failed")}
    assert not open_, open_
    outcomes = {p: by_path[p]["last_outcome"] for p in EXPECTED}
    assert outcomes == EXPECTED
    assert all(e["attempts"] <= 2 for e in entries)  # max_retries: 1, never past the budget
    assert parked == 0  # no Retry-After parked the domain
    # Every odd Retry-After still reads as the server's 503/429, not as a network error. A
    # first attempt may time out on a loaded machine (CI once): its reply was never read, so
    # there is no header to judge; a header that broke the read would be a network error.
    retry_after = {p: first_attempts[site.base + p] for p in paths if "retry-after" in p}
    assert all(
        status in (429, 503) or outcome == "timeout" for status, outcome, _ in retry_after.values()
    ), retry_after
    assert site.trapped == 0  # no redirect reached a forbidden IPv6 form of loopback
    assert site.hits["/robots.txt"] >= 1
    # The counts for the notes: how many hostile replies, and how each ended.
    survived = {p: (e["state"], e["last_outcome"]) for p, e in sorted(by_path.items())}
    print(f"hostile replies survived: {len(survived)}")
    for path, (state, outcome) in survived.items():
        print(f"  {path}: {state} ({outcome})")


def _ssrf_forms(trap: int) -> list[str]:
    """Hosts that are loopback or metadata in an IPv6 spelling (the trap listens on
    127.0.0.1:trap; the metadata forms cannot connect anywhere here)."""
    return [
        f"[::127.0.0.1]:{trap}",
        f"[::7f00:1]:{trap}",
        f"[::ffff:127.0.0.1]:{trap}",
        f"[64:ff9b::7f00:1]:{trap}",
        f"[2002:7f00:1::]:{trap}",
        f"[2001:0:808:808::80ff:fffe]:{trap}",  # Teredo, client 127.0.0.1
        "[::169.254.169.254]:80",
        "[64:ff9b::a9fe:a9fe]:80",
    ]


async def test_ipv6_forms_as_seeds_and_links_are_refused_by_the_crawl(
    env, settings, pool, tmp_path: Path
) -> None:
    """A source author lists the forms as seeds (so their hosts are allowed domains) and a
    page links to them as products: through the real scheduler, parser and fetcher, every
    one is admitted and ends ``unsafe_url``, and the trap on 127.0.0.1 sees no connection."""
    async with HostileServer("127.0.0.2") as site:
        hosts = _ssrf_forms(site.trap_port)
        links = "".join(f'<a href="http://{h}/product/{i}">p</a>' for i, h in enumerate(hosts))
        site.replies["/ssrf-links"] = html(f"<html><body>{links}</body></html>".encode())
        seeds = [f"{site.base}/ssrf-links", *(f"http://{h}/seed" for h in hosts)]
        definition = {
            "name": "ssrf",
            "seeds": seeds,  # allowed_domains: the seeds' hosts, the forms included
            "allow_private": ["127.0.0.2/32"],
            "robots": "obey",
            "images": False,
            "timeout": 3,
            "pacing": {"profile": "fast"},
            "retry": {"max_retries": 1, "base_delay": 0.2, "jitter": 0},
        }
        async with pool.acquire() as conn:
            await save_source(conn, source_from_dict(definition))
        async with Stack(env, tmp_path / "logs") as stack, TrawlClient(settings) as client:
            reply = await client.trigger("ssrf")
            summary = await client.wait(reply.job_id, timeout=120)
            async with pool.acquire() as conn:
                entries = await conn.fetch(
                    "SELECT url, state, last_outcome FROM entries WHERE job_id = $1",
                    reply.job_id,
                )
    assert summary["status"] == "completed", stack.logs()
    outcomes = {e["url"]: e["last_outcome"] for e in entries}
    assert outcomes.pop(f"{site.base}/ssrf-links") == "ok"
    link_entries = [u for u in outcomes if "/product/" in u]
    seed_entries = [u for u in outcomes if u.endswith("/seed")]
    assert (len(link_entries), len(seed_entries)) == (len(hosts), len(hosts)), sorted(outcomes)
    wrong = {u: o for u, o in outcomes.items() if o != "unsafe_url"}
    assert not wrong, wrong
    assert site.trapped == 0


async def test_a_hostile_crawl_delay_is_capped_too(env, settings, pool, tmp_path: Path) -> None:
    """robots.txt says ``Crawl-delay: 99999999999999999999``: read as 10^20 s, it overflowed
    the domain's timestamp like Retry-After did. Capped by the same setting, the crawl goes on
    at one page per second and completes, and the domain is not parked."""
    async with HostileServer("127.0.0.3") as site:
        site.robots = text(b"User-agent: *\nCrawl-delay: 99999999999999999999\n")
        seeds = [f"{site.base}/fine?n={i}" for i in range(3)]
        definition = {
            "name": "crawl-delay",
            "seeds": seeds,
            "allow_private": ["127.0.0.3/32"],
            "images": False,
            "pacing": {"profile": "fast", "max_retry_after": 1},
        }
        async with pool.acquire() as conn:
            await save_source(conn, source_from_dict(definition))
        async with Stack(env, tmp_path / "logs") as stack, TrawlClient(settings) as client:
            reply = await client.trigger("crawl-delay")
            try:
                summary = await client.wait(reply.job_id, timeout=60)
            except TimeoutError as exc:
                raise AssertionError(f"the job never completed\n{stack.logs()}") from exc
            async with pool.acquire() as conn:
                domain = await conn.fetchrow(
                    "SELECT crawl_delay, next_allowed_at < now() + interval '1 min' AS soon"
                    " FROM domains WHERE domain = $1",
                    f"127.0.0.3:{site.port}",
                )
    assert summary["status"] == "completed"
    assert summary["counters"].get("outcome_ok") == len(seeds), summary["counters"]
    assert (domain["crawl_delay"], domain["soon"]) == (1.0, True)
