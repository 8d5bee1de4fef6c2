"""Link discovery: every followable URL of the page, canonicalised, filtered and classified.

Kinds: ``pagination`` (other pages of this listing), ``product`` (detail pages of this site)
and ``page`` (everything else worth following). A source's rules (CSS selector and/or URL
regex) replace the default heuristic of their kind; the defaults are:

- pagination: ``rel=next|prev``, next-page URLs announced in ``data-*`` attributes or JSON
  state (load more, infinite scroll), and links that ``services.parser.pagination`` finds to
  be other pages of this listing (its docstring gives the URL shapes and pager cues).
  Sort/filter/view/page-size variants of the page are not pagination.
- product: detail-page URL shapes (``/p/``, ``/product/``, ``/products/``, ``/dp/``,
  ``-p-123``, ``/item/``, ``?pid=``, ``?id_product=``, ``&product_id=``), product cards of
  listings and recommendation rows, and JSON-LD ``ItemList`` members. Cart, wishlist, compare,
  quick-view, offer and brand URLs never are, nor links styled as those actions (their class).

Cart/checkout/wishlist/compare/logout URLs (also Warenkorb, panier, carrito…) change state on
the shop and are dropped.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from selectolax.lexbor import LexborHTMLParser, LexborNode

from schemas.messages import Link, LinkKind
from schemas.source import LinkRule, Source
from services.parser.jsonld import Forest, as_list, types_of
from services.parser.listing import CART_PATHS
from services.parser.markup import Alternative, Markup, Query
from services.parser.pagination import Pager, declared_next, may_extend, where
from shared.caching import CACHED_LENGTH, short_key_cache
from shared.urls import TRACKING_PARAMS, TRACKING_PREFIXES, canonicalize, host_of

# A product card of this listing vs a filter/sort variant of it: compared by (origin, path).
_PAGE_SEGMENT = re.compile(r"/page[/-](\d+)/?$", re.I)
_PRODUCT_URL = re.compile(
    r"/(?:p|product|products|dp|item|items|itm|ip|produkt|produkte|produit|produits|producto"
    r"|productos|produto|produtos|prodotto|prodotti|tuote|urun)/[^/?#]+|/gp/product/|-p-\d+"
    # query-string shops: ColorMe (?pid=), PrestaShop (?id_product=), OpenCart (&product_id=)
    r"|[?&](?:pid|product_id|id_product|productid)=\w"
    # osCommerce and its forks (Zen Cart): product_info.php?products_id=, ?main_page=product_info
    r"|/product_info\.php\?|[?&]main_page=product_info(?:&|$)"
    r"|(?<!\d)97[89]\d{10}(?!\d)",  # an ISBN-13 in the path: a book's page
    re.I,
)
_NOT_PRODUCT = re.compile(
    r"add[-_]?to[-_]?(?:cart|basket|bag|wish)|[/?&](?:cart|basket|checkout|wishlists?|wish-list"
    r"|compare|login|logout|account|signin|register)\b|quick[-_]?(?:view|shop|look)"
    r"|[?&]view=quick|/offer-listing|/offers?(?:/|$|\?)|/reviews?(?:/|$|\?)|/write-review"
    r"|/brands?/|[?&]action=|/(?:merkzettel|wunschliste|favoris|favoritos|preferiti)(?:/|$|\?)"
    r"|[/_-]compare(?:/|$|\?)",
    re.I,
)
_ACTION = re.compile(
    rf"add[-_]?to[-_]?(?:cart|basket|bag|wish)|/(?:{CART_PATHS}|wishlists?|compare"
    r"|logout|signout)(?:/|$|\?)"
    r"|/product_compare/|/wishlist/index/add"
    r"|[?&](?:add-to-cart|add_to_wishlist|action=(?:add|buy))",
    re.I,
)
# A link styled as a shop action (buy, wish list, compare, quick view): never the product link
# of its card, whatever the language of its URL.
_ACTION_CLASS = re.compile(
    r"(?:^|[\s_-])(?:add-?to-?(?:cart|basket|bag|wishlist)|wishlist|wish-list|compare"
    r"|quick-?view|quick-?shop|btn-buy|buy-?now|cart)(?:$|[\s_-])",
    re.I,
)
_REL_PAGINATION = frozenset({"next", "prev", "previous", "first", "last"})
# In <head>, only next/prev: a head's first/last point at the listing's ends, not its pager.
_REL_HEAD = frozenset({"next", "prev", "previous"})
_CARDS = (
    Alternative('[class*="product-card" i]'),
    Alternative('[class*="product-tile" i]'),
    Alternative('[class*="product-item" i]'),
    Alternative('[class*="productcard" i]'),
    Alternative('[class*="producttile" i]'),
    Alternative('[class*="product-box" i]'),
    Alternative('[class*="product-miniature" i]'),
    Alternative('[class*="product_item" i]'),
    Alternative('[class*="product-grid-item" i]'),
    Alternative('[class*="productbox" i]'),  # JTL-Shop's productbox, others' productBox
    Alternative('[class*="product--box" i]'),  # Shopware 5
    Alternative("ul.products > li"),
    Alternative("li.product"),
    Alternative("[data-product-id]", names=(b"data-product-id",)),
    Alternative(
        '[itemtype*="ItemList" i] [itemtype*="schema.org/Product" i]', names=(b"itemtype",)
    ),
)
# A link whose own class says card (``a[href]:is([class*="product-card" i], …)``): checked on
# the class string the anchor loop reads anyway.
_CARD_CLASSES = ("product-card", "product-tile", "product-item")


def _ancestors(cards: tuple[Alternative, ...]) -> Query:
    """The alternatives of ``a[href]:is(A *, B *, …)``: the links inside any of them, in one
    walk of the tree (the list ``A a[href], B a[href], …`` costs a walk per entry: 40% more on
    a product page). Not ``:is(A, B) a[href]`` nor ``a[href]:is(:is(A, B) *)``: lexbor
    (selectolax 1.0) matches a descendant of a bare ``:is(…)`` only as a direct child, so a
    card's link inside a wrapper div would be missed.

    The class-substring alternatives all say "product", so they sit behind one
    ``[class*="product" i]`` test: lexbor tries every alternative on every ancestor of every
    link, and most ancestors fail that one test (the same links; 0.24 → 0.13 ms on a bench
    page, 1.5 → 0.7 ms on the real dev pages). An alternative whose attribute name the page
    never writes is left out on that page (``Markup``): each costs a walk up from every link,
    and an attribute lexbor has no static id for (``data-product-id``, ``itemtype``) a hash of
    its name at every step."""
    grouped = [a.css for a in cards if a.css.startswith('[class*="product')]
    others = [a for a in cards if a.css not in grouped]
    if len(grouped) > 1:
        others.insert(0, Alternative('[class*="product" i]:is(' + ", ".join(grouped) + ")"))
    else:
        others = list(cards)
    return Query(*(Alternative(f"{a.css} *", a.names) for a in others))


@lru_cache(maxsize=8)
def _card_links(ancestors: str) -> str:
    return f"a[href]:is({ancestors})"


_CARD_ANCESTORS = _ancestors(_CARDS)
CARD_LINKS = _card_links(_CARD_ANCESTORS.css)


# Next pages declared in data-* attributes, for a caller without the page's HTML text (with it,
# ``pagination.declared_next`` finds more shapes in one scan of the text).
DATA_NEXT = (
    "[data-next-url], [data-next-page-url], [data-next-href], [data-next], [data-next-page], "
    "[data-load-more-url], [data-load-more], [data-url][class*=more i], [data-href][class*=more i]"
)
_DATA_NEXT_ATTRS = (
    "data-next-url", "data-next-page-url", "data-next-href", "data-load-more-url",
    "data-load-more", "data-next", "data-next-page", "data-url", "data-href",
)  # fmt: skip
_JSON_NEXT = re.compile(
    r'"(?:next_?page_?url|next_?url|next_?page_?link|next_?link|next_?href|load_?more_?url)"'
    r'\s*:\s*"([^"\s]{1,2000})"',
    re.I,
)
_PRODUCT_TYPES = frozenset({"product", "productgroup", "individualproduct", "productmodel"})
MIN_CARD_URLS = 2  # one "card" is a page component, not a listing
# Caps that keep one page's parse result far below the 1 MB message limit (~150 B per link).
MAX_ANCHORS = 20_000
MAX_LINKS = 5_000


@dataclass(slots=True)
class Rules:
    """A source's link rules, compiled once per page (selectors) or per source (regexes)."""

    allowed: frozenset[str]
    deny: list[re.Pattern[str]] = field(default_factory=list)
    product: LinkRule | None = None
    pagination: LinkRule | None = None

    @classmethod
    def build(cls, source: Source | None, page_url: str) -> Rules:
        if source is None:
            return cls(allowed=_with_twins([host_of(page_url)]))
        if source.allowed_domains:
            allowed = frozenset(_norm_domain(d) for d in source.allowed_domains if d)
        else:  # the seeds' sites, on www. and on the bare host alike
            allowed = _with_twins([host_of(seed) for seed in source.seeds])
        return cls(
            allowed=allowed,
            deny=[p for p in (_compile(d) for d in source.links.deny) if p is not None],
            product=source.links.product,
            pagination=source.links.pagination,
        )

    def allows(self, url: str) -> bool:
        host = host_of(url)
        if host in self.allowed:
            return True
        return any(d.startswith(".") and host.endswith(d) for d in self.allowed)


