"""Test isolation: a unique NATS namespace and a fresh database (cloned from a migrated
template) per test, and no stray environment settings."""

from __future__ import annotations

import asyncio
import os
import socket
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import asyncpg
import pytest
from xdist.scheduler import LoadGroupScheduling  # type: ignore[import-untyped]  # no py.typed

from shared.settings import ENV_DEFAULTS, OTEL_VARS

# Strip our variables so tests never inherit a developer's settings (procrastinate does this).
for _name in (*ENV_DEFAULTS, *OTEL_VARS, "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"):
    os.environ.pop(_name, None)

NATS_URL = "nats://127.0.0.1:4222"
PG_ADMIN = "postgresql://root@127.0.0.1:5432/postgres"
ROOT = Path(__file__).resolve().parent.parent
# Debugging a failure: TRAWL_TEST_KEEP=1 keeps each test's database and NATS namespace.
KEEP = os.environ.get("TRAWL_TEST_KEEP") == "1"


def _dsn(db: str) -> str:
    return f"postgresql://root@127.0.0.1:5432/{db}"


class _FaultsTogether(LoadGroupScheduling):
    """``make test``'s scheduling (``-n N --dist loadgroup``): every test on its own, except
    tests/faults, one group that a single worker runs one test after another (they kill
    processes and restart servers against deadlines, so two never overlap). The group is
    scheduled first (xdist orders groups by size), so the longest work starts at once.

    Grouped by path here, not by ``xdist_group`` marks: under pytest 9.2, xdist 3.8 ignores
    the marks without a word (pytest-dev/pytest-xdist#1386).
    """

    def _split_scope(self, nodeid: str) -> str:
        return "faults" if nodeid.startswith("tests/faults/") else nodeid


def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> LoadGroupScheduling | None:
    if config.getvalue("dist") == "loadgroup":
        return _FaultsTogether(config, log)
    return None


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


@pytest.fixture(scope="session")
def template_db() -> Iterator[str]:
    """A database with every migration applied, cloned per test (fast: no DDL per test)."""
    from migrations.runner import migrate

    name = f"trawl_tmpl_{uuid.uuid4().hex[:8]}"

    async def create() -> None:
        await migrate(_dsn(name))

    async def drop() -> None:
        conn = await asyncpg.connect(PG_ADMIN)
        try:
            await conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        finally:
            await conn.close()

    asyncio.run(create())
    yield name
    asyncio.run(drop())


@pytest.fixture
async def database_url(template_db: str) -> AsyncIterator[str]:
    name = f"trawl_t_{uuid.uuid4().hex[:10]}"
    conn = await asyncpg.connect(PG_ADMIN)
    try:
        await conn.execute(f'CREATE DATABASE "{name}" TEMPLATE "{template_db}"')
    finally:
        await conn.close()
    yield _dsn(name)
    if KEEP:
        print(f"kept database {name}")
        return
    conn = await asyncpg.connect(PG_ADMIN)
    try:
        await conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    finally:
        await conn.close()


@pytest.fixture
async def namespace() -> AsyncIterator[str]:
    from shared.bus import connect
    from shared.names import Names
    from shared.provision import teardown

    ns = f"t{uuid.uuid4().hex[:12]}"
    yield ns
    if KEEP:
        print(f"kept namespace {ns}")
        return
    nc = await connect(NATS_URL, name="test-teardown", attempts=3)
    try:
        await teardown(nc.jetstream(), Names(ns))
    finally:
        await nc.close()


@pytest.fixture
def env(namespace: str, database_url: str) -> dict[str, str]:
    """Environment of a trawl process in this test's isolation."""
    out = dict(os.environ)
    out.update(
        {
            "NATS_URL": NATS_URL,
            "DATABASE_URL": database_url,
            "TRAWL_NAMESPACE": namespace,
            "TRAWL_API_LISTEN": f"127.0.0.1:{free_port()}",
            "TRAWL_LOG_LEVEL": "INFO",
            # The tests' forward proxies listen on loopback; a deployment lists its own networks.
            "TRAWL_PROXY_NETWORKS": "127.0.0.0/8",
            "PYTHONPATH": str(ROOT),
        }
    )
    return out


@pytest.fixture
def settings(env: dict[str, str]):
    from shared.settings import Settings

    return Settings.from_env(env)


@pytest.fixture
async def pool(database_url: str) -> AsyncIterator[asyncpg.Pool]:
    from shared.db import open_pool

    p = await open_pool(database_url, min_size=1, max_size=4, attempts=3)
    yield p
    await p.close()


@pytest.fixture
async def nc() -> AsyncIterator[object]:
    from shared.bus import connect

    client = await connect(NATS_URL, name="test", attempts=3)
    yield client
    await client.close()
