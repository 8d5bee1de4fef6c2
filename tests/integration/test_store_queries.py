"""Every named query of every owner's ``queries.sql`` prepares against a freshly migrated
database, so a typo, a dropped column or a view that moved fails here instead of on the one code
path that runs the query; and every store runs only queries its file names, and every query its
file names.

A file whose queries have fragments filled from the Struct fields (the refresher's) is prepared
as its store renders it."""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import NamedTuple

import asyncpg
import pytest

from services.notifier import store as notifier_store
from services.refresher import store as refresher_store
from shared.sql import Queries
from tests.conftest import ROOT

_QUOTED = re.compile(r"""["']([a-z_][a-z0-9_]*)["']""")
Render = Callable[[asyncpg.Connection], Awaitable[dict[str, str]]]


async def _refresher(conn: asyncpg.Connection) -> dict[str, str]:
    await refresher_store.create_staging(conn)  # the apply queries read its temp tables
    return await refresher_store.all_queries(conn)


async def _notifier() -> dict[str, str]:
    return notifier_store.all_queries()


def _as_written(path: Path) -> Render:
    async def load(conn: asyncpg.Connection) -> dict[str, str]:
        return dict(Queries(path))

    return load


class Store(NamedTuple):
    owner: str
    queries: Path  # the owner's queries.sql
    code: Path  # the store module, or the store package
    use: re.Pattern[str]  # how the store's code names a query
    render: Render  # the queries as the store runs them


STORES = [
    Store(
        "scheduler",
        ROOT / "services/scheduler/queries.sql",
        ROOT / "services/scheduler/store",
        re.compile(r"\bQ\.([a-z_][a-z0-9_]*)"),
        _as_written(ROOT / "services/scheduler/queries.sql"),
    ),
    Store(
        "refresher",
        ROOT / "services/refresher/queries.sql",
        ROOT / "services/refresher/store.py",
        re.compile(r"""\b_Q\[["']([a-z_][a-z0-9_]*)["']\]"""),
        _refresher,
    ),
    Store(
        "leases",
        ROOT / "shared/leases.sql",
        ROOT / "shared/leases.py",
        re.compile(r"""\b_Q\[["']([a-z_][a-z0-9_]*)["']\]"""),
        _as_written(ROOT / "shared/leases.sql"),
    ),
    Store(
        "notifier",
        ROOT / "services/notifier/queries.sql",
        ROOT / "services/notifier/store.py",
        re.compile(r"""\b_Q\[["']([a-z_][a-z0-9_]*)["']\]"""),
        lambda conn: _notifier(),
    ),
]


@pytest.mark.parametrize("store", STORES, ids=[s.owner for s in STORES])
async def test_every_named_query_prepares(store: Store, pool) -> None:
    failed: dict[str, str] = {}
    async with pool.acquire() as conn:
        queries = await store.render(conn)
        assert queries, f"{store.queries} has no queries"
        for name, sql in queries.items():
            if re.search(r"\{[a-z_]+\}", sql):
                failed[name] = "a fragment was not filled in"
                continue
            try:
                await conn.prepare(sql)
            except asyncpg.PostgresError as exc:
                failed[name] = f"{type(exc).__name__}: {exc}"
    assert not failed, failed


@pytest.mark.parametrize("store", STORES, ids=[s.owner for s in STORES])
def test_the_store_runs_exactly_the_named_queries(store: Store) -> None:
    files = sorted(store.code.glob("*.py")) if store.code.is_dir() else [store.code]
    code = "\n".join(f.read_text(encoding="utf-8") for f in files)
    run = set(store.use.findall(code))
    # A name may also be run through a variable: any mention of it as a string counts.
    mentioned = run | set(_QUOTED.findall(code))
    named = set(Queries(store.queries))
    assert run - named == set(), "the store runs queries its file does not name"
    assert named - mentioned == set(), "queries nothing runs"