def extract_links(
    tree: LexborHTMLParser,
    *,
    page_url: str,
    base_url: str,
    rules: Rules,
    forest: Forest,
    html: str | None = None,
    heads: list[LexborNode] | None = None,
    scripts: list[LexborNode] | None = None,
    markup: Markup | None = None,
) -> list[Link]:
    """``heads``: the page's ``link[rel][href]``, ``scripts``: its ``<script>`` elements,
    ``markup``: the bytes lexbor parsed, when the caller has them."""
    current = canonicalize(page_url) or page_url
    site = site_base(base_url)
    here = _listing_key(current)
    pager = Pager(tree, current, markup) if rules.pagination is None else None
    found: dict[str, LinkKind] = {}
    in_cards = {node.mem_id for node in _css(tree, _card_links(_CARD_ANCESTORS.on(markup)))}
    anchors = _anchors(tree)
    rule_hits = {
        kind: _selected(tree, rule.css)
        for kind, rule in (("product", rules.product), ("pagination", rules.pagination))
        if rule is not None and rule.css
    }
    card_urls: list[str] = []
    # Links a card would make products (their URL has no product shape), as (mem_id, url,
    # whether the URL already had another kind than page): a card known by its actions is
    # known once the pass has seen every action of the page.
    pending: list[tuple[int, str, bool]] = []

    def add(
        raw: str | None,
        hint: str | None,
        node: LexborNode | None = None,
        attrs: dict[str, str | None] | None = None,
    ) -> None:
        if not raw:
            return
        resolved = _resolve(raw, site if raw.startswith(_SITE_WIDE) else base_url)
        if resolved is None:
            return
        url, facts = resolved
        if url == current:
            return
        if facts[0] not in rules.allowed and not rules.allows(url):
            return
        if rules.deny and any(p.search(url) for p in rules.deny):
            return
        kind = _classify(url, raw, facts, here, hint, node, attrs, rules, rule_hits, pager)
        if kind is None:
            return
        if hint == "card" and kind == "product" and not facts[4]:
            card_urls.append(url)
        previous = found.get(url)
        # a card would make it a product (``_classify``'s card branch)
        cardable = kind == "page" and not facts[3] and facts[1] != here
        if node is not None and hint is None and rules.product is None and cardable:
            pending.append((node.mem_id, url, previous is not None and previous != "page"))
        if previous is None or previous == "page":
            found[url] = kind

    # One pass over the links. The common one (no rel, no action, outside the pager widgets,
    # under the default rules) is decided inline from its href's memoised meaning: a site's
    # template links (navigation, footer, facets) cost a dict hit and a few comparisons each.
    plain = pager is not None and rules.product is None
    boxed = pager.boxed if pager is not None else set()
    drops = pager.drops if pager is not None else {}
    if pager is not None:
        h_host, h_path, h_mask = pager.here.host, pager.here.path, pager.here.mask
    else:
        h_host = h_path = h_mask = ""
    h_len = len(h_path)
    allowed, deny = rules.allowed, rules.deny
    suffixes = any(d.startswith(".") for d in allowed)  # else allows() is "in allowed"
    memo = _site_hrefs(site)
    own: dict[str, Href] = {}  # this page's own hrefs (a card's ?utm_campaign=<this page>)
    marks = _MARKS
    actions: list[LexborNode] = []
    taken = 0
    for node in anchors:
        attrs = node.attributes
        if "href" not in attrs:
            continue  # an <a> without href: not a link (``_anchors``)
        taken += 1
        if taken > MAX_ANCHORS:
            break  # a hostile page has a million
        raw = attrs["href"]
        classes = attrs.get("class")
        mark = marks.get(classes, -1) if classes else 0
        if mark < 0:
            mark = _class_marks(classes or "")
        mem_id = node.mem_id
        hint = "card" if mem_id in in_cards else None
        if raw:
            entry = memo.get(raw) or own.get(raw) or _href(memo, own, raw, site, base_url, hint)
        else:
            entry = _NO_HREF
        url, a_host, w_host, path, mask, key, verdict, raw_action = entry
        if raw_action is None and hint is None:
            raw_action = _is_action(raw)  # first met in a card, where it did not matter
        if mark or raw_action:
            if mark & _MARK_CARD and node.tag == "a":
                hint = "card"  # a link whose own class says card
            elif (
                hint is None and (mark & _MARK_ACTION or raw_action) and len(actions) < MAX_ACTIONS
            ):
                actions.append(node)  # its card (if it has one) is looked for after the pass
        if not raw:
            continue
        rel = attrs.get("rel")
        if rel and not _REL_PAGINATION.isdisjoint(rel.lower().split()):
            add(raw, "rel", node, attrs)
            continue
        if mark & _MARK_ACTION:
            add(raw, "action", node, attrs)
            continue
        if not plain or mem_id in boxed:
            add(raw, hint, node, attrs)
            continue
        if url is None or url == current:
            continue
        if a_host not in allowed and not (suffixes and rules.allows(url)):
            continue
        if deny and any(p.search(url) for p in deny):
            continue
        # Pager.elsewhere, inline: a link that may be another page of this listing
        if w_host == h_host and (
            path == h_path
            or mask == h_mask
            or path in drops
            or (1 < len(path) - h_len < 32 and may_extend(h_path, path))
        ):
            add(raw, hint, node, attrs)  # the full test
            continue
        if verdict == _PRODUCT:
            if found.get(url, "page") == "page":
                found[url] = "product"
        elif verdict == _CARDABLE and key != here:  # not a filter/sort variant of this listing
            if hint == "card":
                card_urls.append(url)
                if found.get(url, "page") == "page":
                    found[url] = "product"
            else:
                previous = found.setdefault(url, "page")
                pending.append((mem_id, url, previous != "page"))
        elif verdict != _ACTION_URL:  # a state-changing action is dropped
            found.setdefault(url, "page")
    if actions and pending:
        carded = _cards_by_their_actions(actions, base_url)
        for mem_id, url, had_kind in pending:
            if mem_id in carded:  # what the pass would have done knowing the card
                card_urls.append(url)
                if not had_kind:
                    found[url] = "product"
    for node in _css(tree, "link[rel][href]") if heads is None else heads:
        attrs = node.attributes
        if not _REL_HEAD.isdisjoint((attrs.get("rel") or "").lower().split()):
            add(attrs.get("href"), "rel", node)
    if html is not None:
        for declared in declared_next(html):
            add(declared, "rel")
    else:
        for node in _css(tree, DATA_NEXT):
            attrs = node.attributes
            for name in _DATA_NEXT_ATTRS:
                value = attrs.get(name)
                if value and ("/" in value or "?" in value):
                    add(value, "rel", node)
    for url in _json_next_urls(tree, scripts):
        add(url, "rel")
    for url, is_product in _itemlist_urls(forest) if forest.has_lists else ():
        add(url, "jsonld" if is_product else None)
    # A lone card-shaped link without a product URL shape is a page component, not a listing.
    if len(set(card_urls)) < MIN_CARD_URLS and rules.product is None:
        for url in card_urls:
            if found.get(url) == "product":
                found[url] = "page"
    return [Link(url=url, kind=kind) for url, kind in found.items()][:MAX_LINKS]


