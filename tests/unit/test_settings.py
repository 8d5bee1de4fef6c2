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


def test_cluster_settings() -> None:
    s = Settings.from_env(
        {
            "NATS_URL": "nats://a:4222, nats://b:4222,nats://c:4222",
            "TRAWL_STREAM_REPLICAS": "3",
            "TRAWL_DB_POOL_MODE": "Transaction",
            "TRAWL_DB_POOL_SIZE": "5",
        }
    )
    assert s.nats_servers == ["nats://a:4222", "nats://b:4222", "nats://c:4222"]
    assert (s.stream_replicas, s.transaction_pooling, s.db_pool_size) == (3, True, 5)
    default = Settings.from_env({})
    assert default.nats_servers == ["nats://127.0.0.1:4222"]
    assert (default.stream_replicas, default.transaction_pooling) == (1, False)


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("TRAWL_STREAM_REPLICAS", "7"),
        ("TRAWL_STREAM_REPLICAS", "0"),
        ("TRAWL_DB_POOL_MODE", "statement"),
        ("TRAWL_DB_POOL_SIZE", "-1"),
        ("TRAWL_HEALTH_LISTEN", "8080"),
    ],
)
def test_cluster_settings_are_validated(name: str, value: str) -> None:
    with pytest.raises(ConfigError, match=name):
        Settings.from_env({name: value})
