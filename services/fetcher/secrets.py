"""Secrets in API request headers: a source writes ``Authorization: Bearer ${TRAWL_SECRET_SHOP}``
and only the reference travels in messages, job definitions and logs; the fetcher fills it in
from its own environment when it sends the request.

Only ``TRAWL_SECRET_*`` variables can be referenced, so a source cannot make the fetcher send
any other part of its environment (a database URL, say) to a site.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from shared.errors import TrawlError

PREFIX = "TRAWL_SECRET_"
_REF = re.compile(r"\$\{([A-Za-z0-9_]+)\}")


class MissingSecret(TrawlError, LookupError):
    """A header references a secret this fetcher does not have."""


def expand(value: str, secrets: Mapping[str, str]) -> str:
    def fill(match: re.Match[str]) -> str:
        name = match[1]
        if not name.startswith(PREFIX):
            raise MissingSecret(f"${{{name}}}: only {PREFIX}* variables can be referenced")
        if name not in secrets:
            raise MissingSecret(f"secret {name} is not set in the fetcher's environment")
        return secrets[name]

    return _REF.sub(fill, value)