def _anchors(tree: LexborHTMLParser) -> list[LexborNode]:
    """The page's ``a`` elements, in document order, or its ``a[href], area[href]`` when it has
    ``area`` elements: the caller skips an ``a`` without ``href``. lexbor's walk by tag name
    costs a fraction of a selector's (0.14 against 0.23 M instructions on a bench page, whose
    ~200 anchors all have an href), and a page without image maps needs no second tag."""
    if tree.tags("area"):
        return _css(tree, "a[href], area[href]")  # one list, in document order
    return tree.tags("a")


MAX_ACTIONS = 200  # action links looked at for cards: a listing's first 50–100 cards


def _cards_by_their_actions(actions: list[LexborNode], base_url: str) -> set[int]:
    """Links of product cards known by their actions, whatever the card's class: the nearest
    ancestor of an add-to-cart (compare, wish list…) link that holds one other URL is a card,
    and that URL (image and title link) its product. Climbs at most four levels; an ancestor
    holding several other URLs is the grid, not a card. ``actions``: the action links outside
    the cards their class already marks."""
    out: set[int] = set()
    climbed: set[int] = set()
    site = site_base(base_url)
    for node in actions:
        parent = node.parent
        for _ in range(4):
            if parent is None or parent.tag in ("body", "html") or parent.mem_id in climbed:
                break
            climbed.add(parent.mem_id)
            others: dict[str, list[int]] = {}
            for link in parent.css("a[href]"):
                link_attrs = link.attributes
                raw = link_attrs.get("href") or ""
                if link.mem_id == node.mem_id or _is_action(raw):
                    continue
                if _is_action_class(link_attrs.get("class")):
                    continue
                url = canonicalize(raw, site if raw.startswith(_SITE_WIDE) else base_url)
                if url is not None:
                    others.setdefault(url, []).append(link.mem_id)
                    if len(others) > 1:
                        break  # a second URL: the grid, not a card; the rest cannot change it
            if len(others) == 1:
                out.update(next(iter(others.values())))
                break
            if len(others) > 1:
                break
            parent = parent.parent
    return out


