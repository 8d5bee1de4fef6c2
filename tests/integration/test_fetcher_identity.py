"""Identity, live against the demo shop: one session sends one consistent header set; a 403
makes the retry present another browser."""

from __future__ import annotations

import pytest

from demo.faults import Faults
from demo.shop import DemoShop
from tests.unit.fetcher.loopback import fetcher, work

KEYS = ("User-Agent", "Accept", "Accept-Language", "sec-ch-ua", "sec-ch-ua-platform")


@pytest.fixture
async def shop():
    async with DemoShop(hosts=("127.0.0.2",), port=0, products=8) as s:
        yield s


def _identity(headers: dict[str, str]) -> tuple[str | None, ...]:
    lower = {k.lower(): v for k, v in headers.items()}
    return tuple(lower.get(k.lower()) for k in KEYS)


async def test_one_session_one_identity_and_a_block_changes_it(shop, nc, namespace) -> None:
    pages = [p["url"] for p in shop.truth()[:4]]
    blocked_path = pages[1].removeprefix(shop.base_urls[0])
    shop.faults = Faults(script={blocked_path: [403]})
    async with fetcher(nc, namespace) as f:
        first = [
            await f.fetch(work(url, entry_id=i, locale="de-DE")) for i, url in enumerate(pages)
        ]
        retry = await f.fetch(work(pages[1], entry_id=1, attempt=2, locale="de-DE"))
        other_job = await f.fetch(work(pages[0], job_id=2, entry_id=9, locale="de-DE"))

    assert [r.outcome for r in first] == ["ok", "blocked", "ok", "ok"]
    assert retry.outcome == "ok"
    log = shop.request_log
    session = {_identity(r["headers"]) for r in log[:4]}
    assert len(session) == 1, session  # every request of the session looks the same
    [(ua, _, language, brands, platform)] = session
    assert language == "de-DE,de;q=0.9,en;q=0.8"
    if brands is not None:  # a Chromium profile: its brand list matches its UA's version
        version = ua.split("Chrome/")[1].split(".")[0]
        assert f'v="{version}"' in brands and platform
    assert len({r.fingerprint for r in first}) == 1
    assert retry.fingerprint != first[1].fingerprint
    assert _identity(log[4]["headers"])[0] != ua  # the retry after the block is another browser
    assert other_job.fingerprint is not None


async def test_a_source_can_pin_its_user_agent(shop, nc, namespace) -> None:
    ua = "AcmeCatalogBot/2.1 (+https://acme.example/bot)"
    async with fetcher(nc, namespace) as f:
        for attempt in (1, 2):
            result = await f.fetch(work(shop.base_urls[0] + "/", attempt=attempt, user_agent=ua))
            assert result.outcome == "ok"
    assert [r["headers"]["User-Agent"] for r in shop.request_log] == [ua, ua]
