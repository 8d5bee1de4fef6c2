"""The refresher's SQL lives in its store, and reads of the frontier go through the views
the scheduler owns (migrations/0012_frontier_views.sql), never its tables."""

from __future__ import annotations

import re
from pathlib import Path

from shared.sql import Queries

REFRESHER = Path(__file__).resolve().parents[2] / "services" / "refresher"
# The scheduler's tables (migrations: it is their only writer).
FRONTIER_TABLES = {
    "sources",
    "jobs",
    "triggers",
    "domains",
    "entries",
    "attempts",
    "schedules",
    "payloads",
    "proxies",
    "url_state",
}
_TARGET = re.compile(r"\b(?:FROM|JOIN|UPDATE|INTO|EXISTS)\s*\(?\s*([a-z_]+)", re.IGNORECASE)
_RUNS_SQL = re.compile(r"\.(?:fetch|fetchrow|fetchval|execute|executemany|copy_records_to_table)\(")


def test_refresher_queries_read_no_frontier_table() -> None:
    queries = Queries(REFRESHER / "queries.sql")
    for name, sql in queries.items():
        code = "\n".join(line.split("--", 1)[0] for line in sql.splitlines())
        touched = {t.lower() for t in _TARGET.findall(code)}
        assert not touched & FRONTIER_TABLES, (name, touched & FRONTIER_TABLES)


def test_only_the_store_runs_sql() -> None:
    for module in sorted(REFRESHER.glob("*.py")):
        if module.name == "store.py":
            continue
        assert not _RUNS_SQL.search(module.read_text()), f"{module.name} runs SQL itself"
