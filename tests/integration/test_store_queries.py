"""Every named query of every owner's ``queries.sql`` is prepared against a freshly migrated
database, so a typo, a dropped column or a view that moved fails here rather than in a crawl.

A file whose queries have fragments filled from the Struct fields (the refresher's) is
prepared as its store runs it."""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from pathlib import Path

import asyncpg
import pytest

from services.refresher import store as refresher_store
from shared.sql import Queries
from tests.conftest import ROOT


async def _refresher(conn) -> dict[str, str]:
    await refresher_store.create_staging(conn)  # the apply queries read its temp tables
    return await refresher_store.all_queries(conn)


def _as_written(path: Path) -> Callable[[object], Awaitable[dict[str, str]]]:
    async def load(conn) -> dict[str, str]:
        return dict(Queries(path))

    return load


# (queries file, how its store renders it for a connection)
FILES = {
    "services/scheduler/queries.sql": _as_written(ROOT / "services/scheduler/queries.sql"),
    "services/refresher/queries.sql": _refresher,
}


@pytest.mark.parametrize("file", FILES)
async def test_every_named_query_prepares(pool, file: str) -> None:
    if not (ROOT / file).exists():
        pytest.skip(f"no {file} yet")
    failed = {}
    async with pool.acquire() as conn:
        queries = await FILES[file](conn)
        assert queries, f"{file} has no queries"
        for name, sql in queries.items():
            if re.search(r"\{[a-z_]+\}", sql):
                failed[name] = "a fragment was not filled in"
                continue
            try:
                await conn.prepare(sql)
            except asyncpg.PostgresError as exc:
                failed[name] = f"{type(exc).__name__}: {exc}"
    assert not failed, failed
