"""The page's markup in ASCII lower case: substring tests on it spare the tree queries that
cannot match.

A query costs lexbor a walk of the tree per alternative, and most on an attribute name the
page never uses: ``[itemscope]`` on a page without microdata costs about 300k instructions
on a 45 KB page, twice ``[itemprop]`` where it is used, while a substring test costs 50-70k.
The test is exact for names: a tag's or an attribute's name is in the markup as it is in the
tree, only its case may differ, so a name missing from the lowered markup is on no element.

Values are exact too on a page without numeric character references (no ``&#``): a value
is then spelled in the markup as it is in the tree, for a word of ASCII letters, digits and
hyphens (no named reference spells one of those but ``&fjlig;``, hence no ``fj``). A word
missing from the markup is in no attribute's value (``[class*="sold-out" i]``), and an
attribute that must equal a value (``[itemprop="price"]``) is known by its spellings: each
occurrence of the name followed by ``=`` and the value.

A test that misses reads the whole page, so the search is the C library's ``memmem`` where
there is one (``contains``): 4-5 µs for a miss on a 45 KB page, against 12-24 µs for
CPython's ``in``, whose skip table skips little in lowered markup (mostly letters). A
product page tests 5-7 names its page lacks (``itemscope``, ``typeof``, ``sold-out``…).
"""

from __future__ import annotations

import ctypes
import operator
import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache

from selectolax.lexbor import LexborHTMLParser, LexborNode

_WORD = re.compile(rb"[a-z0-9-]+")
_MAX_SPELLINGS = 64  # occurrences of an attribute's name looked at before giving up
_MAX_HASHES = 4096  # "#"s looked at one by one before one search for "&#"


@dataclass(frozen=True, slots=True)
class Alternative:
    """One alternative of a selector list, the names an element it matches must carry, the
    words its attribute values must hold and the (attribute, value) pairs it must equal."""

    css: str
    names: tuple[bytes, ...] = ()  # tag and attribute names, lower case
    words: tuple[bytes, ...] = ()  # lower case ASCII letters, digits, hyphens; no "fj"
    values: tuple[tuple[bytes, bytes], ...] = ()  # [name="value"], both as words

    def __post_init__(self) -> None:
        for word in (*self.words, *(w for pair in self.values for w in pair)):
            if not _WORD.fullmatch(word) or b"fj" in word:
                raise ValueError(f"not a word a reference cannot spell: {word!r}")

    def may_match(self, markup: Markup) -> bool:
        for name in self.names:  # loops, not all(): a generator costs more than the tests
            if not markup.names(name):
                return False
        for word in self.words:
            if not markup.holds(word):
                return False
        return not self.values or all(markup.assigns(n, v) for n, v in self.values)


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
        kept = tuple(a.may_match(markup) for a in self.alternatives)
        css = self._lists.get(kept)
        if css is None:
            css = self._lists[kept] = ", ".join(
                a.css for a, keep in zip(self.alternatives, kept, strict=True) if keep
            )
        return css

    def select(self, tree: LexborHTMLParser, markup: Markup | None) -> list[LexborNode]:
        """What the page's selector list matches in ``tree``: nothing, without a walk, when no
        alternative can match (lexbor refuses an empty list)."""
        css = self.on(markup)
        return tree.css(css) if css else []


