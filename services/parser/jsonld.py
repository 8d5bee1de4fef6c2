"""JSON-LD blocks → a node forest, repairing the breakage browsers and search engines tolerate.

Each ``<script type="application/ld+json">`` is decoded strictly first (msgspec, fast); a block
that fails goes through ``repair``: HTML comment and CDATA wrappers, ``/* */`` and ``//``
comments, trailing commas, raw control characters inside strings, invalid ``\\'`` escapes,
HTML-escaped JSON and several top-level values in one block. What still fails is counted and
skipped, never fatal. ``@graph`` members become roots, and every node with an ``@id`` and
content is indexed so references (``{"@id": "#brand"}``) can be resolved.
"""

from __future__ import annotations

import html
import json
import re
from dataclasses import dataclass, field
from typing import Any

import msgspec
from selectolax.lexbor import LexborHTMLParser, LexborNode

SELECTOR = 'script[type*="ld+json" i]'
MAX_DEPTH = 64

_WRAPPERS = re.compile(r"^\s*(?:<!--|//\s*<!\[CDATA\[|/\*\s*<!\[CDATA\[\s*\*/|<!\[CDATA\[)\s*")
_TRAILERS = re.compile(r"\s*(?:-->|//\s*\]\]>|/\*\s*\]\]>\s*\*/|\]\]>)\s*$")


@dataclass(slots=True)
class Forest:
    """Top-level JSON-LD nodes of a page and an ``@id`` index over all nodes."""

    roots: list[dict[str, Any]] = field(default_factory=list)
    index: dict[str, dict[str, Any]] = field(default_factory=dict)
    blocks: int = 0
    broken: int = 0
    has_lists: bool = False  # some block mentions an ItemList/OfferCatalog (link discovery)

    @property
    def unparseable(self) -> bool:
        """Every block the page has was broken beyond repair."""
        return self.blocks > 0 and self.broken == self.blocks


def extract(tree: LexborHTMLParser, scripts: list[LexborNode] | None = None) -> Forest:
    """The page's JSON-LD forest; ``scripts``: the page's ``<script>`` elements when the
    caller has them (one walk of the tree for every reader of scripts)."""
    forest = Forest()
    blocks = tree.css(SELECTOR) if scripts is None else [n for n in scripts if _is_jsonld(n)]
    for node in blocks:
        forest.blocks += 1
        text = node.text(deep=True) or ""
        if "ItemList" in text or "OfferCatalog" in text:
            forest.has_lists = True
        data = loads(text)
        if data is None:
            forest.broken += 1
            continue
        for item in data if isinstance(data, list) else [data]:
            _add_root(forest, item)
    for root in forest.roots:
        _index(root, forest.index, 0)
    return forest


def _is_jsonld(script: LexborNode) -> bool:
    """``SELECTOR``'s test on a ``<script>`` element."""
    return "ld+json" in (script.attributes.get("type") or "").lower()


def _add_root(forest: Forest, item: Any) -> None:
    if isinstance(item, list):
        for sub in item:
            _add_root(forest, sub)
    elif isinstance(item, dict):
        graph = item.get("@graph")
        if graph is not None:
            for sub in graph if isinstance(graph, list) else [graph]:
                _add_root(forest, sub)
            if not any(k not in ("@context", "@graph", "@id") for k in item):
                return
        forest.roots.append(item)


def _index(value: Any, index: dict[str, dict[str, Any]], depth: int) -> None:
    if depth > MAX_DEPTH:
        return
    if isinstance(value, dict):
        node_id = value.get("@id")
        if isinstance(node_id, str) and len(value) > 1:
            known = index.get(node_id)
            # The richest node wins: a stub that only names a @type is no description.
            if known is None or len(value) > len(known):
                index[node_id] = value
        for sub in value.values():
            if isinstance(sub, dict | list):
                _index(sub, index, depth + 1)
    elif isinstance(value, list):
        for sub in value:
            _index(sub, index, depth + 1)


