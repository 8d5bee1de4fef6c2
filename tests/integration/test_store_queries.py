"""Every named query of every store prepares against a freshly migrated database, so a typo or
a dropped column fails here instead of on the one code path that runs the query; and every
store runs only queries its file names, and every query its file names."""

from __future__ import annotations

import re
from pathlib import Path
from typing import NamedTuple

import asyncpg
import pytest

from shared.sql import Queries

ROOT = Path(__file__).resolve().parents[2]


class Store(NamedTuple):
    owner: str
    queries: Path  # the owner's queries.sql
    code: Path  # the store module, or the store package


STORES = [
    Store(
        "scheduler",
        ROOT / "services/scheduler/queries.sql",
        ROOT / "services/scheduler/store",
    ),
]

_USE = re.compile(r"\bQ\.([a-z_][a-z0-9_]*)")


@pytest.mark.parametrize("store", STORES, ids=[s.owner for s in STORES])
async def test_every_named_query_prepares(store: Store, database_url: str) -> None:
    queries = Queries(store.queries)
    assert len(queries) > 0
    failures: dict[str, str] = {}
    conn = await asyncpg.connect(database_url)
    try:
        for name, sql in queries.items():
            try:
                await conn.prepare(sql)
            except asyncpg.PostgresError as exc:
                failures[name] = f"{type(exc).__name__}: {exc}"
    finally:
        await conn.close()
    assert failures == {}


@pytest.mark.parametrize("store", STORES, ids=[s.owner for s in STORES])
def test_the_store_runs_exactly_the_named_queries(store: Store) -> None:
    files = sorted(store.code.glob("*.py")) if store.code.is_dir() else [store.code]
    used = {name for f in files for name in _USE.findall(f.read_text(encoding="utf-8"))}
    named = set(Queries(store.queries))
    assert used - named == set(), "the store runs queries its file does not name"
    assert named - used == set(), "queries nothing runs"
