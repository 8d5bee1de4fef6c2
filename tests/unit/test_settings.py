from __future__ import annotations

import pytest

from shared.errors import ConfigError
from shared.names import Names
from shared.settings import Settings


def test_defaults() -> None:
    s = Settings.from_env({})
    assert s.nats_url == "nats://127.0.0.1:4222"
    assert s.database_url == "postgresql://root@127.0.0.1:5432/trawl"
    assert s.namespace == "trawl"
    assert s.api_listen == "127.0.0.1:8686"


@pytest.mark.parametrize("bad", ["a.b", "x y", "", "a" * 40, "ns>"])
def test_namespace_must_be_a_safe_token(bad: str) -> None:
    if bad == "":
        return  # empty falls back to the default
    with pytest.raises(ConfigError, match="TRAWL_NAMESPACE"):
        Settings.from_env({"TRAWL_NAMESPACE": bad})


def test_numbers_are_validated() -> None:
    with pytest.raises(ConfigError, match="TRAWL_CONCURRENCY"):
        Settings.from_env({"TRAWL_CONCURRENCY": "lots"})


def test_every_name_is_prefixed_by_the_namespace() -> None:
    names = Names("shop1")
    subjects = [
        names.trigger,
        names.fetch,
        names.fetched,
        names.parsed,
        names.job_event(3, "x"),
        names.dlq("fetch"),
        names.payload("ab"),
    ]
    assert all(s.startswith("shop1.") for s in subjects)
    buckets = [
        names.stream("fetch"),
        names.robots_bucket,
        names.sources_bucket,
        names.large_payload_bucket,
        names.payload_stream,
    ]
    assert all(b.startswith("shop1_") for b in buckets)
