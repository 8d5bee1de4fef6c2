"""The source definition: what a user writes in a YAML/JSON file (DESIGN.md's contract).

Every key but ``name`` and ``seeds`` is optional. Loading, validation and error messages that
name the field and line live in ``shared.sources``.
"""

from __future__ import annotations

from typing import Any, Literal

import msgspec

PACING_PROFILES: dict[str, dict[str, float]] = {
    "stealth": {"min_delay": 5.0, "max_delay": 15.0, "max_in_flight": 1},
    "polite": {"min_delay": 1.0, "max_delay": 3.0, "max_in_flight": 2},
    "fast": {"min_delay": 0.0, "max_delay": 0.0, "max_in_flight": 32},
}


class _Model(msgspec.Struct, kw_only=True, frozen=True, forbid_unknown_fields=True):
    """Base of the definition's parts. msgspec passes ``frozen`` on to subclasses, mypy does
    not (it reads them as dataclasses): each subclass repeats it, as schemas/messages.py does."""


class Search(_Model, frozen=True):
    url: str  # template with {keyword}
    keywords: list[str] = []


class LinkRule(_Model, frozen=True):
    css: str | None = None
    pattern: str | None = None  # regex searched in the absolute URL


class Links(_Model, frozen=True):
    product: LinkRule | None = None
    pagination: LinkRule | None = None
    deny: list[str] = []
    max_depth: int = 10  # link hops from a seed; pagination links do not add depth
    max_pagination: int = 1000  # consecutive pagination links (a listing's pages; traps)


class FieldRule(_Model, frozen=True):
    css: str
    attr: str | None = None  # read this attribute instead of the text


class Pacing(_Model, frozen=True):
    profile: Literal["stealth", "polite", "fast"] = "stealth"
    min_delay: float | None = None
    max_delay: float | None = None
    max_in_flight: int | None = None
    # A server's Retry-After and robots.txt Crawl-delay are obeyed up to this many seconds
    # (domain and URL alike): a hostile or broken answer must not park a domain for centuries.
    max_retry_after: float = 3600.0

    def resolved(self) -> tuple[float, float, int]:
        """(min_delay, max_delay, max_in_flight): explicit values override the profile's."""
        base = PACING_PROFILES[self.profile]
        lo = base["min_delay"] if self.min_delay is None else self.min_delay
        hi = base["max_delay"] if self.max_delay is None else self.max_delay
        n = int(base["max_in_flight"]) if self.max_in_flight is None else self.max_in_flight
        return lo, max(lo, hi), n


class RetryPolicy(_Model, frozen=True):
    max_retries: int = 3
    base_delay: float = 60.0
    factor: float = 2.0
    jitter: float = 0.2
    cap: float = 86400.0
    blocked_base_delay: float = 900.0


class Refresh(_Model, frozen=True):
    schedule: str | None = None
    miss_threshold: int = 3
    max_failure_rate: float = 0.2


class Verify(_Model, frozen=True):
    """Verify before alerting: which candidate changes are re-fetched with a fresh identity
    before their event is emitted. ``price_change``: a change of the price paid by at least
    this much (``"30%"`` or ``30``) is a candidate; ``out_of_stock`` and ``delisted`` turn those
    kinds' checks on or off. ``verify: false`` turns verification off for the source."""

    price_change: float | str = "30%"
    out_of_stock: bool = True
    delisted: bool = True

    def price_threshold(self) -> float:
        """The threshold in percent (validated by the loader: a number, or one with ``%``)."""
        value = self.price_change
        return float(value.strip().removesuffix("%")) if isinstance(value, str) else value


class ApiPagination(_Model, frozen=True):
    """How an API listing pages: ``page`` numbers, ``offset``/limit, a ``cursor`` read from the
    response, or ``none`` (one request). The crawl stops at a short page, when the running total
    reaches ``total``, without a next cursor, on a repeated cursor, or at ``max_pages`` (an
    error in the job: a listing that long is more likely a loop than a catalog)."""

    strategy: Literal["page", "offset", "cursor", "none"] = "page"
    per_page: int = 100
    start: int = 0  # the first page number (``page``) or offset (``offset``)
    max_pages: int = 1000
    total: str | None = None  # JMESPath to the listing's total count (``totalCount``)
    next_cursor: str | None = None  # JMESPath to the next page's cursor


