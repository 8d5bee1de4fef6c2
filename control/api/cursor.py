"""Opaque cursors for key-set paging: the last row's sort key as base64url JSON. A client
passes ``next_cursor`` back unchanged; anything it made up is a 400, never a 500."""

from __future__ import annotations

import base64
import binascii
from typing import Any

import msgspec

from control.api.problems import Problem
from control.api.routes import Param

# base64url only: a cursor is ASCII, so its request line stays far under aiohttp's 8 KiB.
CURSOR = Param(
    "cursor",
    {"type": "string", "maxLength": 1000, "pattern": "^[A-Za-z0-9_-]*$"},
    "next_cursor of the last page",
)


def paged(default: int, most: int) -> tuple[Param, Param]:
    """A cursor-paged route's parameters: the cursor, and a page size up to ``most``."""
    limit = Param("limit", {"type": "integer", "minimum": 1, "maximum": most, "default": default})
    return CURSOR, limit


def encode(key: list[Any]) -> str:
    return base64.urlsafe_b64encode(msgspec.json.encode(key)).decode().rstrip("=")


def decode(raw: str | None, *, length: int) -> list[Any] | None:
    """The sort key of a cursor of ``length`` parts (None for the first page)."""
    if not raw:
        return None
    if len(raw) > 1000:
        raise Problem(422, "Unprocessable Content", "cursor: not a cursor this API gave")
    try:
        key = msgspec.json.decode(base64.urlsafe_b64decode(raw + "=" * (-len(raw) % 4)))
    except (binascii.Error, ValueError, msgspec.DecodeError):
        raise Problem(422, "Unprocessable Content", "cursor: not a cursor this API gave") from None
    if not isinstance(key, list) or len(key) != length:
        raise Problem(422, "Unprocessable Content", "cursor: not a cursor this API gave")
    return key
