"""The wire contract: every message trawl sends, as msgspec Structs (JSON on the wire).

Rules (msgspec schema evolution): new fields get defaults, a field never changes type, unknown
fields are ignored. A breaking change is a new ``v``: the new shape here, the old one in
``schemas/legacy.py`` with an ``upgrade()`` to the new, so v1 messages still in the streams at
an upgrade are read as v2 (the channel table lists each channel's legacy shapes). Every Struct
is tagged with ``type`` so a reader can tell messages apart, but the tag is optional on input:
``{"source": "demo-shop"}`` is a complete trigger.
"""

from __future__ import annotations

from typing import Literal

import msgspec

from schemas.outcomes import Outcome

VERSION = 1  # of a message that has never changed; a newer shape sets its own ``v`` default

LinkKind = Literal["seed", "search", "sitemap", "pagination", "product", "page", "image"]
Availability = Literal[
    "in_stock", "out_of_stock", "preorder", "backorder", "discontinued", "limited", "unknown"
]
# verify: a re-check of change candidates (the refresher asks for it; see the refresher).
JobKind = Literal["discovery", "refresh", "verify"]


class Message(msgspec.Struct, kw_only=True, frozen=True, tag_field="type", tag=str.lower):
    """Base of every wire message."""

    v: int = VERSION


def version_of(message: type[Message]) -> int:
    """The version a message type writes (the default of its ``v``)."""
    field = next(f for f in msgspec.structs.fields(message) if f.name == "v")
    return int(field.default)


class Trigger(Message, tag="trigger", kw_only=True, frozen=True):
    """Start a crawl of a source. Published on ``<ns>.trigger`` by the CLI, a schedule or anyone."""

    source: str
    id: str | None = None  # idempotency key; without one, identical triggers in a minute are one
    kind: JobKind = "discovery"
    seeds: list[str] = []
    keywords: list[str] = []
    priority: int | None = None
    requested_by: str | None = None


class TriggerReply(Message, tag="trigger_reply", kw_only=True, frozen=True):
    """Answer to a trigger sent as a NATS request: a job id or an error."""

    job_id: int | None = None
    error: str | None = None
    existing: bool = False


class ApiRequest(msgspec.Struct, kw_only=True, frozen=True):
    """The HTTP request behind an API page: sent exactly as given (the URL travels beside it).

    ``page``/``offset``/``cursor`` say which page of the listing this is, and ``items_before``
    how many items the earlier pages held, so the parser can apply the stop conditions and
    build the next request without any state of its own.
    """

    method: str = "GET"
    body: str | None = None  # sent as application/json unless headers name another type
    headers: dict[str, str] = {}
    page: int | None = None
    offset: int | None = None
    cursor: str | None = None
    items_before: int = 0
    pages: int = 1  # the page's position in the chain (1 = first), for the max_pages guard


class RenderPolicy(msgspec.Struct, kw_only=True, frozen=True):
    """How a page is rendered in a headless browser (a source's ``render``): its work goes on
    ``<ns>.render`` to the renderers instead of ``<ns>.fetch``."""

    auto: bool = False  # render only pages whose document shows no product and no listing
    wait_for: str | None = None  # a CSS selector to wait for; default: network idle
    timeout: float = 30.0  # the whole render, main document included
    max_requests: int = 100  # subrequests the page may make; the rest are aborted
    max_bytes: int = 20 * 1024 * 1024  # all subresponse bodies together
    block: list[str] = msgspec.field(default_factory=lambda: ["font", "media", "image"])
    block_hosts: list[str] = []  # more tracker hosts to block (a built-in list comes first)
    click: str | None = None  # e.g. a "load more" button, clicked until gone or max_clicks
    max_clicks: int = 10
    scrolls: int = 0  # scroll to the bottom this many times (infinite lists)
    screenshot: bool = False  # a PNG of the viewport into the payload store


