"""Settings from the environment: the only module that reads ``os.environ``."""

from __future__ import annotations

import ipaddress
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from shared.errors import ConfigError

# Every variable trawl reads, with its default. compose.yaml and the docs are checked against
# this table by a test, so a renamed variable cannot silently drift.
ENV_DEFAULTS: dict[str, str] = {
    # One URL, or every server of a cluster comma-separated: the client reconnects to survivors.
    "NATS_URL": "nats://127.0.0.1:4222",
    "DATABASE_URL": "postgresql://root@127.0.0.1:5432/trawl",
    # `session`: a direct connection (or a session pooler). `transaction`: PgBouncer in
    # transaction mode; no prepared-statement cache, every statement in a transaction.
    "TRAWL_DB_POOL_MODE": "session",
    # Connections per replica's pool (the connection budget is this × replicas, docs/deploy.md).
    "TRAWL_DB_POOL_SIZE": "10",
    # JetStream replicas of every stream, KV and object-store bucket: 1, or 3 on a cluster.
    "TRAWL_STREAM_REPLICAS": "1",
    # host:port of a worker's health endpoint (`/livez`, `/readyz`). Empty = off.
    "TRAWL_HEALTH_LISTEN": "",
    "TRAWL_NAMESPACE": "trawl",
    "TRAWL_API_LISTEN": "127.0.0.1:8686",
    "TRAWL_API_TOKEN": "",
    "TRAWL_API_READ_TOKEN": "",
    "TRAWL_LOG_LEVEL": "INFO",
    "TRAWL_LOG_FORMAT": "json",
    "TRAWL_CONCURRENCY": "64",
    "TRAWL_VISIBILITY_TIMEOUT": "300",
    "TRAWL_MAX_DELIVER": "5",
    "TRAWL_INSTANCE": "",
    # host:port of this process's Prometheus `/metrics` (docs/metrics.md). Empty = metrics off.
    # Port 0 picks a free port (replicas on one machine), advertised in the NATS service API.
    "TRAWL_METRICS_LISTEN": "",
    # Networks (CIDR, comma-separated) where proxies may live besides public addresses, e.g. a
    # corporate proxy on 10.1.2.3/32. Metadata endpoints and our own services' ports never.
    "TRAWL_PROXY_NETWORKS": "",
}

# Standard OpenTelemetry variables are read by the SDK itself; listed so the checks know them.
OTEL_VARS = ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_SERVICE_NAME", "OTEL_TRACES_EXPORTER")

POOL_MODES = ("session", "transaction")

_NAMESPACE_RE = re.compile(r"^[A-Za-z0-9_-]{1,32}$")


@dataclass(frozen=True, kw_only=True)
class Settings:
    nats_url: str
    database_url: str
    namespace: str
    api_listen: str
    api_token: str
    api_read_token: str
    log_level: str
    log_format: str
    concurrency: int
    visibility_timeout: float
    max_deliver: int
    instance: str
    metrics_listen: str = ""
    proxy_networks: tuple[str, ...] = ()
    db_pool_mode: str = "session"
    db_pool_size: int = 10
    stream_replicas: int = 1
    health_listen: str = ""
    # TRAWL_SECRET_* variables: values API request headers and alert rules may reference (only
    # the references are stored or sent in messages; shared.secrets)
    secrets: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Settings:
        env = os.environ if env is None else env

        def get(name: str) -> str:
            return env.get(name) or ENV_DEFAULTS[name]

        namespace = get("TRAWL_NAMESPACE")
        if not _NAMESPACE_RE.match(namespace):
            raise ConfigError(
                f"TRAWL_NAMESPACE={namespace!r}: use 1-32 characters of [A-Za-z0-9_-] "
                "(it prefixes NATS subjects, streams and buckets)"
            )
        return cls(
            nats_url=get("NATS_URL"),
            database_url=get("DATABASE_URL"),
            namespace=namespace,
            api_listen=get("TRAWL_API_LISTEN"),
            api_token=get("TRAWL_API_TOKEN"),
            api_read_token=get("TRAWL_API_READ_TOKEN"),
            log_level=get("TRAWL_LOG_LEVEL").upper(),
            log_format=get("TRAWL_LOG_FORMAT"),
            concurrency=_int(get, "TRAWL_CONCURRENCY"),
            visibility_timeout=float(_int(get, "TRAWL_VISIBILITY_TIMEOUT")),
            max_deliver=_int(get, "TRAWL_MAX_DELIVER"),
            instance=get("TRAWL_INSTANCE") or f"{os.uname().nodename}-{os.getpid()}",
            secrets={k: v for k, v in env.items() if k.startswith("TRAWL_SECRET_")},
            metrics_listen=_listen(get, "TRAWL_METRICS_LISTEN"),
            proxy_networks=_networks(get, "TRAWL_PROXY_NETWORKS"),
            db_pool_mode=_choice(get, "TRAWL_DB_POOL_MODE", POOL_MODES),
            db_pool_size=_int(get, "TRAWL_DB_POOL_SIZE"),
            stream_replicas=_replicas(get, "TRAWL_STREAM_REPLICAS"),
            health_listen=_listen(get, "TRAWL_HEALTH_LISTEN"),
        )

    @property
    def nats_servers(self) -> list[str]:
        """Every server URL of ``NATS_URL`` (comma-separated for a cluster)."""
        return nats_servers(self.nats_url)

    @property
    def transaction_pooling(self) -> bool:
        """Postgres is reached through a pooler in transaction mode (PgBouncer)."""
        return self.db_pool_mode == "transaction"


def nats_servers(url: str) -> list[str]:
    return [part.strip() for part in url.split(",") if part.strip()]


def _int(get, name: str) -> int:
    raw = get(name)
    try:
        value = int(raw)
    except ValueError:
        raise ConfigError(f"{name}={raw!r} is not a whole number") from None
    if value <= 0:
        raise ConfigError(f"{name}={raw!r} must be positive")
    return value


def _networks(get, name: str) -> tuple[str, ...]:
    """A comma- or space-separated list of CIDR networks (validated, kept as text)."""
    out = []
    for item in get(name).replace(",", " ").split():
        try:
            out.append(str(ipaddress.ip_network(item, strict=False)))
        except ValueError:
            raise ConfigError(f"{name}: {item!r} is not an IP address or CIDR network") from None
    return tuple(out)


def _listen(get, name: str) -> str:
    """``host:port`` (``[v6]:port``, port 0 = any free port), or empty for off."""
    raw = get(name).strip()
    if not raw:
        return ""
    host, sep, port = raw.rpartition(":")
    if not sep or not host or not port.isdigit() or int(port) > 65535:
        raise ConfigError(f"{name}={raw!r}: use host:port, e.g. 127.0.0.1:9464 (port 0 = any)")
    return raw


def _choice(get, name: str, choices: tuple[str, ...]) -> str:
    raw = get(name).strip().lower()
    if raw not in choices:
        raise ConfigError(f"{name}={raw!r}: use one of {', '.join(choices)}")
    return raw


def _replicas(get, name: str) -> int:
    """JetStream keeps 1 to 5 copies of a stream; an even count buys nothing over one fewer."""
    value = _int(get, name)
    if value > 5:
        raise ConfigError(f"{name}={value}: JetStream allows 1 to 5 replicas (3 for a cluster)")
    return value
