"""Microdata (``itemscope``/``itemprop``) and RDFa (``typeof``/``property``) → JSON-LD-shaped nodes.

Both syntaxes embed the same schema.org items in attributes, so one walker serves them: every
scope element becomes a dict with ``@type`` and its properties as lists of values, a property
that is itself a scope nests the child dict, and scopes that are nobody's property are roots.
The product logic then reads these nodes exactly like JSON-LD. The tree is walked with two
selector queries; a property finds its owner by climbing to the nearest scope ancestor.
"""

from __future__ import annotations

import re
from typing import Any

from selectolax.lexbor import LexborHTMLParser, LexborNode

from services.parser.jsonld import Forest
from services.parser.markup import Markup, class_and_id
from shared.caching import short_key_cache

_URL_ATTR = {
    "a": "href",
    "area": "href",
    "link": "href",
    "img": "src",
    "audio": "src",
    "video": "src",
    "source": "src",
    "embed": "src",
    "iframe": "src",
    "track": "src",
    "object": "data",
    "data": "value",
    "meter": "value",
}
# Containers of other products' tiles: a scope inside one is marked ``TILE``, and the product
# logic passes it over when one unmarked product remains (rule 1: recommendation tiles do not
# make a product page).
_TILE_CONTAINER = re.compile(
    r"recommend|related|cross-?sell|up-?sell|also-?(?:bought|viewed|like|purchased)|recently|similar"
    r"|you-?may|suggest|carousel|accessor"
    # the slider libraries' own classes, which recommendation rows carry whatever the shop
    # names them (Swiper, Slick, Splide, Glide, Flickity, bxSlider; Owl's "owl-carousel" above)
    r"|swiper|slick-(?:slider|track|slide)|splide|glide__|flickity|bx-?slider|bx-wrapper|slider",
    re.I,
)
TILE = "@tile"
_TILE_CLIMB = 12  # ancestors looked at
# RDFa in <head> that belongs to OpenGraph/Twitter, not to schema.org items.
_META_PREFIXES = ("og:", "product:", "fb:", "twitter:", "article:", "al:")


def extract_microdata(tree: LexborHTMLParser, markup: Markup | None = None) -> Forest:
    """``markup``: the page's, when the caller has it (a page without the scope attribute's
    name is not walked)."""
    return _walk(tree, markup, scope="itemscope", prop="itemprop", kind="itemtype", ident="itemid")


def extract_rdfa(tree: LexborHTMLParser, markup: Markup | None = None) -> Forest:
    return _walk(tree, markup, scope="typeof", prop="property", kind="typeof", ident="resource")


def _walk(
    tree: LexborHTMLParser,
    markup: Markup | None,
    *,
    scope: str,
    prop: str,
    kind: str,
    ident: str,
) -> Forest:
    forest = Forest()
    if markup is not None and not markup.names(scope.encode()):
        return forest
    scope_nodes = tree.css(f"[{scope}]")
    if not scope_nodes:
        return forest
    items: dict[int, dict[str, Any]] = {}
    owned: set[int] = set()
    for node in scope_nodes:
        attrs = node.attributes
        item: dict[str, Any] = {"@type": (attrs.get(kind) or "").split()}
        if prop not in attrs and in_tile_container(node):  # only a root can be a tile
            item[TILE] = True
        node_id = attrs.get(ident)
        if node_id:
            item["@id"] = node_id
            forest.index.setdefault(node_id, item)
        items[node.mem_id] = item
    for node in tree.css(f"[{prop}]"):
        attrs = node.attributes
        names = [n for n in map(_prop_name, (attrs.get(prop) or "").split()) if n]
        if not names:
            continue
        owner = _owner(node, scope)
        if owner is None:
            continue
        if scope in attrs:
            value: Any = items.get(node.mem_id)
            owned.add(node.mem_id)
        else:
            value = _value(node, attrs, rdfa=scope == "typeof")
        if value is None:
            continue
        target = items.get(owner.mem_id)
        if target is None:
            continue
        for name in names:
            target.setdefault(name, []).append(value)
    forest.roots = [item for mem_id, item in items.items() if mem_id not in owned]
    return forest


def _prop_name(raw: str) -> str | None:
    if raw.startswith(_META_PREFIXES):
        return None
    return raw.rstrip("/").rsplit("/", 1)[-1].rsplit(":", 1)[-1].rsplit("#", 1)[-1]


def in_tile_container(node: LexborNode, memo: dict[int, bool] | None = None) -> bool:
    """Inside a recommendations/related/carousel container (``_TILE_CLIMB`` levels up at
    most). ``memo`` keeps, per element, whether it is such a container itself, for a caller
    that asks about many nodes of one tree. (Not the answer per ancestor: that depends on how
    far below it the climb started, so one node's answer would have been another's.)"""
    parent = node.parent
    for _ in range(_TILE_CLIMB):
        if parent is None or not parent.is_element_node:
            return False
        mem_id = parent.mem_id
        tile = memo.get(mem_id) if memo is not None else None
        if tile is None:
            tile = _tile_marks(class_and_id(parent))
            if memo is not None:
                memo[mem_id] = tile
        if tile:
            return True
        parent = parent.parent
    return False


@short_key_cache(4096)  # a site's containers carry a few hundred distinct classes
def _tile_marks(marks: str) -> bool:
    return bool(marks.strip()) and _TILE_CONTAINER.search(marks) is not None


def _owner(node: LexborNode, scope: str) -> LexborNode | None:
    parent = node.parent
    while parent is not None:
        if parent.is_element_node and scope in parent.attrs:
            return parent
        parent = parent.parent
    return None


def _value(node: LexborNode, attrs: dict[str, str | None], *, rdfa: bool) -> str | None:
    content = attrs.get("content")
    if content is not None:
        return content.strip()
    tag = node.tag or ""
    if rdfa:
        for name in ("href", "src", "resource"):
            if attrs.get(name):
                return (attrs[name] or "").strip()
    else:
        url_attr = _URL_ATTR.get(tag)
        if url_attr:
            return (attrs.get(url_attr) or "").strip() or None
        if tag == "time" and attrs.get("datetime"):
            return (attrs.get("datetime") or "").strip()
    text = node.text(deep=True, separator=" ")
    return " ".join(text.split()) if text else None
