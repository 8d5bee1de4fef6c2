"""``python -m control.api``: the admin API and dashboard on ``TRAWL_API_LISTEN``.

It reads every owner's store (the frontier, products, payloads), so it is an operator
application above the services, not part of one of them.
"""

from __future__ import annotations

from collections.abc import Coroutine
from typing import Any

from control.api import serve_api
from shared.service import DbRuntime, main


async def start(rt: DbRuntime) -> list[Coroutine[Any, Any, None]]:
    return [serve_api(rt)]


if __name__ == "__main__":
    main("api", start, needs_db=True)