class ApiVariants(_Model, frozen=True):
    """Per-option (variant) records inside an item: each has its own price and stock."""

    path: str  # JMESPath from the item to its list of variants
    # ``expand``: one product per variant (key ``<item key>:<variant key>``), so every option's
    # price, stock and history is tracked. ``cheapest``: one product per item, at the lowest
    # variant price, available when any variant is.
    mode: Literal["expand", "cheapest"] = "expand"
    fields: dict[str, str] = {}  # product field → JMESPath from the variant (overrides item's)
    option: str | None = None  # JMESPath to the option's label, appended to the name


class ApiMapping(_Model, frozen=True):
    """Where each product field is in the JSON, as JMESPath expressions (a constant is a
    JMESPath raw string: ``currency: "'EUR'"``)."""

    items: str  # from the response to the list of products
    fields: dict[str, str] = {}  # product field → JMESPath from the item
    variants: ApiVariants | None = None
    cents: bool = False  # prices are integers in minor units
    in_stock_below: int | None = None  # stock under this (and above 0) reads as ``limited``


class GraphQL(_Model, frozen=True):
    query: str
    variables: dict[str, Any] = {}  # strings may be placeholders: "{page}" → 2


class Render(_Model, frozen=True):
    """``render: true``, ``render: auto`` or ``render: {...}``: pages are loaded in headless
    Chromium by the renderers, and the resulting DOM is the payload (docs/architecture.md,
    "Rendering"). ``auto``: only pages whose document shows neither a product nor a listing."""

    auto: bool = False

    wait_for: str | None = None  # CSS selector; default: wait for network idle
    timeout: float = 30.0
    max_requests: int = 100
    max_bytes: int = 20 * 1024 * 1024
    block: list[Literal["font", "media", "image", "stylesheet", "script", "xhr", "fetch"]] = (
        msgspec.field(default_factory=lambda: ["font", "media", "image"])
    )
    block_hosts: list[str] = []
    click: str | None = None
    max_clicks: int = 10
    scrolls: int = 0
    screenshot: bool = False


class Api(_Model, frozen=True):
    """An API listing crawled instead of (or beside) HTML pages.

    ``url``, ``headers``, ``body`` and ``graphql`` are templates: ``{page}``, ``{per_page}``,
    ``{offset}``, ``{cursor}`` and ``{keyword}`` are filled in per request (a string that is
    exactly one placeholder becomes the value itself, so ``"{page}"`` sends a number).
    """

    preset: Literal["shopify", "graphql"] | None = None  # defaults, overridden by what is given
    url: str | None = None  # the listing endpoint; None: only ``embedded`` is read
    method: Literal["GET", "POST"] = "GET"
    headers: dict[str, str] = {}
    body: dict[str, Any] | None = None  # a JSON body (POST)
    graphql: GraphQL | None = None  # a GraphQL request (POST {query, variables})
    keywords: list[str] = []  # one listing per keyword when the template uses {keyword}
    pagination: ApiPagination = msgspec.field(default_factory=ApiPagination)
    mapping: ApiMapping | None = None
    embedded: str | None = None  # CSS selector of a JSON <script> in HTML pages (__NEXT_DATA__)


class Tls(_Model, frozen=True):
    """Whom the fetcher trusts for this source's certificates, besides nothing: ``ca_file`` (a
    PEM bundle: a corporate TLS proxy, a test server) replaces the system store for it.
    Verification itself is never turned off."""

    ca_file: str | None = None


AlertCondition = Literal["below", "drop", "change", "back_in_stock", "out_of_stock", "delisted"]


class AlertSpec(_Model, kw_only=True, frozen=True):
    """An alert rule written in the source file: the fields of ``trawl alerts add``. Applying the
    source makes the file's rules the source's file rules (``alert_rules.origin = 'source'``);
    rules made by the CLI or the API are not touched."""

    # Names the rule across applies: a named rule changed in the file is updated in place
    # (its id and debounce history stay); an unnamed one is known by its content.
    name: str | None = None
    condition: AlertCondition
    threshold: str | int | float | None = None  # below: a price; drop: a fall in % ("10%" or 10)
    product: str | None = None  # a product key
    variant: str | None = None  # a variant key
    gtin: str | None = None
    min_change: str | int | float = 0  # price conditions: the least change in % ("2%" or 2)
    debounce: str | int = "1h"  # one alert per product per: "30m", "1h", "1d" or seconds
    webhook: str | None = None  # may hold ${TRAWL_SECRET_*} references
    secret: str | None = None  # the HMAC key, as a ${TRAWL_SECRET_*} reference only
    apprise: str | None = None  # may hold ${TRAWL_SECRET_*} references
    allow_private: list[str] = []  # networks the webhook may reach despite the SSRF guard