# Hrefs that resolve the same on every page of a site: absolute and root-relative ones.
_SITE_WIDE = ("/", "http://", "https://")


@lru_cache(maxsize=1024)
def site_base(base: str) -> str:
    """What a ``_SITE_WIDE`` href is resolved against: the base's origin, which
    ``shared.urls.canonicalize`` resolves it against anyway (an absolute href ignores its
    base, a ``//`` one keeps only its scheme). Keying its cache by the origin rather than by
    the page lets a site's navigation, footer and cards hit it on every page after the first:
    keyed by the page, every link of every page was canonicalised afresh. The base itself
    when it has no plain origin (the same test as ``canonicalize``'s)."""
    scheme, sep, rest = base.partition("://")
    if not sep or scheme.lower() not in ("http", "https"):
        return base
    netloc = rest.split("/", 1)[0].split("?", 1)[0].split("#", 1)[0]
    return f"{scheme}://{netloc}" if netloc and "@" not in netloc and "\\" not in netloc else base


_MARK_CARD, _MARK_ACTION = 1, 2
# Class lists repeat on every page of a site (navigation, card markup): their marks memoised
# in a plain dict, read inline by the pass (a call per link costs more than the lookup).
_MARKS: dict[str, int] = {}
MAX_MARKS = 4096


