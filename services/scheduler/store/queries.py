"""The scheduler's named queries (``services/scheduler/queries.sql``) and what runs them.

Only the modules of this package run these queries; everything else calls their functions.
"""

from __future__ import annotations

from pathlib import Path
from typing import TypeAlias

import asyncpg
from asyncpg.pool import PoolConnectionProxy

from shared.sql import Queries

PATH = Path(__file__).resolve().parent.parent / "queries.sql"
Q = Queries(PATH)

# A connection, or one borrowed from a pool: every store function takes either, so a caller
# can hold a transaction over several calls.
Conn: TypeAlias = asyncpg.Connection | PoolConnectionProxy


def affected(status: str) -> int:
    """Rows an INSERT/UPDATE/DELETE touched, from its status tag (``UPDATE 3``)."""
    return int(status.rsplit(" ", 1)[-1])
