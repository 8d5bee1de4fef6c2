"""A price shown without price markup: the amount near a product page's title.

Shops on older templates style the price inline (``<span style="font:bold 27px">2320</span>
<span>元</span>``, table cells): no class or id says "price", so the visible reader's
price-marked elements miss it. The amount is then the first text after the title (200 nodes
at most) that is an amount with its currency, in its own text or with the currency in the
text beside it; failing that, the same in the few siblings just before the title (classified
ads print the price above it). Struck and old amounts are left out (the caller says which
elements those are), and so are percentages, shipping fees, unit prices and savings.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from itertools import islice

from selectolax.lexbor import LexborNode

from services.parser.prices import is_currency, parse_price, shows_money

_NEAR_TITLE = 200  # nodes read after the title, and before it
_SIBLINGS_BEFORE = 4  # siblings before the title read (text nodes count)
_MAX_TEXT = 40  # a longer text is a sentence, not a price
_SHORT_LABEL = 20
_NOT_A_PRICE_WORDS = re.compile(
    r"shipping|\bship\b|postage|delivery|versand|livraison|env[íi]o|frete|spedizione|доставк|運費|运费|送料"
    r"|\bover\b|\bab\b|\bfrom\b|save|spare|économ|ahorr|/\s*(?:kg|g|l|ml|m|st|pc)\b",
    re.I,
)


def unmarked_amount(
    title: LexborNode,
    skip: Callable[[LexborNode], bool],
    stop: int | None = None,
    olds: list[str] | None = None,
) -> str | None:
    """The shown text of the price near ``title`` ("2320 元", "Rs 23,450"), or None.
    ``skip`` names the elements whose text is no current price (struck, old, unshown);
    ``stop`` (a ``mem_id``), the element after the title where the reading ends; ``olds``
    gets the amounts passed over as labelled old prices ("MRP: ₹649", "UVP 19,99 €")."""
    for nodes, end in ((following(title, _NEAR_TITLE), stop), (_preceding(title), None)):
        shown = _first_amount(_pieces(nodes, skip, end), olds)
        if shown is not None:
            return shown
    return None


def _pieces(
    nodes: Iterator[LexborNode], skip: Callable[[LexborNode], bool], stop: int | None = None
) -> list[str]:
    """The shown texts of ``nodes`` (in document order), skipped elements left out, up to
    the node ``stop``."""
    pieces: list[str] = []
    skipped: set[int] = set()
    for node in nodes:
        if node.mem_id == stop:
            break
        parent = node.parent
        if parent is not None and parent.mem_id in skipped:
            skipped.add(node.mem_id)
        elif node.tag == "-text":
            text = (node.text_content or "").strip()
            if text:
                pieces.append(text)
        elif node.tag == "h1" and not shows_money(node.text(deep=True, separator=" ").strip()):
            break  # another product's title (an <h1> that is an amount is the price's)
        elif skip(node):
            skipped.add(node.mem_id)
    return pieces


def _first_amount(pieces: list[str], olds: list[str] | None = None) -> str | None:
    for i, text in enumerate(pieces):
        if len(text) > _MAX_TEXT or not any(c.isdigit() for c in text) or "%" in text:
            continue
        if _NOT_A_PRICE_WORDS.search(text) or (i and _labels_other_amount(pieces[i - 1])):
            continue  # a shipping fee, a unit price, a saving
        if labelled_old(text) or (
            i and len(pieces[i - 1]) <= _SHORT_LABEL and _OLD_LABEL.fullmatch(pieces[i - 1])
        ):
            if olds is not None:
                olds.append(text)
            continue  # the old price ("MRP:" then "₹649")
        shown = text if shows_money(text) else None
        if shown is None and i + 1 < len(pieces) and is_currency(pieces[i + 1]):
            shown = f"{text} {pieces[i + 1]}"
        if shown is None and i > 0 and is_currency(pieces[i - 1]):
            shown = f"{pieces[i - 1]} {text}"
        price = parse_price(shown) if shown else None
        if shown and price is not None and price > 0:
            return shown
    return None


# Labels of the price before a reduction, as shops print them before the amount: India's MRP,
# the manufacturer's UVP/RRP/MSRP, "was", "statt", "de" (Brazil's "de R$ 2.199 por …").
_OLD_LABEL_WORDS = (
    r"m\.?r\.?p\.?|rrp|uvp|msrp|list price|was|statt|regular price|reg\.|normalpreis"
    r"|prix de référence|prix conseillé|precio anterior|antes|de|старая цена|было"
    r"|通常価格|定価|参考価格|希望小売価格"
)
_OLD_LABEL = re.compile(rf"\s*(?:{_OLD_LABEL_WORDS})\s*[:：]?\s*", re.I)
_OLD_LABEL_START = re.compile(
    rf"\s*(?:{_OLD_LABEL_WORDS})(?![^\W\d_])\s*[:：]?\s*(?=\D{{0,6}}\d)", re.I
)


def labelled_old(text: str) -> bool:
    """A text that starts with an old price's label and then its amount ("MRP Rs. 1,599",
    "UVP: 19,99 €")."""
    return _OLD_LABEL_START.match(text) is not None


def _labels_other_amount(before: str) -> bool:
    """The text before an amount labels it as no price: a short label ("Shipping costs:",
    "Versandkosten ab") or a longer text's last word ("… on orders over"). A longer text's
    other words are about something else ("Similar products from TECNO")."""
    if len(before) <= _SHORT_LABEL:
        return _NOT_A_PRICE_WORDS.search(before) is not None
    words = before.split()
    return bool(words) and _NOT_A_PRICE_WORDS.search(words[-1]) is not None


def _preceding(node: LexborNode) -> Iterator[LexborNode]:
    """The subtrees of the few siblings just before ``node``, in document order, at most
    ``_NEAR_TITLE`` nodes (a mega menu before the title is cut short)."""
    chunks: list[list[LexborNode]] = []
    budget = _NEAR_TITLE
    sibling = node.prev
    while sibling is not None and len(chunks) < _SIBLINGS_BEFORE and budget > 0:
        chunk = list(islice(sibling.traverse(include_text=True), budget))
        budget -= len(chunk)
        chunks.append(chunk)
        sibling = sibling.prev
    for chunk in reversed(chunks):
        yield from chunk


def following(node: LexborNode, limit: int) -> Iterator[LexborNode]:
    """The nodes after ``node`` (not inside it) in document order, at most ``limit``."""
    count = 0
    current: LexborNode | None = node
    while current is not None:
        after = current.next
        while after is None:
            current = current.parent
            if current is None:
                return
            after = current.next
        current = after
        for sub in after.traverse(include_text=True):
            yield sub
            count += 1
            if count >= limit:
                return