def _class_marks(classes: str) -> int:
    """A link's class as bits: it says card (``_MARK_CARD``), it is an action's
    (``_MARK_ACTION``)."""
    mark = (_MARK_CARD if _is_card_class(classes) else 0) | (
        _MARK_ACTION if _is_action_class(classes) else 0
    )
    if len(classes) <= CACHED_LENGTH:  # a hostile page's megabyte class is not kept
        if len(_MARKS) >= MAX_MARKS:
            _MARKS.clear()
        _MARKS[classes] = mark
    return mark


@short_key_cache(65536)
def _is_action(href: str | None) -> bool:
    return bool(href) and _ACTION.search(href) is not None  # type: ignore[arg-type]


@short_key_cache(4096)
def _is_card_class(classes: str | None) -> bool:
    if not classes:
        return False
    lowered = classes.lower()
    return any(name in lowered for name in _CARD_CLASSES)


@short_key_cache(4096)
def _is_action_class(classes: str | None) -> bool:
    return bool(classes) and _ACTION_CLASS.search(classes) is not None  # type: ignore[arg-type]


Facts = tuple[str, tuple[str, str], bool, bool, bool, tuple[str, str, str]]


Resolved = tuple[str, Facts] | None
# What an href means, as the pass reads it: (canonical URL, its host as ``Rules.allowed``
# spells it, its ``where`` (host, path, mask), its listing key, its verdict, the href says
# "action" (None: not asked yet, as for a card's link)); the URL is None when the href leads
# nowhere.
Href = tuple[str | None, str, str, str, str, tuple[str, str], int, bool | None]
# Verdicts: the link is a product page, a state-changing action, never a product, a product
# when a card of a listing holds it.
_PRODUCT, _ACTION_URL, _NEVER, _CARDABLE = range(4)
_NO_HREF: Href = (None, "", "", "", "", ("", ""), _NEVER, False)


