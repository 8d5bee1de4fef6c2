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
    "NATS_URL": "nats://127.0.0.1:4222",
    "DATABASE_URL": "postgresql://root@127.0.0.1:5432/trawl",
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
    # TRAWL_SECRET_* variables: values API request headers may reference (never sent in messages)
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
        )


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