def loads(text: str) -> Any | None:
    """Decode one JSON-LD block, repairing it if needed; None when beyond repair."""
    text = text.strip()
    if not text:
        return None
    try:
        return msgspec.json.decode(text)
    except (msgspec.DecodeError, RecursionError):
        pass
    repaired = repair(text)
    for candidate in (repaired, f"[{repaired}]"):
        try:
            return json.loads(candidate, strict=False)
        except (ValueError, RecursionError):
            continue
    return None


def repair(text: str) -> str:
    """Rewrite tolerated-but-invalid JSON into JSON (one pass, string-aware)."""
    text = _TRAILERS.sub("", _WRAPPERS.sub("", text))
    if text.startswith(("{&quot;", "[&quot;", "{ &quot;")):
        text = html.unescape(text)
    out: list[str] = []
    i, n = 0, len(text)
    in_string = False
    while i < n:
        c = text[i]
        if in_string:
            if c == "\\":
                nxt = text[i + 1 : i + 2]
                if nxt == "'":
                    out.append("'")
                elif nxt and nxt in '"\\/bfnrtu':
                    out.append(c + nxt)
                else:
                    out.append("\\\\" + nxt)
                i += 2
                continue
            if c == '"':
                in_string = False
            elif c == "\n":
                c = "\\n"
            elif c == "\r":
                c = "\\r"
            elif c == "\t":
                c = "\\t"
            elif c < " ":
                c = ""
            out.append(c)
            i += 1
            continue
        if c == '"':
            in_string = True
        elif c == "/" and text.startswith("//", i):
            end = text.find("\n", i)
            i = n if end < 0 else end
            continue
        elif c == "/" and text.startswith("/*", i):
            end = text.find("*/", i + 2)
            i = n if end < 0 else end + 2
            continue
        elif c in "}]":
            _drop_trailing_comma(out)
        elif c == "{" and out and _last_significant(out) == "}":
            out.append(",")  # "{...}{...}": several values; loads() wraps them in a list
        out.append(c)
        i += 1
    result = "".join(out).strip()
    return result[:-1].rstrip() if result.endswith(";") else result


def _last_significant(out: list[str]) -> str:
    for chunk in reversed(out):
        stripped = chunk.strip()
        if stripped:
            return stripped[-1]
    return ""


def _drop_trailing_comma(out: list[str]) -> None:
    j = len(out) - 1
    while j >= 0 and not out[j].strip():
        j -= 1
    if j >= 0 and out[j] == ",":
        del out[j]


def types_of(node: Any) -> set[str]:
    """``@type`` as a set of bare names: ``"http://schema.org/Product"`` → ``{"product"}``."""
    if not isinstance(node, dict):
        return set()
    raw = node.get("@type") or node.get("type")
    if isinstance(raw, str) and raw.isalpha():  # the common case: "Product"
        return {raw.lower()}
    values = raw if isinstance(raw, list) else [raw]
    out = set()
    for value in values:
        if isinstance(value, str) and value:
            out.add(
                value.rstrip("/").rsplit("/", 1)[-1].rsplit(":", 1)[-1].rsplit("#", 1)[-1].lower()
            )
    return out


def resolve(value: Any, index: dict[str, dict[str, Any]]) -> Any:
    """Follow an ``{"@id": …}`` reference to the indexed node it names."""
    if isinstance(value, dict) and len(value) <= 2 and "@id" in value:
        target = index.get(value["@id"]) if isinstance(value["@id"], str) else None
        if target is not None:
            return target
    return value


def as_list(value: object) -> list[Any]:
    """A structured-data value as a list: a node may hold one value or many."""
    if value is None:
        return []
    return value if isinstance(value, list) else [value]


def first(value: object) -> Any:
    """The first of a value that may be a list."""
    if isinstance(value, list):
        return value[0] if value else None
    return value