@lru_cache(maxsize=16)
def _site_hrefs(site: str) -> dict[str, Href]:
    """A site's memo of its ``_SITE_WIDE`` hrefs, as written, to their meaning: one dict hit
    per template link (navigation, footer, facets) on every page after the first."""
    return {}


# Per site: its template and the product links of its recent pages; with 16 sites, as many
# entries as _resolve's cache holds.
MAX_SITE_HREFS = 4096


def _href(
    memo: dict[str, Href], own: dict[str, Href], raw: str, site: str, base: str, hint: str | None
) -> Href:
    """What ``raw`` means, memoised in the site's ``memo`` when it resolves the same on every
    page of the site and carries no tracking parameters, else in the page's ``own``: a card's
    ``?utm_campaign=<this page>`` link would fill the site's memo with one page's hrefs.
    Whether it says "action" is asked only of a link outside the cards (``hint``): a card's
    link never needs it, and the regex costs as much as the rest."""
    wide = raw.startswith(_SITE_WIDE)
    bare = _untracked(raw)
    resolved = _resolve(bare or raw, site if wide else base)  # the shared spelling cached
    entry: Href
    if resolved is None:
        entry = (None, *_NO_HREF[1:-1], _is_action(raw) if hint is None else None)
    else:
        url, facts = resolved
        verdict = (
            _ACTION_URL if facts[2] else _NEVER if facts[3] else _PRODUCT if facts[4] else _CARDABLE
        )
        action = _is_action(raw) if hint is None else None
        entry = (url, facts[0], *facts[5], facts[1], verdict, action)
    if wide and bare is None and len(raw) <= CACHED_LENGTH:
        if len(memo) >= MAX_SITE_HREFS:
            memo.clear()  # cheaper than an LRU's bookkeeping on every hit; refilled in a page
        memo[raw] = entry
    else:
        own[raw] = entry
    return entry


@short_key_cache(65536)
def _resolve(raw: str, base: str) -> Resolved:
    """An href's canonical URL and its facts: one cache lookup per link instead of three. An
    href with tracking parameters is resolved as the href without them, which the site's
    other pages share: a card's ``?utm_campaign=<this page>`` link costs a strip and a cache
    hit, not a canonicalisation."""
    bare = _untracked(raw)
    if bare is not None:
        return _resolve(bare, base)
    url = canonicalize(raw, base)
    return None if url is None else (url, _facts(url))


_TRACKING = re.compile("|".join(map(re.escape, (*TRACKING_PREFIXES, *TRACKING_PARAMS))), re.I)
# A query part whose key ``shared.urls.is_tracking_param`` drops (for an ASCII href).
_TRACKING_PART = re.compile(
    "(?:"
    + "|".join(
        [*(re.escape(p) + "[^=]*" for p in TRACKING_PREFIXES), *map(re.escape, TRACKING_PARAMS)]
    )
    + r")(?:=|\Z)",
    re.I,
)
# What canonicalize treats before it reads the query, or sends to w3lib: with any of these,
# dropping the tracking parameters first might change its answer.
_NOT_PLAIN = re.compile(r"[\x00- %\\#\x7f]|/\.")


