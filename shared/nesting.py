"""Bounds on decoded documents (source definitions, API bodies, letters shown by the API).

Decoders recurse: msgspec, ``json`` and PyYAML's composer raise ``RecursionError`` near
Python's recursion limit (~1000 levels, ~490 for YAML), and whatever walks the result later
(``msgspec.convert``, jsonb encoding, the scheduler's template filling) recurses again. So a
document is refused past ``MAX_DEPTH`` levels, far beyond any real definition and far below the
interpreter's limit. The checks are iterative: they cannot themselves overflow the stack.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import yaml

MAX_DEPTH = 64
# Nodes that YAML aliases may add beyond those written out. An alias is a reference: PyYAML
# builds one shared object, but every later walk (validation, jsonb, templates) expands it,
# and nine levels of nine aliases (the 519-byte "billion laughs") expand to 10^9 nodes.
ALIAS_BUDGET = 10_000


class TooComplex(ValueError):
    """The document nests too deep or its aliases expand too far."""


def check_depth(value: Any, limit: int = MAX_DEPTH) -> None:
    """Raise ``TooComplex`` if lists/dicts in ``value`` nest deeper than ``limit``."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        children: Iterable[Any]
        if isinstance(item, dict):
            children = item.values()
        elif isinstance(item, list | tuple):
            children = item
        else:
            continue
        if depth > limit:
            raise TooComplex(f"nested deeper than {limit} levels")
        stack.extend((child, depth + 1) for child in children)


def check_yaml_graph(root: yaml.Node, limit: int = MAX_DEPTH, budget: int = ALIAS_BUDGET) -> None:
    """Raise ``TooComplex`` if the composed YAML graph nests deeper than ``limit``, contains a
    cycle (``&a [*a]``), or would expand to more than ``budget`` nodes beyond the distinct ones.

    Sizes are counted once per distinct node (memoised), so the check is linear in the text
    even for an alias bomb."""
    size: dict[int, int] = {}  # id(node) → nodes in its expansion
    depth: dict[int, int] = {}  # id(node) → levels of collections in its expansion
    open_: set[int] = set()  # on the current path: meeting one again is a cycle
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, done = stack.pop()
        key = id(node)
        children = _children(node)
        if done:
            open_.discard(key)
            size[key] = 1 + sum(size[id(c)] for c in children)
            depth[key] = (1 + max((depth[id(c)] for c in children), default=0)) if children else 0
            if depth[key] > limit:
                raise TooComplex(f"nested deeper than {limit} levels")
            continue
        if key in size:
            continue
        if key in open_:
            raise TooComplex("an alias refers to the node that contains it (a cycle)")
        open_.add(key)
        stack.append((node, True))
        stack.extend((c, False) for c in children if id(c) not in size)
        if len(open_) > limit + 1:
            raise TooComplex(f"nested deeper than {limit} levels")
    distinct = len(size)
    if size[id(root)] - distinct > budget:
        raise TooComplex(
            f"aliases expand to {size[id(root)]:,} nodes from {distinct:,} written "
            f"(at most {budget:,} more)"
        )


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.MappingNode):
        return [part for pair in node.value for part in pair]
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    return []