class FetchPolicy(msgspec.Struct, kw_only=True, frozen=True):
    """What the fetcher needs to know about the source; travels with the work (no DB lookup)."""

    robots: bool = True
    allow_private: list[str] = []  # CIDR networks exempt from the SSRF guard; ["*"] = all
    locale: str = "en-US"
    user_agent: str | None = None
    proxies: Literal["none", "optional", "required"] = "none"
    max_in_flight: int = 1
    timeout: float = 30.0
    max_bytes: int = 10 * 1024 * 1024
    max_redirects: int = 5
    accept_types: list[str] = msgspec.field(
        default_factory=lambda: ["text/html", "application/xhtml+xml"]
    )
    render: RenderPolicy | None = None  # set: the page is rendered by a browser
    client: Literal["browser", "plain"] = "browser"  # plain: aiohttp, for sites you own
    ca_file: str | None = None  # a CA bundle trusted instead of the system store
    # A verify job's re-check must not look like the fetch that saw the change: the identities
    # (fingerprints) and proxy ids of that fetch, skipped when another is available.
    avoid_identities: list[str] = []
    avoid_proxies: list[str] = []


class Attempt(msgspec.Struct, kw_only=True, frozen=True):
    """One attempt at one frontier entry: what was asked for, by which job. The scheduler sets it
    on the work; the fetch result and the parse result carry it back unchanged, so nothing is
    copied field by field on the way."""

    entry_id: int
    number: int = 1  # the entry's attempt number (1 = first)
    job_id: int
    source: str
    url: str
    kind: LinkKind = "page"
    depth: int = 0
    keyword: str | None = None
    request: ApiRequest | None = None  # an API page: method, body and headers to send
    # The page that linked this URL (its Referer); None: a seed, typed into the address bar.
    referrer: str | None = None
    previous_payload_ref: str | None = None  # the last stored body: re-parsed on a 304
    # Set by replay, which re-applies stored pages outside any attempt: results are keyed by it.
    replay: str | None = None

    @property
    def id(self) -> str:
        """The idempotency key of everything downstream (attempt rows, message ids, results)."""
        if self.replay is not None:
            return f"replay-{self.replay}-{self.entry_id}"
        return f"{self.entry_id}.{self.number}"


class FetchWork(Message, tag="fetch_work", kw_only=True, frozen=True):
    """One due request, published on ``<ns>.fetch`` by the scheduler."""

    v: int = 2
    attempt: Attempt
    domain: str
    not_before: float | None = None  # epoch seconds; the fetcher waits until then
    deadline: float | None = None  # epoch seconds; past it the work is dropped (reported)
    etag: str | None = None
    last_modified: str | None = None
    policy: FetchPolicy = msgspec.field(default_factory=FetchPolicy)


class FetchResult(Message, tag="fetch_result", kw_only=True, frozen=True):
    """What happened to one request, published on ``<ns>.fetched`` by the fetcher."""

    v: int = 2
    attempt: Attempt
    outcome: Outcome
    final_url: str | None = None
    status: int | None = None
    error: str | None = None
    started_at: float = 0.0
    elapsed_ms: float = 0.0
    payload_ref: str | None = None
    content_type: str | None = None
    charset: str | None = None
    size: int = 0
    retry_after: float | None = None
    crawl_delay: float | None = None
    etag: str | None = None
    last_modified: str | None = None
    proxy: str | None = None  # proxy id, never its credentials
    fingerprint: str | None = None
    screenshot_ref: str | None = None  # a rendered page's screenshot (payload store)


class Link(msgspec.Struct, kw_only=True, frozen=True, array_like=False):
    url: str
    kind: LinkKind = "page"
    request: ApiRequest | None = None  # an API page (next page of a listing)
    lastmod: str | None = None  # a sitemap's <lastmod>: unchanged since our copy → not fetched


class Product(msgspec.Struct, kw_only=True, frozen=True):
    """A product as extracted from one page. Prices are decimal strings."""

    key: str
    sku: str | None = None
    gtin: str | None = None
    mpn: str | None = None
    name: str | None = None
    brand: str | None = None
    price: str | None = None
    sale_price: str | None = None
    currency: str | None = None
    availability: Availability | None = None
    url: str | None = None
    image: str | None = None
    stock: int | None = None  # units in stock, when the source says
    prices: dict[str, str] = {}  # named price lists: {"member": "9.99", "medical": "8.50"}
    attributes: dict[str, str] = {}  # e.g. {"potency": "THC 20%"}
    # How the product was found: jsonld | microdata | rdfa | opengraph | visible | css,
    # and how sure the parser is (0..1). Below 0.5 the page's parse is not confident: its
    # availability and absence must not count (a miss, out of stock) against the product.
    found_by: str | None = None
    confidence: float | None = None
    # A variant (one size or colour of a product group) is a product row of its own, with its
    # own key, sku, attributes, price, stock, history and misses; ``variant_of`` is the key of
    # the product it belongs to.
    variant_of: str | None = None

    @property
    def confident(self) -> bool:
        """Whether this sighting counts: a product parsed with less than ``CONFIDENT`` is
        *unknown* (neither seen nor missed), its page's word on it not taken."""
        return self.confidence is None or self.confidence >= CONFIDENT