def _untracked(raw: str) -> str | None:
    """``raw`` without its tracking parameters, when it has some and is plain enough that
    ``canonicalize`` makes the same URL of both (it drops them itself); else None."""
    if not raw.startswith(_SITE_WIDE) or raw.startswith("//"):
        return None  # urljoin resolves it, and keeps the base's query for an empty path
    head, mark, query = raw.partition("?")
    if not mark:
        return None
    kept = _kept_query(query)
    if kept is None or not head.isascii() or _NOT_PLAIN.search(head):
        return None
    return f"{head}?{kept}" if kept else head


@short_key_cache(4096)
def _kept_query(query: str) -> str | None:
    """The query without its tracking parameters, None when it has none or is not plain.
    Memoised: a page's cards share theirs (``utm_campaign=<this page>``)."""
    if _TRACKING.search(query) is None or not query.isascii() or _NOT_PLAIN.search(query):
        return None  # (most queries: a filter's, a sort's)
    parts = query.split("&")
    kept = [p for p in parts if p and _TRACKING_PART.match(p) is None]
    return None if len(kept) == len(parts) else "&".join(kept)


@short_key_cache(65536)
def _facts(url: str) -> Facts:
    """Page-independent facts of a canonical URL: (host, listing key, state-changing action,
    never a product, product-detail shape, ``pagination.where``)."""
    return (
        host_of(url),
        _listing_key(url),
        _ACTION.search(url) is not None,
        _NOT_PRODUCT.search(url) is not None,
        _PRODUCT_URL.search(url) is not None,
        where(url),
    )


def _classify(
    url: str,
    raw: str,
    facts: Facts,
    here: tuple[str, str],
    hint: str | None,
    node: LexborNode | None,
    attrs: dict[str, str | None] | None,
    rules: Rules,
    rule_hits: dict[str, set[int]],
    pager: Pager | None,
) -> LinkKind | None:
    mem_id = node.mem_id if node is not None else None
    if rules.product is not None and _rule_matches(
        rules.product, "product", url, raw, mem_id, rule_hits
    ):
        return "product"
    if pager is None:
        if rules.pagination is not None and _rule_matches(
            rules.pagination, "pagination", url, raw, mem_id, rule_hits
        ):
            return "pagination"
    elif pager.declared(node, url) if hint == "rel" else pager.paginates(url, node, attrs):
        return "pagination"
    if facts[2]:
        return None
    if rules.product is None and not facts[3] and hint != "action":
        if facts[4]:
            return "product"
        if hint in ("card", "jsonld") and facts[1] != here:
            return "product"  # a card of this listing (not a filter/sort variant of it)
    return "page"


def classify_url(url: str, source: Source | None) -> LinkKind:
    """The kind of a link known by its URL alone (a sitemap entry): the source's URL patterns,
    else the default product-detail shapes, else ``page``."""
    links = source.links if source is not None else None
    for rule, kind in (
        (links and links.product, "product"),
        (links and links.pagination, "pagination"),
    ):
        pattern = _compile(rule.pattern) if rule and rule.pattern else None
        if pattern is not None and pattern.search(url):
            return kind  # type: ignore[return-value]
    facts = _facts(url)
    if (links is None or links.product is None) and facts[4] and not facts[3]:
        return "product"
    return "page"


def _rule_matches(
    rule: LinkRule, kind: str, url: str, raw: str, mem_id: int | None, hits: dict[str, set[int]]
) -> bool:
    if rule.css and mem_id is not None and mem_id in hits.get(kind, ()):
        return True
    if rule.pattern:
        pattern = _compile(rule.pattern)
        return pattern is not None and bool(pattern.search(url) or pattern.search(raw))
    return False


@short_key_cache(16384)
def _listing_key(url: str) -> tuple[str, str]:
    """(origin, path without /page/N): a card links elsewhere than its listing's own path."""
    origin, _, rest = url.partition("://")[2].partition("/")
    path = rest.partition("?")[0]
    m = _PAGE_SEGMENT.search("/" + path)
    if m:
        path = path[: m.start()]
    return origin, path.rstrip("/")


