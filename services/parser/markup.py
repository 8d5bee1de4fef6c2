"""The page's markup in ASCII lower case: substring tests on it spare the tree queries that
cannot match.

A query costs lexbor a walk of the tree per alternative, and most on an attribute name the
page never uses: ``[itemscope]`` on a page without microdata costs about 300k instructions
on a 45 KB page, twice ``[itemprop]`` where it is used, while a substring test costs 50-70k.
The test is exact for names: a tag's or an attribute's name is in the markup as it is in the
tree, only its case may differ, so a name missing from the lowered markup is on no element.
(Not for values: character references spell them in other bytes, and a common word's test
costs about what the alternative it would spare does.)
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Alternative:
    """One alternative of a selector list and the names an element it matches must carry."""

    css: str
    names: tuple[bytes, ...] = ()  # tag and attribute names, lower case


class Query:
    """A selector list that keeps, on a page, only the alternatives that can match there."""

    def __init__(self, *alternatives: Alternative) -> None:
        self.alternatives = alternatives
        self.css = ", ".join(a.css for a in alternatives)
        self._lists: dict[tuple[bool, ...], str] = {}

    def on(self, markup: Markup | None) -> str:
        """The selector list for the page (empty when no alternative can match)."""
        if markup is None:
            return self.css
        kept = tuple(all(markup.names(w) for w in a.names) for a in self.alternatives)
        css = self._lists.get(kept)
        if css is None:
            css = self._lists[kept] = ", ".join(
                a.css for a, keep in zip(self.alternatives, kept, strict=True) if keep
            )
        return css


class Markup:
    """The bytes lexbor parsed, lowered once; each name's test is made once per page."""

    __slots__ = ("_found", "lowered")

    def __init__(self, parsed: bytes) -> None:
        self.lowered = parsed.lower()
        self._found: dict[bytes, bool] = {}

    def names(self, name: bytes) -> bool:
        """Whether ``name`` (lower case) may be a tag's or an attribute's name on the page."""
        found = self._found.get(name)
        if found is None:
            found = self._found[name] = name in self.lowered
        return found