CONFIDENT = 0.5


class ParseResult(Message, tag="parse_result", kw_only=True, frozen=True):
    """A parsed page, published on ``<ns>.parsed`` by the parser."""

    v: int = 2
    attempt: Attempt
    payload_ref: str | None = None
    product: Product | None = None
    links: list[Link] = []
    not_modified: bool = False  # 304: the page's products count as seen
    error: str | None = None  # the page could not be parsed; recorded, never fatal
    products: list[Product] = []  # an API page lists many products (``product`` stays None)
    # The page's result could not be published (too large even capped, say): ``error`` says
    # why; the entry fails instead of waiting for a result that never comes.
    failed: bool = False

    def sightings(self) -> list[Product]:
        """Every product the page showed: its main product and the listed ones."""
        return ([self.product] if self.product is not None else []) + list(self.products)


class JobEvent(Message, tag="job_event", kw_only=True, frozen=True):
    """Job lifecycle, published on ``<ns>.events.job.<id>.<event>`` by the scheduler."""

    job_id: int
    source: str
    event: str
    status: str
    kind: JobKind = "discovery"
    counters: dict[str, int] = {}
    at: float = 0.0


class DeadLetter(Message, tag="dead_letter", kw_only=True, frozen=True):
    """A message that cannot be handled, published on ``<ns>.dlq.<stream>``."""

    stream: str
    subject: str
    reason: str
    num_delivered: int = 0
    data: str = ""  # the original body, decoded as UTF-8 with replacement
    headers: dict[str, str] = {}  # the original's own headers (never the transport's Nats-*)
    at: float = 0.0
    # Where the original was: its sequence in ``stream``, and its size in bytes. A body too
    # large for the letter to fit the max payload is cut (``truncated``): never requeue that.
    stream_seq: int | None = None
    size: int = 0
    truncated: bool = False


ChangeKind = Literal[
    "new", "price_changed", "out_of_stock", "back_in_stock", "delisted", "relisted"
]
CHANGE_KINDS: tuple[ChangeKind, ...] = (
    "new",
    "price_changed",
    "out_of_stock",
    "back_in_stock",
    "delisted",
    "relisted",
)


class ProductState(msgspec.Struct, kw_only=True, frozen=True):
    """What a change event compares: prices are decimal strings."""

    price: str | None = None
    sale_price: str | None = None
    currency: str | None = None
    availability: Availability | None = None


class ProductChange(Message, tag="product_change", kw_only=True, frozen=True):
    """One real change of a product (or of one of its variants), published by the refresher on
    ``<ns>.events.product.<source>.<kind>``. ``id`` is the change's position in the
    ``product_events`` table (a cursor); the idempotency key is (source, key, variant, job, kind).
    """

    id: int
    source: str
    kind: ChangeKind
    key: str  # the product's key (for a variant, the product it belongs to)
    variant: str = ""  # the variant's own key; "" for the product itself
    gtin: str | None = None
    url: str | None = None
    before: ProductState | None = None  # None for ``new``
    after: ProductState
    direction: Literal["up", "down"] | None = None  # price_changed only
    percent: float | None = None  # price_changed only: (after - before) / before, in %
    job_id: int
    at: float = 0.0
    # The verify job whose re-check (a fresh identity) confirmed this change; None for a
    # change that needed no verification.
    verified_by: int | None = None


ALL_MESSAGES: tuple[type[Message], ...] = (
    Trigger,
    TriggerReply,
    FetchWork,
    FetchResult,
    ParseResult,
    JobEvent,
    DeadLetter,
    ProductChange,
)
