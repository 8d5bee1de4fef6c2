"""Read models: what a product, a job or a page of results looks like to the API, the CLI and
the diffs. Defined once here; a store returns them and every reader shows them as they are."""

from __future__ import annotations

from datetime import datetime
from typing import Generic, TypeVar

import msgspec

from schemas.messages import Availability, Product, ProductChange
from schemas.source import AlertCondition, Source

T = TypeVar("T")


class Page(msgspec.Struct, Generic[T], kw_only=True):
    """One page of a listing: ``items`` from ``offset``, of ``total`` matching."""

    items: list[T]
    total: int
    limit: int = 0
    offset: int = 0


# -- jobs --------------------------------------------------------------------------------------
# The scheduler's read models: its store returns them; the admin API, the CLI and the client
# show them as they are.


class JobOut(msgspec.Struct, kw_only=True):
    id: int
    source: str
    kind: str
    status: str  # running | completed | cancelled
    paused: bool
    priority: int | None
    requested_by: str | None
    created_at: datetime
    finished_at: datetime | None
    # Entries by state (pending, done, …) and by last outcome (outcome_ok, …), products found,
    # kw:<keyword>:pages|products; live while running, as final when the job ended.
    counters: dict[str, int]
    rate_per_min: float  # attempts recorded in the last minute


class EntryOut(msgspec.Struct, kw_only=True):
    """One frontier entry of a job: a URL (or one page of an API listing) and its state."""

    id: int
    url: str
    domain: str
    kind: str
    depth: int
    state: str
    attempts: int
    priority: int
    not_before: datetime | None
    last_outcome: str | None
    last_status: int | None
    parse_error: str | None
    updated_at: datetime


class FailureOut(msgspec.Struct, kw_only=True):
    """A failed attempt (any outcome but ok and not_modified)."""

    attempt_id: str
    job_id: int
    url: str
    outcome: str
    status: int | None
    error: str | None
    recorded_at: datetime


class JobStats(msgspec.Struct, kw_only=True):
    jobs: dict[str, int]  # by status
    entries: dict[str, int]  # entries of running jobs by state
    outcomes_last_hour: dict[str, int]


class DomainOut(msgspec.Struct, kw_only=True):
    """A domain's pacing state and the work waiting for it."""

    domain: str
    paused: bool
    max_in_flight: int
    in_flight: int
    min_delay: float
    max_delay: float
    crawl_delay: float | None
    backoff: float
    next_allowed_at: datetime
    pending: int
    waiting: int
    blocked_last_hour: int
    updated_at: datetime


class WaitingOut(msgspec.Struct, kw_only=True):
    """An open entry and the first thing that holds it back."""

    entry_id: int
    job_id: int
    url: str
    domain: str
    state: str
    reason: str
    not_before: datetime | None
    last_outcome: str | None
    attempts: int


class ScheduleOut(msgspec.Struct, kw_only=True):
    id: int
    source: str
    spec: str  # @hourly … @yearly, "@every 30m", or five-field cron
    kind: str
    enabled: bool
    next_run_at: datetime
    last_run_at: datetime | None
    last_job_id: int | None
    last_error: str | None  # why the last run was skipped or failed
    created_at: datetime


class ProxyOut(msgspec.Struct, kw_only=True):
    id: int
    url: str  # credentials masked
    active: bool
    healthy: bool
    consecutive_failures: int
    successes: int
    failures: int
    last_error: str | None
    last_used_at: datetime | None
    created_at: datetime


class SourceOut(msgspec.Struct, kw_only=True):
    name: str
    definition: Source
    updated_at: datetime
    running_job: int | None = None


class PayloadOut(msgspec.Struct, kw_only=True):
    """A stored payload's record (the body is in the payload store, by ``ref``)."""

    ref: str
    url: str
    job_id: int | None
    attempt_id: str
    status: int | None
    content_type: str | None
    size: int
    stored_size: int | None
    sha256: str
    fetched_at: datetime
    source: str | None  # its job's source


# -- products ------------------------------------------------------------------------------------
class ProductOut(Product, kw_only=True, frozen=True):
    """A product as trawl holds it: every field the parser extracts (a new ``Product`` field is
    a field here too), then the refresher's bookkeeping. Prices are decimal strings."""

    source: str
    # The stored image (fetched once): GET /api/payloads/{image_ref}/data serves it.
    image_ref: str | None = None
    consecutive_misses: int = 0
    delisted_at: datetime | None = None
    first_seen_at: datetime
    last_seen_at: datetime
    last_seen_job: int | None = None


class SnapshotOut(msgspec.Struct, kw_only=True, frozen=True):
    """A product's state when a job saw it change (price, sale price or stock)."""

    job_id: int | None
    price: str | None
    sale_price: str | None
    currency: str | None
    availability: Availability | None
    observed_at: datetime


class ProductDetail(msgspec.Struct, kw_only=True, frozen=True):
    """One product with its snapshot history, oldest first."""

    product: ProductOut
    snapshots: list[SnapshotOut]


class PriceChange(msgspec.Struct, kw_only=True, frozen=True):
    key: str
    price_a: str | None
    price_b: str | None
    sale_price_a: str | None
    sale_price_b: str | None
    currency: str | None


