"""Is this page a listing? Then it has no product of its own, whatever its cards look like.

The last page of a category can hold one or two product cards, each with a name, a price and
an add-to-cart button: without this check the visible-layout fallback reads the category's
``<h1>`` and the first card's price as a product keyed by the listing URL, which then enters
the catalog and counts misses. Two signals say "listing":

- the page was reached as pagination (the link that led here was classified ``pagination``,
  or the source's pagination pattern matches its URL);
- every buy control on the page sits in a card that links to another page: the nearest
  ancestor of the control that holds a link wrapping an image or a title to another URL.
  A product page's buy box links to nothing but its own page (size guides and delivery
  notes are plain text links, not image or title links).
"""

from __future__ import annotations

import re

from selectolax.lexbor import LexborNode

from schemas.source import Source
from shared.urls import canonicalize

_CLIMB = 6  # ancestors looked at from a buy control; a card is small
_NOT_A_PAGE = re.compile(
    r"^(?:#|javascript:|mailto:|tel:)|\.(?:jpe?g|png|gif|webp|avif|svg)(?:[?#]|$)", re.I
)
_TITLE_TAGS = ("h2", "h3", "h4", "h5", "h6")
_TITLE_MARKS = re.compile(r"name|title|heading", re.I)


def reached_as_listing(url: str, kind: str | None, source: Source | None) -> bool:
    """The page was reached as a listing's page: by a pagination link or by the source's
    pagination URL pattern."""
    if kind == "pagination":
        return True
    rule = source.links.pagination if source is not None else None
    if rule is None or not rule.pattern:
        return False
    try:
        return re.search(rule.pattern, url) is not None
    except re.error:
        return False


def cards_link_elsewhere(
    buttons: list[LexborNode],
    page_urls: set[str],
    base: str,
    every: list[LexborNode] | None = None,
) -> bool:
    """Every buy control sits in a card whose image or title links to another page.
    ``every``: all the page's buy controls, when ``buttons`` are some of them (a level that
    holds several of them is a grid, not a card)."""
    if not buttons:
        return False
    ids = {b.mem_id for b in every or buttons}
    return all(_in_card(button, ids, page_urls, base) for button in buttons)


def _in_card(button: LexborNode, buttons: set[int], page_urls: set[str], base: str) -> bool:
    parent = button.parent
    for _ in range(_CLIMB):
        if parent is None or parent.tag in ("body", "html", "main"):
            return False
        links = parent.css("a[href]")
        if links:
            others = [link for link in links if _elsewhere(link, page_urls, base)]
            if any(_is_card_link(link) for link in others):
                # a grid holds several buy controls: the card is the level below it
                inside = sum(1 for node in parent.traverse() if node.mem_id in buttons)
                return inside <= 1
        parent = parent.parent
    return False


def _elsewhere(link: LexborNode, page_urls: set[str], base: str) -> bool:
    href = (link.attributes.get("href") or "").strip()
    if not href or _NOT_A_PAGE.search(href):
        return False
    url = canonicalize(href, base)
    return url is not None and url not in page_urls


def _is_card_link(link: LexborNode) -> bool:
    """A link that wraps the card's image or title, or sits in its title."""
    if link.css_first("img, picture, h2, h3, h4, h5, h6") is not None:
        return True
    parent = link.parent
    for _ in range(2):
        if parent is None:
            return False
        if parent.tag in _TITLE_TAGS:
            return True
        parent = parent.parent
    marks = f"{link.attributes.get('class') or ''} {link.attributes.get('id') or ''}"
    return _TITLE_MARKS.search(marks) is not None