class Source(_Model, frozen=True):
    name: str
    seeds: list[str] = []
    search: Search | None = None
    sitemaps: list[str] | Literal["robots"] = []
    allowed_domains: list[str] = []  # host[:port]; empty = the seeds' hosts
    allow_private: list[str] | bool = []
    robots: Literal["obey", "ignore"] = "obey"
    links: Links = msgspec.field(default_factory=Links)
    fields: dict[str, FieldRule] = {}
    pacing: Pacing = msgspec.field(default_factory=Pacing)
    retry: RetryPolicy = msgspec.field(default_factory=RetryPolicy)
    proxies: Literal["none", "optional", "required"] = "none"
    locale: str = "en-US"
    user_agent: str | None = None
    # "browser": TLS, HTTP/2 and headers of the claimed browser; "plain": Python's aiohttp,
    # for sites you own (an honest client, no impersonation).
    client: Literal["browser", "plain"] = "browser"
    tls: Tls = msgspec.field(default_factory=Tls)
    refresh: Refresh = msgspec.field(default_factory=Refresh)
    timeout: float = 30.0
    max_bytes: int = 10 * 1024 * 1024
    api: Api | None = None
    # Fetch each product's primary image once (content-addressed in the payload store, never
    # re-downloaded) and point the product at it: ``products.image_ref``.
    images: bool = True
    # Load pages in a headless browser (JavaScript-built shops): ``true`` or the options.
    render: bool | Literal["auto"] | Render = False
    # Alert rules kept with the source; applying the file reconciles them (see AlertSpec).
    alerts: list[AlertSpec] = []
    # Verify before alerting: ``true`` (the defaults), ``false``, or the options.
    verify: bool | Verify = True

    def verification(self) -> Verify | None:
        """What is verified before its event is emitted; None: nothing. An API source is never
        verified: its products have no page of their own to re-fetch (their ``url`` is the
        shop's HTML page, which the API mapping does not read)."""
        if self.verify is False or (self.api is not None and self.api.url):
            return None
        return self.verify if isinstance(self.verify, Verify) else Verify()

    def render_options(self) -> Render | None:
        """The render options, or None when pages are fetched plainly."""
        if isinstance(self.render, Render):
            return self.render
        if self.render == "auto":
            return Render(auto=True)
        return Render() if self.render else None


# Built-in API presets: merged under the source's own ``api`` section (what it gives wins).
API_PRESETS: dict[str, dict[str, Any]] = {
    # Shopify's public storefront listing: GET /products.json?page=N&limit=250, pages from 1,
    # a short page ends it. ``compare_at_price`` is the regular price while on sale.
    "shopify": {
        "method": "GET",
        "pagination": {"strategy": "page", "per_page": 250, "start": 1},
        "mapping": {
            "items": "products",
            "fields": {
                "key": "to_string(id)",
                "name": "title",
                "brand": "vendor",
                "url": "join('', ['/products/', handle])",
                "image": "images[0].src",
            },
            "variants": {
                "path": "variants",
                "option": "title",
                "fields": {
                    "key": "to_string(id)",
                    "sku": "sku",
                    "price": "compare_at_price || price",
                    "sale_price": "compare_at_price && price",
                    "availability": "available",
                    "stock": "inventory_quantity",
                },
            },
        },
    },
    # A generic GraphQL product listing: products(page, perPage) { totalCount items { … } }.
    "graphql": {
        "method": "POST",
        "graphql": {
            "query": (
                "query Products($page: Int!, $perPage: Int!) { products(page: $page, "
                "perPage: $perPage) { totalCount items { id sku name brand url image currency "
                "availability variants { id sku option price salePrice stock } } } }"
            ),
            "variables": {"page": "{page}", "perPage": "{per_page}"},
        },
        "pagination": {
            "strategy": "page",
            "per_page": 100,
            "start": 0,
            "total": "data.products.totalCount",
        },
        "mapping": {
            "items": "data.products.items",
            "fields": {
                "key": "id",
                "sku": "sku",
                "name": "name",
                "brand": "brand",
                "url": "url",
                "image": "image",
                "currency": "currency",
                "availability": "availability",
            },
            "variants": {
                "path": "variants",
                "option": "option",
                "fields": {
                    "key": "id",
                    "sku": "sku",
                    "price": "price",
                    "sale_price": "salePrice",
                    "stock": "stock",
                },
            },
        },
    },
}
