"""A client for trawl's public surface: triggers, job events and the read models.

The CLI uses it, and so do the tests: what they check is what a user would see.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from typing import Any

import asyncpg
import msgspec
import nats.errors
from nats.aio.client import Client
from nats.js import api

from schemas.messages import JobEvent, Trigger, TriggerReply
from schemas.source import Source
from services.refresher import store as refresher
from services.scheduler.store import jobs as job_records
from services.scheduler.store import sources as source_records
from shared.bus import connect, discover_instances, encode
from shared.db import open_pool
from shared.errors import SourceError
from shared.names import Names
from shared.settings import Settings

_event_decoder = msgspec.json.Decoder(JobEvent)
_reply_decoder = msgspec.json.Decoder(TriggerReply)
# What a job's summary shows of its refreshed event: the misses, and verification before
# alerting (a crawl's candidates; a verify job's outcomes).
REFRESH_COUNTERS = (
    "applied",
    "seen",
    "missed",
    "delisted",
    "candidates",
    "verify_confirmed",
    "verify_cancelled",
    "verify_unknown",
)
SUBSCRIBE_ATTEMPTS = 10  # job event subscriptions, each bounded by the request timeout


class TrawlClient:
    def __init__(self, settings: Settings, *, nats: bool = True) -> None:
        self.settings = settings
        self.names = Names(settings.namespace)
        self._want_nats = nats
        self.nc: Client | None = None
        self._pool: asyncpg.Pool | None = None

    async def __aenter__(self) -> TrawlClient:
        if self._want_nats:
            self.nc = await connect(self.settings.nats_url, name="trawl-cli", attempts=3)
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self.nc is not None:
            await self.nc.close()
        if self._pool is not None:
            await self._pool.close()

    async def pool(self) -> asyncpg.Pool:
        if self._pool is None:
            self._pool = await open_pool(
                self.settings.database_url,
                min_size=1,
                max_size=2,
                attempts=3,
                transaction_pooling=self.settings.transaction_pooling,
            )
        return self._pool

    # -- triggers and events ------------------------------------------------------------------
    async def trigger(
        self,
        source: str,
        *,
        kind: str = "discovery",
        seeds: list[str] | None = None,
        keywords: list[str] | None = None,
        priority: int | None = None,
        timeout: float = 5.0,
    ) -> TriggerReply:
        assert self.nc is not None
        message = Trigger(
            id=uuid.uuid4().hex,
            source=source,
            kind=kind,  # type: ignore[arg-type]
            seeds=seeds or [],
            keywords=keywords or [],
            priority=priority,
            requested_by="cli",
        )
        data = encode(message)
        try:
            msg = await self.nc.request(self.names.trigger, data, timeout=timeout)
        except nats.errors.NoRespondersError:
            return TriggerReply(
                error=f"nothing listens on {self.names.trigger}: is trawl "
                f"running in namespace {self.names.ns!r}?"
            )
        except nats.errors.TimeoutError:
            # The trigger stream stored it (it captures the subject without acking): it runs
            # as soon as a scheduler takes it.
            return TriggerReply(
                error=f"no scheduler answered within {timeout:g} s; the trigger "
                "is queued and will run when a scheduler starts"
            )
        return _reply_decoder.decode(msg.data)

    async def events(self, job_id: int):
        """Every event of a job from the first (the stream keeps them), then live ones."""
        assert self.nc is not None
        js = self.nc.jetstream()
        # A cluster electing a stream leader (a node just died or came back) may not answer
        # the lookup at once: ask again for a while rather than fail the wait.
        for attempt in range(SUBSCRIBE_ATTEMPTS):
            try:
                sub = await js.subscribe(
                    self.names.job_events(job_id),
                    ordered_consumer=True,
                    deliver_policy=api.DeliverPolicy.ALL,
                )
                break
            except nats.errors.TimeoutError:
                if attempt + 1 == SUBSCRIBE_ATTEMPTS:
                    raise
                yield None  # a tick: the caller's deadline still rules
        try:
            while True:
                try:
                    msg = await sub.next_msg(timeout=1.0)
                except nats.errors.TimeoutError:
                    yield None  # a tick, so callers can check their deadline
                    continue
                yield _event_decoder.decode(msg.data)
        finally:
            await sub.unsubscribe()

    async def wait(
        self,
        job_id: int,
        *,
        timeout: float = 3600.0,
        progress: bool = False,
        refreshed_timeout: float = 60.0,
    ) -> dict[str, Any]:
        """Wait for the job to end and its products to be applied; returns a summary."""
        deadline = time.monotonic() + timeout
        final: JobEvent | None = None
        refreshed: JobEvent | None = None
        bar = _Progress(job_id) if progress else None
        try:
            async for event in self.events(job_id):
                now = time.monotonic()
                if event is not None:
                    if bar:
                        bar.update(event)
                    if event.event in ("completed", "cancelled"):
                        final = event
                        deadline = min(deadline, now + refreshed_timeout)
                        if event.event == "cancelled":
                            break
                    elif event.event == "refreshed":
                        refreshed = event
                        if final is not None:
                            break
                if now > deadline:
                    break
        finally:
            if bar:
                bar.close()
        summary: dict[str, Any] = {"job_id": job_id, "status": final.status if final else "timeout"}
        if final:
            summary["source"] = final.source
            summary["counters"] = final.counters
        if refreshed:
            summary["refresh"] = {k: refreshed.counters.get(k, 0) for k in REFRESH_COUNTERS}
        if final:
            async with (await self.pool()).acquire() as conn:
                summary["products"] = await refresher.count_products(conn, final.source)
        return summary

    async def workers(self, *, wait: float = 0.3) -> list[dict[str, Any]]:
        """Live service instances of this namespace ($SRV.PING scatter-gather)."""
        assert self.nc is not None
        return await discover_instances(self.nc, "PING", self.settings.namespace, wait=wait)

    async def wait_for_workers(self, expected: dict[str, int], *, timeout: float = 30.0) -> None:
        """Until every service has at least the expected number of live instances."""
        deadline = time.monotonic() + timeout
        while True:
            counts: dict[str, int] = {}
            for info in await self.workers():
                service = info["name"].removeprefix(f"{self.settings.namespace}-")
                counts[service] = counts.get(service, 0) + 1
            if all(counts.get(k, 0) >= v for k, v in expected.items()):
                return
            if time.monotonic() > deadline:
                raise TimeoutError(f"workers not ready: want {expected}, have {counts}")
            await asyncio.sleep(0.1)

    # -- read models --------------------------------------------------------------------------
    async def jobs(self, limit: int = 20) -> list[dict[str, Any]]:
        """The newest jobs, as the API's ``JobOut`` read model (JSON-ready)."""
        async with (await self.pool()).acquire() as conn:
            page = await job_records.page(conn, limit=limit)
        return [msgspec.to_builtins(job) for job in page.items]

    async def job(self, job_id: int) -> dict[str, Any] | None:
        """One job as ``JobOut`` (JSON-ready), its entries counted now."""
        async with (await self.pool()).acquire() as conn:
            job = await job_records.get(conn, job_id, live=True)
        return None if job is None else msgspec.to_builtins(job)

    async def products(self, source: str, limit: int | None = None) -> list[dict[str, Any]]:
        """A source's products by key, as ``ProductOut`` records in JSON form."""
        async with (await self.pool()).acquire() as conn:
            products = await refresher.list_products(conn, source, limit=limit)
        return [msgspec.to_builtins(p) for p in products]

    async def source(self, name: str) -> Source:
        async with (await self.pool()).acquire() as conn:
            found = await source_records.get(conn, name)
        if found is None:
            raise SourceError(f"unknown source {name!r}")
        return found.definition

    # -- human output -------------------------------------------------------------------------
    @staticmethod
    def print_summary(summary: dict[str, Any]) -> None:
        c = summary.get("counters", {})
        print(
            f"job {summary['job_id']} {summary['status']}: {c.get('total', 0)} pages, "
            f"{c.get('done', 0)} done, {c.get('failed', 0)} failed, "
            f"{c.get('products', 0)} product pages; "
            f"{summary.get('products', 0)} products in the catalog"
        )
        held = summary.get("refresh", {}).get("candidates", 0)
        if held:
            source = summary.get("source", "SOURCE")
            print(
                f"{held} changes held for verification before alerting: a verify job re-fetches "
                f"them now (trawl changes {source} --verification pending)"
            )

    @staticmethod
    def print_jobs(data: list[dict[str, Any]]) -> None:
        from rich.console import Console
        from rich.table import Table

        table = Table("id", "source", "kind", "status", "pages", "created")
        for j in data:
            table.add_row(
                str(j["id"]),
                j["source"],
                j["kind"],
                j["status"],
                str(j["counters"].get("total", "")),
                j["created_at"][:19],
            )
        Console().print(table)

    @staticmethod
    def print_job(data: dict[str, Any]) -> None:
        print(
            f"job {data['id']}  source={data['source']}  kind={data['kind']}  "
            f"status={data['status']}"
        )
        for key, value in sorted(data["counters"].items()):
            print(f"  {key:28} {value}")

    @staticmethod
    def print_products(source: str, data: list[dict[str, Any]]) -> None:
        from rich.console import Console
        from rich.table import Table

        table = Table(
            "key",
            "name",
            "brand",
            "price",
            "cur",
            "availability",
            "misses",
            title=f"{source}: {len(data)} products",
        )
        for p in data:
            table.add_row(
                p["key"],
                p["name"] or "",
                p["brand"] or "",
                p["price"] or "",
                p["currency"] or "",
                p["availability"] or "",
                str(p["consecutive_misses"]),
            )
        Console().print(table)


class _Progress:
    """A rich progress bar over a job's pages (done of discovered)."""

    def __init__(self, job_id: int) -> None:
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

        self.progress = Progress(
            TextColumn(f"job {job_id}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.fields[detail]}"),
            transient=False,
        )
        self.task = self.progress.add_task("crawl", total=None, detail="starting")
        self.progress.start()

    def update(self, event: JobEvent) -> None:
        c = event.counters
        total = c.get("total", 0)
        self.progress.update(
            self.task,
            total=max(total, 1),
            completed=total - c.get("open", 0),
            detail=f"{c.get('products', 0)} products · {event.status}",
        )

    def close(self) -> None:
        self.progress.stop()
