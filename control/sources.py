"""Applying a source definition: the scheduler's ``sources`` row and the notifier's rules
written in it, in one transaction. The two belong to two services, which may not import each
other, so the operator layer (CLI, API, ``trawl demo``) joins them here."""

from __future__ import annotations

from dataclasses import dataclass

from schemas.source import Source
from services.notifier.store import FileRules, sync_file_rules
from services.scheduler.catalog import delete_source, save_source
from services.scheduler.store import Conn
from shared.alert_rules import rule_from_spec


@dataclass(frozen=True)
class Applied:
    created: bool  # the source is new
    alerts: FileRules  # what happened to the rules of its ``alerts:``


async def apply_source(conn: Conn, source: Source) -> Applied:
    """Store ``source`` and make its ``alerts:`` the source's file rules (validated already:
    ``shared.sources`` checked every rule as ``trawl alerts add`` would)."""
    rules = [(spec.name, rule_from_spec(source.name, spec)) for spec in source.alerts]
    async with conn.transaction():
        created = await save_source(conn, source)
        alerts = await sync_file_rules(conn, source.name, rules)
    return Applied(created, alerts)


async def remove_source(conn: Conn, name: str) -> bool:
    """Delete a source (``delete_source``'s rules) and the rules its file made."""
    async with conn.transaction():
        deleted = await delete_source(conn, name)
        if deleted:
            await sync_file_rules(conn, name, [])
    return deleted