def _itemlist_urls(forest: Forest) -> list[tuple[str, bool]]:
    """(url, may be a product) of ``ItemList`` members; typed non-products are plain pages."""
    out: list[tuple[str, bool]] = []
    stack: list[tuple[Any, int]] = [(r, 0) for r in forest.roots]
    while stack:
        node, depth = stack.pop()
        if depth > 16:
            continue
        if isinstance(node, list):
            stack.extend((n, depth + 1) for n in node)
        elif isinstance(node, dict):
            kinds = types_of(node)
            if "breadcrumblist" in kinds:
                continue
            if "itemlist" in kinds or "offercatalog" in kinds:
                for element in as_list(node.get("itemListElement")):
                    url, kinds = _element_url(element, forest.index)
                    if url:
                        out.append((url, not kinds or bool(kinds & _PRODUCT_TYPES)))
            stack.extend((v, depth + 1) for v in node.values() if isinstance(v, dict | list))
    return out


def _element_url(element: Any, index: dict) -> tuple[str | None, set[str]]:
    if isinstance(element, str):
        return element, set()
    if not isinstance(element, dict):
        return None, set()
    item = element.get("item")
    if isinstance(item, dict) and "@id" in item and len(item) <= 2:
        item = index.get(item["@id"], item)
    kinds = types_of(item) - {"listitem"} if isinstance(item, dict) else set()
    kinds |= types_of(element) - {"listitem"}
    for candidate in (item, element):
        if isinstance(candidate, str):
            return candidate, kinds
        if isinstance(candidate, dict):
            url = candidate.get("url")
            url = url[0] if isinstance(url, list) and url else url
            if isinstance(url, str):
                return url, kinds
    for candidate in (item, element):
        ident = candidate.get("@id") if isinstance(candidate, dict) else None
        if isinstance(ident, str) and ident.startswith("http"):
            return ident, kinds
    return None, kinds


def _json_next_urls(tree: LexborHTMLParser, scripts: list[LexborNode] | None) -> list[str]:
    out: list[str] = []
    for node in _css(tree, "script") if scripts is None else scripts:
        attrs = node.attributes
        if "src" in attrs or "ld+json" in (attrs.get("type") or ""):
            continue  # read before the text: a script's text is the costly part
        text = node.text(deep=True) or ""
        if "ext" not in text:
            continue
        for m in _JSON_NEXT.finditer(text):
            out.append(m.group(1).replace("\\/", "/").replace("\\u002F", "/"))
    return out


def _selected(tree: LexborHTMLParser, css: str) -> set[int]:
    """mem_ids of the link elements a rule's selector picks (or that sit inside its picks)."""
    out: set[int] = set()
    for node in _css(tree, css):
        if node.attributes.get("href") is not None:
            out.add(node.mem_id)
        for sub in node.css("a[href], area[href], link[href]"):
            out.add(sub.mem_id)
    return out


def _css(tree: LexborHTMLParser | LexborNode, selector: str) -> list[LexborNode]:
    try:
        return tree.css(selector)
    except Exception:  # an invalid selector from a source definition must not break parsing
        return []


@lru_cache(maxsize=1024)
def _compile(pattern: str) -> re.Pattern[str] | None:
    try:
        return re.compile(pattern)
    except (re.error, TypeError):
        return None


def _with_twins(hosts: list[str]) -> frozenset[str]:
    """The hosts and their ``www.`` twins (``shop.example`` ↔ ``www.shop.example``): a site
    links its pages on either spelling. Not for IP addresses or single-label hosts."""
    out = {h for h in hosts if h}
    for host in list(out):
        name = host.rpartition(":")[0] if ":" in host else host
        if "." not in name or name.replace(".", "").isdigit():
            continue
        out.add(host[4:] if host.startswith("www.") else "www." + host)
    return frozenset(out)


def _norm_domain(domain: str) -> str:
    domain = domain.strip().lower()
    if domain.startswith("*."):
        return domain[1:]
    if "://" in domain:
        return host_of(domain)
    host, _, port = domain.partition(":")
    if port in ("80", "443"):
        return host
    return domain
