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
  notes are plain text links, not image or title links), and a block that holds the page's
  title and then the buy control is the product's own, whatever else it links to (colour
  swatches, the seller's other ads). Its brand's logo and its seller's name link elsewhere
  too, and are no card's image or title.
"""

from __future__ import annotations

import re

from selectolax.lexbor import LexborNode

from schemas.source import Source
from services.parser.markup import class_and_id
from services.parser.microdata import in_tile_container
from shared.urls import canonicalize

_CLIMB = 6  # ancestors looked at from a buy control; a card is small
_ROW_CLIMB = 3  # levels above a card looked at for its siblings
# A card holds a few links (image, title, actions, swatches); a level with more is a section
# of the page. Bounds the row check's climb, which reads every link of each level.
_ROW_CARD_LINKS = 40
_ROW_LINKS = 200  # links of a level read for its cards: a row shows itself in its first ones
_NOT_A_PAGE = re.compile(
    r"^(?:#|javascript:|mailto:|tel:)|\.(?:jpe?g|png|gif|webp|avif|svg)(?:[?#]|$)", re.I
)
_TITLE_TAGS = ("h2", "h3", "h4", "h5", "h6")
_TITLE_MARKS = re.compile(r"name|title|heading", re.I)
# A link to the product's brand or seller (its logo, "sold by <seller>"): product pages show
# them in their buy box, and they are no card's image or title.
_OWNER_MARKS = re.compile(
    r"brand|manufacturer|logo|vendor|seller|merchant|marketplace|marque|hersteller", re.I
)


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


# A basket's and a checkout's path segments, in the languages of the shops we meet: a link
# there puts something in the basket (``links`` classifies such links as actions too).
CART_PATHS = r"cart|basket|checkout|warenkorb|panier|carrito|carrello|winkelwagen|koszyk|kosik"
# A shop's own pages that show products without being any one product's: the basket, the
# checkout, the wish list, the comparison, the customer's account and its login, search
# results, a product's reviews (path segments in the languages of the shops we meet), and
# the category, search and brand routes of OpenCart, PrestaShop and Magento.
_SHOP_PAGE = re.compile(
    rf"/(?:{CART_PATHS}|bag|wishlists?|wish-list|compare|comparison|login|logout"
    r"|signin|sign-in|register|account|my-account|kasse|merkzettel|wunschliste"
    r"|commande|favoris|favoritos|preferiti|schowek|korzina|cesta|sacola|vergelijken"
    r"|product-reviews)(?:/|$|\?|\.)"
    # a search page is the path's last segment (OpenSooq's items live under /search/<id>)
    r"|/(?:search|suche|recherche|busca|buscar|ricerca|szukaj)/?(?:$|\?)"
    r"|/catalogsearch/|/catalog/category/view"
    # a Shopify collection (its products live at /products/<handle>, or under it)
    r"|/collections/[^/?#]+/?(?:$|\?)"
    r"|[?&]route=(?:checkout|account)/|[?&]route=product/(?:compare|category|search|manufacturer)"
    r"|[?&]controller=(?:cart|order|my-account|authentication|products-comparison|category"
    r"|search|manufacturer)(?:&|$)",
    re.I,
)


def is_shop_page(url: str) -> bool:
    """``url`` is a shop's basket, checkout, wish list, comparison, account, login, search,
    reviews or category page: no product's own, however many products, prices and buttons
    it shows."""
    return _SHOP_PAGE.search(url.partition("#")[0]) is not None


def links_elsewhere(control: LexborNode, page_urls: set[str], base: str) -> bool:
    """A buy control that is a link to another page (a promotion's or a gift guide's "Buy
    now", a card's "Select options"): the way to a product's page, not a buy box. A link
    that puts the product in the basket (``/cart/add?…``, ``?add-to-cart=42``) is one."""
    if control.tag != "a":
        return False
    url = _other_url(control, page_urls, base)
    return url is not None and _ADDS.search(url) is None


_ADDS = re.compile(  # and an auction's bid, a classified ad's offer or reply to its seller
    rf"add[-_]?to[-_]?(?:cart|basket|bag)|/(?:{CART_PATHS}"
    r"|bid|bids|place-bid|make-offer|reply|contact)(?:/|$|\?)"
    r"|[?&](?:add-to-cart|action=(?:add|buy|bid)|buy(?:_now)?|bid)=?"
    r"|^(?:https?:)?//(?:cart|basket|checkout)\.",  # the shop's cart host (JD's cart.jd.com)
    re.I,
)


def cards_link_elsewhere(
    buttons: list[LexborNode],
    page_urls: set[str],
    base: str,
    *,
    every: list[LexborNode] | None = None,
    title: LexborNode | None = None,
    row: bool = False,
) -> bool:
    """Every buy control sits in a card whose image or title links to another page.
    ``every``: all the page's buy controls, when ``buttons`` are some of them (a level that
    holds several of them is a grid, not a card). ``title``: the page's title (its
    ``<h1>``); a level that holds it and the control after it is the product's own block,
    whatever it links to (its colour swatches, the seller's other ads), not a card.
    ``row``: the card must also be one of a row (``_in_row``), for a caller whose node may
    sit in a block of the product's own that links elsewhere."""
    if not buttons:
        return False
    ids = {b.mem_id for b in every or buttons}
    above_title: set[int] = set()
    parent = title.parent if title is not None else None
    while parent is not None:
        above_title.add(parent.mem_id)
        parent = parent.parent
    title_id = title.mem_id if title is not None else None
    memo: dict[int, bool] = {}  # whether an element is a recommendations container
    return all(
        _in_card(button, ids, page_urls, base, (title_id, above_title), row, memo)
        for button in buttons
    )


def _in_card(
    button: LexborNode,
    buttons: set[int],
    page_urls: set[str],
    base: str,
    title: tuple[int | None, set[int]],
    row: bool = False,
    memo: dict[int, bool] | None = None,
) -> bool:
    parent = button.parent
    before_title = False  # the control comes before the title (a header's mini basket)
    for _ in range(_CLIMB):
        if parent is None or parent.tag in ("body", "html", "main"):
            return False
        if parent.mem_id in title[1] and not before_title:
            # The lowest block that holds the title: the title, then the control, is the
            # product's own block, and so is every block above it. Asked before the block's
            # links are read: a card below it would have been found on the way up.
            if _follows(parent, title[0], button.mem_id):
                return False
            before_title = True
        links = parent.css("a[href]")
        if row and len(links) > _ROW_CARD_LINKS:
            return False  # climbed past any card into a page's section
        # A recommendation row's tiles are no card of this control's (not in such a row
        # itself): a climb past a buy box whose title sits apart (SAP Spartacus puts its <h1>
        # in the breadcrumb's slot) reaches the layout that holds the rows.
        if any(
            _elsewhere(link, page_urls, base)
            and _is_card_link(link)
            and not in_tile_container(link, memo)
            for link in links
        ):
            # a grid holds several buy controls: the card is the level below it
            held = [node for node in parent.traverse() if node.mem_id in buttons]
            if len(held) > 1 and len(outermost(held)) == 1 and _titled(links, page_urls, base):
                held = held[:1]  # a card's worded button in its worded wrapper: one control
            return len(held) <= 1 and (not row or _in_row(parent, page_urls, base, title[1]))
        parent = parent.parent
    return False


def outermost(nodes: list[LexborNode]) -> list[LexborNode]:
    """A worded button inside a worded wrapper is one control: the nodes not held, within
    three levels, by another of them."""
    ids = {n.mem_id for n in nodes}
    out = []
    for node in nodes:
        parent = node.parent
        inner = False
        for _ in range(3):
            if parent is None:
                break
            if parent.mem_id in ids:
                inner = True
                break
            parent = parent.parent
        if not inner:
            out.append(node)
    return out


def _titled(links: list[LexborNode], page_urls: set[str], base: str) -> bool:
    """One of ``links`` is a title's (in an ``h2``–``h6``) and leads to another page: a
    product card's, not a buy box's image link to a warranty's terms."""
    return any(_in_title(link) and _elsewhere(link, page_urls, base) for link in links)


def _follows(block: LexborNode, first: int | None, then: int) -> bool:
    """In ``block``, the node ``then`` comes after the node ``first`` (a header's mini
    basket comes before the listing's title)."""
    for node in block.traverse():
        if node.mem_id == first:
            return True
        if node.mem_id == then:
            return False
    return False


def _in_row(card: LexborNode, page_urls: set[str], base: str, above_title: set[int]) -> bool:
    """The card is one of a row: a level above it (``_ROW_CLIMB`` at most) has two children
    or more shaped like the card's own branch (same tag and class) whose card links lead to
    distinct other pages; the child that holds the page's title is not counted. OpenCart's
    related row sits beside the product's own block, under one that holds both; a product's
    facts block beside one link to another page (a gallery, its brand's range), or beside
    other kinds of blocks with cards, is no row."""
    branch, level = card, card.parent
    for _ in range(_ROW_CLIMB):
        if level is None or level.tag in ("body", "html"):
            return False
        shape = (branch.tag, branch.attributes.get("class"))
        level_id = level.mem_id
        seen: dict[int, str] = {}  # a child of the level -> the other page its cards lead to
        for link in level.css("a[href]")[:_ROW_LINKS]:
            child = link
            while child.parent is not None and child.parent.mem_id != level_id:
                child = child.parent
            if child.mem_id in seen or child.mem_id in above_title:
                continue
            if (child.tag, child.attributes.get("class")) != shape:
                continue
            url = _other_url(link, page_urls, base)
            if url is not None and _is_card_link(link):
                seen[child.mem_id] = url
                if len(set(seen.values())) > 1:
                    return True
        branch, level = level, level.parent
    return False


def _elsewhere(link: LexborNode, page_urls: set[str], base: str) -> bool:
    return _other_url(link, page_urls, base) is not None


def _other_url(link: LexborNode, page_urls: set[str], base: str) -> str | None:
    """The page ``link`` leads to, when it is another page than this one."""
    href = (link.attributes.get("href") or "").strip()
    if not href or _NOT_A_PAGE.search(href):
        return None
    url = canonicalize(href, base)
    return url if url is not None and url not in page_urls else None


def _is_card_link(link: LexborNode) -> bool:
    """A link that wraps the card's image or title, or sits in its title; not one marked as
    the brand's or the seller's (``_OWNER_MARKS``)."""
    image = link.css_first("img, picture, h2, h3, h4, h5, h6")
    if image is not None:
        if image.tag == "img" and _BUTTON_IMAGE.search(image.attributes.get("src") or ""):
            return False  # a button drawn as an image (osCommerce's button_reviews.gif)
        return not (_owner_link(link) or (image.tag == "img" and _owner_link(image)))
    if _in_title(link):
        return True
    marks = class_and_id(link)
    return _TITLE_MARKS.search(marks) is not None and _OWNER_MARKS.search(marks) is None


# The file of a button's image: osCommerce's and Zen Cart's includes/…/buttons/button_*.gif.
_BUTTON_IMAGE = re.compile(r"/buttons?/|/button_[^/]*$|/btn_[^/]*$", re.I)


def _in_title(link: LexborNode) -> bool:
    """The link sits in an ``h2``–``h6`` (two levels up at most): a card's title."""
    parent = link.parent
    for _ in range(2):
        if parent is None:
            return False
        if parent.tag in _TITLE_TAGS:
            return True
        parent = parent.parent
    return False


def _owner_link(node: LexborNode) -> bool:
    return _OWNER_MARKS.search(class_and_id(node)) is not None
