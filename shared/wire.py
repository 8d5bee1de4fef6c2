"""Making what a hostile server sent safe to put on the wire.

A reply's strings reach messages as they came: a header decoded with ``surrogateescape`` (a
non-UTF-8 byte in ``Last-Modified``) or JSON-LD read by ``json`` (``"\\ud800"``) holds lone
surrogates, which no UTF-8 encoder accepts; a 2 MB product name makes a result over the max
payload. These helpers clean such values where the message is built; ``scrubbed`` is the
generic last step before giving up (``shared.bus.Unpublishable``).
"""

from __future__ import annotations

from typing import Any, TypeVar

import msgspec

M = TypeVar("M", bound=msgspec.Struct)

MAX_TEXT = 8192  # a string field (a URL, a name, a description): more is not data
MAX_ITEMS = 2000  # entries of a list or a map


def clean(value: str, limit: int = MAX_TEXT) -> str:
    """``value`` as valid UTF-8 text (each lone surrogate replaced by ``?``) without NULs
    (PostgreSQL's text cannot hold one), cut at ``limit``."""
    if len(value) > limit:
        value = value[:limit]
    if "\x00" in value:
        value = value.replace("\x00", "")
    if value.isascii():
        return value
    return value.encode("utf-8", "replace").decode("utf-8")


def clean_or_none(value: str | None, limit: int = MAX_TEXT) -> str | None:
    return None if value is None else clean(value, limit)


def exact(value: str | None, limit: int = 1024) -> str | None:
    """A value that is only useful exactly as received (an ETag or ``Last-Modified`` sent back
    as a validator), or ``None`` when it is not plain UTF-8 text within ``limit``."""
    if value is None or len(value) > limit:
        return None
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return None
    return value


def scrubbed(message: M, *, limit: int = MAX_TEXT, items: int = MAX_ITEMS) -> M:
    """A copy of ``message`` with every string cleaned and cut at ``limit`` and every list and
    map cut at ``items`` entries. For the rare message that failed to publish: it walks it all."""
    return msgspec.convert(
        _scrub(msgspec.to_builtins(message), limit, items), type(message), strict=False
    )


def _scrub(value: Any, limit: int, items: int) -> Any:
    if isinstance(value, str):
        return clean(value, limit)
    if isinstance(value, list):
        return [_scrub(v, limit, items) for v in value[:items]]
    if isinstance(value, dict):
        return {
            clean(k, limit): _scrub(v, limit, items)
            for k, v in list(value.items())[:items]
            if isinstance(k, str)
        }
    return value
