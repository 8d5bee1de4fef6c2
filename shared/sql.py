"""Named SQL queries, read from an owner's ``queries.sql`` (procrastinate's ``sql/queries.sql``).

A file holds blocks that each start with a ``-- name: <name>`` line; the lines after it, up to
the next name, are that query, comments included (they document it). Only the owner's store
module loads its file and runs its queries; everything else calls the store.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from pathlib import Path

from shared.errors import TrawlError

_NAME = re.compile(r"^--\s*name:\s*([a-z_][a-z0-9_]*)\s*$")


class QueryFileError(TrawlError):
    """A queries file is malformed."""


class Queries(Mapping[str, str]):
    """The named queries of one file; ``queries.name`` or ``queries["name"]``."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._queries = parse(path.read_text(encoding="utf-8"), str(path))

    def __getattr__(self, name: str) -> str:
        try:
            return self._queries[name]
        except KeyError:
            raise AttributeError(f"{self.path.name} has no query {name!r}") from None

    def __getitem__(self, name: str) -> str:
        return self._queries[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._queries)

    def __len__(self) -> int:
        return len(self._queries)


def parse(text: str, origin: str = "<queries>") -> dict[str, str]:
    queries: dict[str, str] = {}
    name: str | None = None
    lines: list[str] = []

    def close(line_no: int) -> None:
        if name is None:
            return
        body = "\n".join(lines).strip()
        if not body or all(line.lstrip().startswith("--") for line in body.splitlines()):
            raise QueryFileError(f"{origin}:{line_no}: query {name!r} is empty")
        queries[name] = body

    for no, line in enumerate(text.splitlines(), 1):
        match = _NAME.match(line.strip())
        if match:
            close(no)
            name, lines = match.group(1), []
            if name in queries:
                raise QueryFileError(f"{origin}:{no}: query {name!r} is defined twice")
        elif name is not None:
            lines.append(line)
        elif line.strip() and not line.lstrip().startswith("--"):
            raise QueryFileError(f"{origin}:{no}: SQL before the first '-- name:' line")
    close(len(text.splitlines()))
    return queries
