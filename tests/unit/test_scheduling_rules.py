from __future__ import annotations

import random

import pytest

from control.supervisor import chromium_installed, parse_scale
from schemas.outcomes import classify_status
from schemas.source import Pacing, RetryPolicy
from services.scheduler.priority import base_priority, job_boost, rank
from services.scheduler.retry import capped_wait, retry_delay


@pytest.mark.parametrize(
    ("status", "outcome"),
    [
        (200, "ok"),
        (304, "not_modified"),
        (404, "gone"),
        (410, "gone"),
        (403, "blocked"),
        (429, "blocked"),
        (503, "server_error"),
        (500, "server_error"),
        (400, "rejected"),
        (451, "rejected"),
    ],
)
def test_status_classification(status: int, outcome: str) -> None:
    assert classify_status(status) == outcome


def test_retry_delays_grow_exponentially_within_jitter() -> None:
    policy = RetryPolicy(max_retries=3, base_delay=60, factor=2, jitter=0.2, cap=86400)
    rng = random.Random(7)
    for attempts, nominal in ((1, 60), (2, 120), (3, 240)):
        delay = retry_delay("server_error", attempts, policy, rng=rng)
        assert delay is not None
        assert nominal * 0.8 <= delay <= nominal * 1.2
    assert retry_delay("server_error", 4, policy, rng=rng) is None  # out of retries → failed


def test_blocked_cools_down_longer_and_retry_after_wins() -> None:
    policy = RetryPolicy(jitter=0)
    assert retry_delay("blocked", 1, policy) == 900
    assert retry_delay("timeout", 1, policy, retry_after=5000) == 5000
    assert retry_delay("timeout", 1, policy, retry_after=5) == 60


def test_terminal_outcomes_never_retry() -> None:
    for outcome in ("gone", "rejected", "robots_disallowed", "unsafe_url", "ok"):
        assert retry_delay(outcome, 1, RetryPolicy()) is None


def test_cap_limits_the_delay() -> None:
    policy = RetryPolicy(max_retries=20, base_delay=60, factor=10, jitter=0, cap=3600)
    assert retry_delay("network_error", 6, policy) == 3600


def test_default_priorities_keep_the_funnel_fed() -> None:
    assert base_priority("seed") > base_priority("pagination") > base_priority("product")
    assert base_priority("product", boost=100) == 100
    assert job_boost(None, "cli") > 0
    assert job_boost(80, None) == 20


def test_aging_lets_an_old_entry_overtake_fresh_higher_priority_ones() -> None:
    now = 1_800_000_000.0
    old_low = rank(40, now - 2 * 3600)  # waited two hours: +20
    fresh_high = rank(55, now)
    assert old_low > fresh_high
    assert rank(60, now) > rank(40, now - 3600)  # one hour of aging is only +10


def test_scale_parsing() -> None:
    assert parse_scale("fetcher=3,parser=2,renderer=2") == {
        "scheduler": 1,
        "fetcher": 3,
        "parser": 2,
        "refresher": 1,
        "renderer": 2,
        "notifier": 1,
        "api": 1,
    }
    assert parse_scale(None)["renderer"] == (1 if chromium_installed() else 0)
    with pytest.raises(ValueError, match="unknown service"):
        parse_scale("crawler=2")
    with pytest.raises(ValueError, match="whole number"):
        parse_scale("fetcher=many")


@pytest.mark.parametrize(
    ("header", "obeyed"),
    [
        (None, None),
        (2.0, 2.0),
        (9999999999.0, 3600.0),  # year 2343: capped at the default hour
        (1e20, 3600.0),  # overflowed the timestamp before the cap
        (float("inf"), 3600.0),  # 400 digits read as a float
        (float("nan"), None),
        (-5.0, 0.0),
    ],
)
def test_retry_after_is_capped_by_the_source(header: float | None, obeyed: float | None) -> None:
    assert Pacing().max_retry_after == 3600.0
    assert capped_wait(header, Pacing().max_retry_after) == obeyed
    policy = RetryPolicy(max_retries=3, base_delay=1, jitter=0)
    delay = retry_delay("server_error", 1, policy, retry_after=obeyed)
    assert delay is not None and delay <= 3600.0