class Markup:
    """The bytes lexbor parsed, lowered once; each name's test is made once per page."""

    __slots__ = ("_found", "_plain", "_values", "lowered")

    def __init__(self, parsed: bytes) -> None:
        self.lowered = parsed.lower()
        self._found: dict[bytes, bool] = {}
        self._plain: bool | None = None
        self._values: dict[bytes, frozenset[bytes] | None] = {}

    def names(self, name: bytes) -> bool:
        """Whether ``name`` (lower case) may be a tag's or an attribute's name on the page."""
        found = self._found.get(name)
        if found is None:
            found = self._found[name] = contains(self.lowered, name)
        return found

    def holds(self, word: bytes) -> bool:
        """Whether ``word`` (see ``Alternative.words``) may be in an attribute's value."""
        return not self.plain or self.names(word)

    def assigns(self, name: bytes, value: bytes) -> bool:
        """Whether an attribute ``name`` may equal ``value`` (both words) on the page."""
        values = self._values.get(name, _UNREAD)
        if values is _UNREAD:
            values = self._values[name] = self._read_values(name)
        return values is None or value in values

    @property
    def plain(self) -> bool:
        """No numeric character reference: attribute values are spelled as they read."""
        if self._plain is None:
            self._plain = _no_references(self.lowered)
        return self._plain

    def _read_values(self, name: bytes) -> frozenset[bytes] | None:
        """The words the spellings of attribute ``name`` start their values with (a value
        equal to a word is spelled so); None when any value may be there."""
        if not self.names(name):
            return frozenset()
        if not self.plain:
            return None
        spelled = _spelling(name)
        lowered = self.lowered
        values: set[bytes] = set()
        at = lowered.find(name)
        for _ in range(_MAX_SPELLINGS):
            if at < 0:
                return frozenset(values)
            if (match := spelled.match(lowered, at)) is not None:
                values.add(match.group(1))
            at = lowered.find(name, at + len(name))
        return None  # too many to look at


def _memmem() -> Callable[[bytes, bytes], bool]:
    """``needle in haystack`` by the C library's ``memmem`` (glibc's searches a 2-byte hash
    table and skips most of a needle's length per step), or by ``in`` where there is none.
    Called without releasing the GIL (``PyDLL``): a search takes microseconds, less than
    a release and its reacquiring would let another thread do."""
    try:
        search = ctypes.PyDLL(None).memmem
    except (AttributeError, OSError, TypeError):  # no C library to load, or no memmem in it
        return operator.contains  # contains(haystack, needle) is needle in haystack
    search.restype = ctypes.c_void_p
    search.argtypes = (ctypes.c_char_p, ctypes.c_size_t, ctypes.c_char_p, ctypes.c_size_t)

    def contains(haystack: bytes, needle: bytes) -> bool:
        if not needle:
            return True
        return search(haystack, len(haystack), needle, len(needle)) is not None

    return contains


contains = _memmem()


def _no_references(lowered: bytes) -> bool:
    """No ``&#`` in ``lowered``. Each ``#`` is found at memchr speed and the byte before it
    read: a search for the two bytes costs ~4 instructions a byte on a page full of ``&``."""
    at = lowered.find(b"#")
    for _ in range(_MAX_HASHES):
        if at < 0:
            return True
        if lowered[at - 1 : at] == b"&":
            return False
        at = lowered.find(b"#", at + 1)
    return b"&#" not in lowered


def class_and_id(node: LexborNode) -> str:
    """An element's class and id, space-separated: where shops name what it is (``price--old``,
    ``related-products``, ``brand-logo``). Its attributes are read once."""
    return marks_of(node.attributes)


def marks_of(attrs: dict[str, str | None]) -> str:
    """``class_and_id`` of attributes already read, and the test id that React shops with
    hashed classes name their parts by (Nike's data-testid="recommendations")."""
    testid = attrs.get("data-testid")
    marks = f"{attrs.get('class') or ''} {attrs.get('id') or ''}"
    return f"{marks} {testid}" if testid else marks


_UNREAD = frozenset([b"?"])  # not a word: the attribute's values are not read yet


@lru_cache(maxsize=64)
def _spelling(name: bytes) -> re.Pattern[bytes]:
    """The attribute ``name`` given a value, as the tokenizer reads it (spaces around ``=``,
    a quote or none), and the word the value starts with."""
    return re.compile(re.escape(name) + rb"[\t\n\f\r ]*=[\t\n\f\r ]*[\"']?([a-z0-9-]*)")
