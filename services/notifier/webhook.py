"""Signed webhooks: an HTTPS POST of the event JSON, guarded like a fetch.

Headers: ``Trawl-Delivery`` (``<rule>.<event>``, the same on a retry: the receiver's
idempotency key), ``Trawl-Timestamp`` (Unix seconds) and ``Trawl-Signature: sha256=<hex>``, the
HMAC-SHA256 of ``<timestamp>.<body>`` with the rule's secret. A receiver recomputes it and
refuses a timestamp older than a few minutes, so a captured request cannot be replayed later.

The target passes the SSRF guard (``shared.guard``): public addresses only, unless the rule's
``allow_private`` names the network; no redirects are followed; plain http only to a network
the rule allows (a local receiver), https otherwise.
"""

from __future__ import annotations

import hashlib
import hmac
import time

import aiohttp

from shared.alert_rules import check_webhook
from shared.errors import TrawlError
from shared.guard import Allowlist, GuardedResolver, unsafe_cause

TIMEOUT = aiohttp.ClientTimeout(total=15.0)
USER_AGENT = "trawl-notifier"


class DeliveryFailed(TrawlError):
    """The receiver did not take the alert (a retryable failure)."""


def signature(secret: str, timestamp: str, body: bytes) -> str:
    mac = hmac.new(secret.encode(), timestamp.encode() + b"." + body, hashlib.sha256)
    return f"sha256={mac.hexdigest()}"


def verify(secret: str, headers: dict[str, str], body: bytes, *, tolerance: float = 300.0) -> bool:
    """A receiver's check (also what the tests use): the signature matches and is recent."""
    timestamp = headers.get("Trawl-Timestamp", "")
    if not timestamp.isdigit() or abs(time.time() - int(timestamp)) > tolerance:
        return False
    expected = signature(secret, timestamp, body)
    return hmac.compare_digest(expected, headers.get("Trawl-Signature", ""))


async def post(
    url: str, body: bytes, *, secret: str, delivery: str, allow_private: list[str]
) -> None:
    """POST ``body``; raises ``UnsafeURL`` for a target the guard refuses (never retried) and
    ``DeliveryFailed`` for anything else that is not a 2xx."""
    check_webhook(url, allow_private)
    allow = Allowlist.from_policy(allow_private)
    timestamp = str(int(time.time()))
    headers = {
        "Content-Type": "application/json",
        "User-Agent": USER_AGENT,
        "Trawl-Delivery": delivery,
        "Trawl-Timestamp": timestamp,
        "Trawl-Signature": signature(secret, timestamp, body),
    }
    resolver = GuardedResolver(allow)
    try:
        connector = aiohttp.TCPConnector(resolver=resolver, force_close=True)
        async with (
            aiohttp.ClientSession(connector=connector, timeout=TIMEOUT) as session,
            session.post(url, data=body, headers=headers, allow_redirects=False) as r,
        ):
            if not 200 <= r.status < 300:
                raise DeliveryFailed(f"webhook answered {r.status}")
    except aiohttp.ClientError as exc:
        if (unsafe := unsafe_cause(exc)) is not None:
            raise unsafe from exc
        raise DeliveryFailed(f"webhook unreachable: {type(exc).__name__}: {exc}") from exc
    except TimeoutError as exc:
        raise DeliveryFailed("webhook timed out") from exc
    finally:
        await resolver.close()
