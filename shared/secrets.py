"""Secrets by reference: a source writes ``Authorization: Bearer ${TRAWL_SECRET_SHOP}`` (an API
request header) or ``secret: ${TRAWL_SECRET_HOOK}`` (an alert rule), and only the reference is
stored and travels in messages, job definitions and logs; the service that uses it (the fetcher
sending the request, the notifier signing the webhook) fills it in from its own environment.

Only ``TRAWL_SECRET_*`` variables can be referenced, so a source cannot make a service send any
other part of its environment (a database URL, say) to a site.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

from shared.errors import TrawlError

PREFIX = "TRAWL_SECRET_"
REF = re.compile(r"\$\{([A-Za-z0-9_]+)\}")


class MissingSecret(TrawlError, LookupError):
    """A value references a secret this service does not have."""


def references(value: str) -> list[str]:
    """The variable names ``value`` references."""
    return REF.findall(value)


def foreign(value: str) -> list[str]:
    """The references in ``value`` that may not be made (not ``TRAWL_SECRET_*``)."""
    return [name for name in references(value) if not name.startswith(PREFIX)]


def expand(value: str, secrets: Mapping[str, str]) -> str:
    def fill(match: re.Match[str]) -> str:
        name = match[1]
        if not name.startswith(PREFIX):
            raise MissingSecret(f"${{{name}}}: only {PREFIX}* variables can be referenced")
        if name not in secrets:
            raise MissingSecret(f"secret {name} is not set in this service's environment")
        return secrets[name]

    return REF.sub(fill, value)


def redact(text: str, values: Iterable[str]) -> str:
    """``text`` (an error, a log line) with every secret value in ``values`` masked."""
    for value in values:
        if value:
            text = text.replace(value, "***")
    return text
