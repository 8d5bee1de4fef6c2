"""``render: auto``: whether a fetched document needs a browser, and what was learnt per domain.

A document "shows a product" when it carries product data (JSON-LD or microdata of a Product or
an Offer, OpenGraph product tags) and "shows a listing" when it has links beyond its header,
navigation and footer. A document with neither is a shell that scripts fill in: it is rendered.
When rendering such a shell found what the document lacked, the domain is remembered as one
that needs a browser, and its pages are rendered without asking for ``ttl`` seconds.

The test is deliberately coarse and cheap (one parse, a handful of selectors): the parser is
another service, and a wrong "plain" costs a page that parses as it would have without
``auto``, which the parser's three states already treat as unknown, not as a delisting.
"""

from __future__ import annotations

import time

from selectolax.lexbor import LexborHTMLParser

from shared.lru import LRU

LISTING_LINKS = 4  # links in a page's body (outside header, nav, footer) that make a listing
DOMAIN_TTL = 24 * 3600.0
_PRODUCT_TYPES = ("product", "offer", "productgroup")


def shows_content(html: bytes | bytearray | str) -> bool:
    """Whether the document shows a product or a listing without running its scripts."""
    tree = LexborHTMLParser(bytes(html) if isinstance(html, bytearray) else html)
    for script in tree.css('script[type="application/ld+json"]'):
        text = (script.text() or "").lower()
        if any(f'"{kind}"' in text for kind in _PRODUCT_TYPES):
            return True
    for node in tree.css("[itemtype]"):
        kind = (node.attributes.get("itemtype") or "").rstrip("/").rsplit("/", 1)[-1].lower()
        if kind in _PRODUCT_TYPES:
            return True
    for meta in tree.css("meta[property]"):
        prop = (meta.attributes.get("property") or "").lower()
        content = (meta.attributes.get("content") or "").lower()
        if prop == "product:price:amount" or (prop == "og:type" and content == "product"):
            return True
    body = tree.body
    if body is None:
        return False
    for chrome in body.css("header, nav, footer, script, template"):
        chrome.decompose()
    return len(body.css("a[href]")) >= LISTING_LINKS


class Learnt:
    """Domains found to need a browser, each for ``ttl`` seconds (per renderer replica: the
    first page of a domain at each replica is judged on its own)."""

    def __init__(self, ttl: float = DOMAIN_TTL, size: int = 10_000) -> None:
        self.ttl = ttl
        self._until: LRU[str, float] = LRU(size)

    def needs_browser(self, key: str) -> bool:
        until = self._until.get(key)
        return until is not None and until > time.monotonic()

    def remember(self, key: str) -> None:
        self._until.put(key, time.monotonic() + self.ttl)