class StockChange(msgspec.Struct, kw_only=True, frozen=True):
    key: str
    availability_a: Availability | None
    availability_b: Availability | None


class JobDiff(msgspec.Struct, kw_only=True, frozen=True):
    """What changed in a source's catalog from job A to job B: products added (seen in B only),
    removed (seen in A only), and price and stock changes of products seen in both."""

    source: str
    job_a: int
    job_b: int
    seen_a: int
    seen_b: int
    added: list[str]
    removed: list[str]
    price_changes: list[PriceChange]
    stock_changes: list[StockChange]


# -- product changes ---------------------------------------------------------------------------
class VerificationCounts(msgspec.Struct, kw_only=True):
    """Candidate changes (held for verification before alerting) by how their re-check ended:
    ``cancelled`` is what verification spared the users, ``unknown`` what it could not settle
    (blocked, failed, unsure: no event), ``pending`` what awaits its verify job."""

    pending: int = 0
    confirmed: int = 0
    cancelled: int = 0
    unknown: int = 0


class ChangePage(msgspec.Struct, kw_only=True):
    """Change events in id order after a cursor. ``next`` is the cursor to ask with next time
    (the last id shown, or the cursor asked with when none came: events keep coming, so a
    reader polls with it); ``more`` says whether the next page is already full."""

    items: list[ProductChange]
    next: int = 0
    more: bool = False


# -- alert rules (the notifier's) --------------------------------------------------------------


class AlertRuleIn(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """A new alert rule: a source's change events, narrowed to a product, variant or GTIN, for
    one condition; delivered to a webhook (signed) or an Apprise URL."""

    source: str
    condition: AlertCondition
    # below: the price under which to alert; drop: the fall in % (10 for 10 %).
    threshold: str | None = None
    product_key: str | None = None
    variant_key: str | None = None
    gtin: str | None = None
    min_change: float = 0.0  # price conditions: the least change in % worth an alert
    debounce_seconds: int = 3600  # at most one alert per product within this window
    webhook: str | None = None
    secret: str | None = None  # the webhook's HMAC key; generated when not given
    apprise: str | None = None
    allow_private: list[str] = []  # networks the webhook may reach despite the SSRF guard


class AlertRuleOut(msgspec.Struct, kw_only=True):
    id: int
    source: str
    condition: AlertCondition
    threshold: str | None = None
    product_key: str | None = None
    variant_key: str | None = None
    gtin: str | None = None
    min_change: float = 0.0
    debounce_seconds: int = 3600
    webhook: str | None = None
    secret: str = ""
    apprise: str | None = None
    allow_private: list[str] = []
    origin: str | None = None  # "source": written in the source file (None: the CLI or API)
    created_at: datetime | None = None


# -- the dashboard's views (control/api/views, the dashboard pages) -----------------------------
class CursorPage(msgspec.Struct, Generic[T], kw_only=True):
    """One page of a large listing, paged by key set: pass ``next_cursor`` back as ``cursor``
    for the next page (None: this was the last). ``total`` is counted on the first page only."""

    items: list[T]
    next_cursor: str | None = None
    total: int | None = None


class HistoryPoint(msgspec.Struct, kw_only=True, frozen=True):
    """A product's (or a variant's) state when a job saw it change, with the page that job
    stored for it and the page stored before (for the raw page and its diff)."""

    job_id: int | None
    observed_at: datetime
    price: str | None
    sale_price: str | None
    currency: str | None
    availability: Availability | None
    variant_key: str | None = None  # the variant's key; None: the product's own snapshot
    payload_ref: str | None = None
    previous_ref: str | None = None


class ProductHistory(msgspec.Struct, kw_only=True, frozen=True):
    """A product's history with its variants': ``variants`` are their rows as they are now (the
    chart's series), ``points`` the snapshots of all of them."""

    product: ProductOut
    points: list[HistoryPoint]
    variants: list[ProductOut] = []
    next_cursor: str | None = None


class MatchGroup(msgspec.Struct, kw_only=True, frozen=True):
    """A GTIN that products of several sources share, with their price range."""

    gtin: str
    name: str | None
    sources: int
    products: int
    lowest: str | None
    highest: str | None


class JobSummary(msgspec.Struct, kw_only=True, frozen=True):
    """A job in the history: how long it ran, what it did, and its pages per minute."""

    id: int
    source: str
    kind: str
    status: str
    created_at: datetime
    finished_at: datetime | None
    duration_s: float
    pages: int  # settled entries (done or failed)
    products: int
    failed: int
    failure_rate: float  # failed / pages
    pages_per_minute: list[int]  # attempts recorded in each minute since the job began


class SeriesBucket(msgspec.Struct, kw_only=True, frozen=True):
    at: datetime  # the bucket's start
    outcomes: dict[str, int]  # attempts by outcome in the bucket


class JobErrorOut(msgspec.Struct, kw_only=True, frozen=True):
    """Failed attempts of a job grouped by outcome, status and message."""

    outcome: str
    status: int | None
    error: str | None
    count: int
    example_url: str
    last_at: datetime


class JobProgress(msgspec.Struct, kw_only=True, frozen=True):
    """A job's progress over time (attempts per bucket by outcome), its outcomes and its top
    errors."""

    job: JobOut
    bucket_s: int
    series: list[SeriesBucket]
    top_errors: list[JobErrorOut]
