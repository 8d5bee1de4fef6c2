"""The notifier's store: the only module that runs its queries (``queries.sql``).

The notifier owns ``alert_rules`` and ``alert_deliveries``. The API and the CLI manage rules
here; the service claims and records deliveries. Every function takes a connection.
"""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from pathlib import Path
from typing import Literal, TypeAlias

import asyncpg
import msgspec
from asyncpg.pool import PoolConnectionProxy

from schemas.read import AlertRuleIn, AlertRuleOut
from shared.errors import ConfigError
from shared.sql import Queries

Conn: TypeAlias = "asyncpg.Connection | PoolConnectionProxy"

_RULE_OUT = (
    "id, source, condition, threshold::text AS threshold, product_key, variant_key, gtin, "
    "min_change, debounce_seconds, webhook, secret, apprise, allow_private, origin, created_at"
)
_Q: dict[str, str] = {
    name: sql.replace("{rule_out}", _RULE_OUT)
    for name, sql in Queries(Path(__file__).with_name("queries.sql")).items()
}


def all_queries() -> dict[str, str]:
    """Every named query as it runs (for the test that prepares them)."""
    return dict(_Q)


def _rule(row: asyncpg.Record) -> AlertRuleOut:
    return msgspec.convert(dict(row), AlertRuleOut)


async def add_rule(conn: Conn, rule: AlertRuleIn) -> AlertRuleOut:
    row = await conn.fetchrow(
        _Q["add_rule"],
        rule.source,
        *_fields(rule),
        rule.secret or secrets.token_hex(32),
        rule.apprise,
        list(rule.allow_private),
    )
    assert row is not None  # INSERT ... RETURNING
    return _rule(row)


async def list_rules(conn: Conn, source: str | None = None) -> list[AlertRuleOut]:
    return [_rule(r) for r in await conn.fetch(_Q["list_rules"], source)]


async def delete_rule(conn: Conn, rule_id: int) -> bool:
    """Delete a rule made by the CLI or the API; ``ConfigError`` for a source file's rule
    (the next apply would bring it back: remove it from the file)."""
    if await conn.fetchval(_Q["delete_rule"], rule_id) is not None:
        return True
    origin = await conn.fetchval(_Q["rule_origin"], rule_id)
    if origin is not None:
        raise ConfigError(f"alert rule {rule_id} comes from the {origin} file: remove it there")
    return False


@dataclass(frozen=True)
class FileRules:
    """What applying a source file did to its rules (ids)."""

    added: list[int]
    updated: list[int]
    removed: list[int]
    kept: list[int]


def file_key(name: str | None, rule: AlertRuleIn) -> str:
    """A file rule's identity across applies: its name, else its content."""
    if name is not None:
        return f"name:{name}"
    return "spec:" + hashlib.md5(msgspec.json.encode(rule), usedforsecurity=False).hexdigest()


def _fields(rule: AlertRuleIn) -> tuple[object, ...]:
    """The rule's columns from product_key to webhook, in the order the queries take them."""
    threshold = None if rule.threshold is None else str(Decimal(rule.threshold))
    return (
        rule.product_key,
        rule.variant_key,
        rule.gtin,
        rule.condition,
        threshold,
        rule.min_change,
        rule.debounce_seconds,
        rule.webhook,
    )


async def sync_file_rules(
    conn: Conn, source: str, rules: list[tuple[str | None, AlertRuleIn]]
) -> FileRules:
    """Make ``rules`` (name or None, rule; checked already) the source file's rules of
    ``source``, in one transaction: new ones added, named ones changed updated in place, the
    rest of the source's file rules removed. Rules of the CLI and the API are not touched."""
    async with conn.transaction():
        await conn.execute(_Q["lock_file_rules"], source)
        stored = {r["file_key"]: r["id"] for r in await conn.fetch(_Q["file_rules"], source)}
        done = FileRules([], [], [], [])
        keys = []
        for name, rule in rules:
            key = file_key(name, rule)
            keys.append(key)
            if key not in stored:
                rule_id = await conn.fetchval(
                    _Q["add_file_rule"],
                    source,
                    *_fields(rule),
                    rule.secret or secrets.token_hex(32),
                    rule.apprise,
                    list(rule.allow_private),
                    key,
                )
                done.added.append(rule_id)
                continue
            changed = await conn.fetchval(
                _Q["update_file_rule"],
                stored[key],
                *_fields(rule),
                secrets.token_hex(32),
                rule.secret,
                rule.apprise,
                list(rule.allow_private),
            )
            (done.kept if changed is None else done.updated).append(stored[key])
        done.removed.extend(
            r["id"] for r in await conn.fetch(_Q["delete_file_rules"], source, keys)
        )
    return done


async def rules_for(
    conn: Conn, source: str, key: str, variant: str, gtin: str | None
) -> list[AlertRuleOut]:
    return [_rule(r) for r in await conn.fetch(_Q["rules_for"], source, key, variant, gtin)]


Claim = Literal["send", "sent", "debounced"]


async def claim(conn: Conn, rule: AlertRuleOut, event_id: int, key: str, variant: str) -> Claim:
    """Whether to send this rule's alert of this event (run inside a transaction): ``sent``
    when it was sent already (a redelivery), ``debounced`` when another event of the product
    alerted within the window, else ``send`` (recorded as pending)."""
    await conn.execute(_Q["lock_product"], rule.id, key, variant)
    row = await conn.fetchrow(_Q["delivery"], rule.id, event_id)
    if row is not None:
        return "sent" if row["status"] == "sent" else "send"
    debounce = float(rule.debounce_seconds)
    if debounce > 0 and await conn.fetchval(
        _Q["debounced"], rule.id, key, variant, event_id, debounce
    ):
        return "debounced"
    await conn.execute(_Q["claim_delivery"], rule.id, event_id, rule.source, key, variant)
    return "send"


async def delivered(conn: Conn, rule_id: int, event_id: int) -> None:
    await conn.execute(_Q["delivered"], rule_id, event_id)


async def delivery_failed(
    conn: Conn, rule_id: int, event_id: int, error: str, *, final: bool = False
) -> None:
    """``final``: no delivery will follow (the event is dead-lettered), so the alert is given
    up and no longer debounces the product's next event."""
    status = "given_up" if final else "failed"
    await conn.execute(_Q["delivery_failed"], rule_id, event_id, error[:2000], status)


@dataclass(frozen=True)
class DeliveryOut:
    rule_id: int
    event_id: int
    source: str
    key: str
    variant: str
    status: str
    attempts: int
    last_error: str | None
    created_at: datetime
    sent_at: datetime | None


async def list_deliveries(
    conn: Conn, rule_id: int | None = None, limit: int = 100
) -> list[DeliveryOut]:
    return [DeliveryOut(**dict(r)) for r in await conn.fetch(_Q["list_deliveries"], rule_id, limit)]
