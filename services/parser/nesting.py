"""The guard in front of lexbor against hostile nesting.

lexbor builds deeply nested trees in quadratic time (each start tag walks the stack of open
elements: 20,000 nested divs take 0.3 s, 100,000 about 100 s). Real pages nest a few dozen
levels; a page past ``MAX_NESTING`` is hostile or broken and is not parsed.

For pages over ``CHECK_FROM`` (smaller ones cannot nest deep enough to matter):

1. a count in which every closing tag closes one element (void elements counted as openings):
   one pass of a regex and a loop over one-character strings;
2. the count can be wrong both ways. It finds deep a page of implied closings (``<li>`` and
   ``<p>`` never closed), so a page it finds deep goes to a model of lexbor's stack. And it
   takes a closing tag for one even when lexbor ignores it (no open element of that name, or a
   special element such as a div above it): ``<div></span>`` repeated nests as deep as
   ``<div>`` alone and passes it. That costs at most ~0.3 s below ``CAREFUL_FROM`` start tags,
   the most elements lexbor can then nest; past it, the model decides too.

The model closes only what lexbor would close: a closing tag finds its element within
``REACH`` of the top before any special element (or, for the tags with rules of their own,
before their scope's boundary); ``</form>`` takes out the form alone; ``</body>`` and
``</html>`` close nothing; comments, quoted attribute values and raw text (scripts, styles)
hold no tags. Where it cannot tell, it keeps elements open. One known gap: a misnested
formatting element (``<div><b><div></b>``) nests twice as deep in lexbor as in the model (the
adoption agency), so a hostile page can reach about twice the limit.
"""

from __future__ import annotations

import re

MAX_NESTING = 2048
CHECK_FROM = 64 * 1024
CAREFUL_FROM = 20_000  # start tags; nested all, lexbor's worst case is about 0.3 s
REACH = 16  # how far below the top the model looks for a closing tag's element

_VOID = "area|base|br|col|embed|hr|img|input|link|meta|source|track|wbr|param|keygen"
# "<" of an opening tag (void elements included), "</" of a closing one (void ones left out).
_NESTING_BOUND = re.compile(rf"<(/(?!(?:{_VOID})(?![a-zA-Z0-9]))|)[a-zA-Z]", re.IGNORECASE)
# A comment (no name), or a tag's name with "/" for a closing one, to the tag's end; a quoted
# value is skipped whole, up to 4 KiB (a longer one ends the match: the rest reads as text).
_TOKEN = re.compile(
    r"<!--.*?-->|<(/?[a-zA-Z][^\s/>]*)(?:[^>\"']|\"[^\"]{0,4096}\"|'[^']{0,4096}')*>",
    re.DOTALL,
)
_VOID_NAMES = frozenset(_VOID.split("|"))


def _names(text: str) -> frozenset[str]:
    return frozenset(text.split())


# Their text is not markup: what looks like a tag inside is text until their closing tag.
_RAW_TEXT = _names("script style textarea title xmp iframe noembed noframes")
# The HTML standard's "special" elements: an ordinary closing tag never closes past one.
_SPECIAL = _names(
    "address applet area article aside base basefont bgsound blockquote body br button caption "
    "center col colgroup dd details dir div dl dt embed fieldset figcaption figure footer form "
    "frame frameset h1 h2 h3 h4 h5 h6 head header hgroup hr html iframe img input keygen li "
    "link listing main marquee menu meta nav noembed noframes noscript object ol p param "
    "plaintext pre script search section select source style summary table tbody td template "
    "textarea tfoot th thead title tr track ul wbr xmp"
)
# Closing tags the standard gives rules of their own: they close their element if it is "in
# scope", through special elements, but never past these boundaries (per the scope each uses).
_SCOPE = _names("applet caption html table td th marquee object template")
_SCOPED = {
    **dict.fromkeys(
        _names(
            "address article aside blockquote button center details dialog dir div dl "
            "fieldset figcaption figure footer header hgroup listing main menu nav ol pre "
            "search section summary ul dd dt h1 h2 h3 h4 h5 h6 a b big code em font i nobr s "
            "small strike strong tt u applet marquee object"
        ),
        _SCOPE,
    ),
    "li": _SCOPE | {"ol", "ul"},
    "p": _SCOPE | {"button"},
    **dict.fromkeys(
        _names("table tbody thead tfoot tr td th caption colgroup select"),
        _names("html table template"),
    ),
}
# Never popped by their closing tag: the parser only changes its insertion mode.
_NOT_POPPED = _names("body html")


def too_deep(text: str) -> bool:
    """Whether lexbor would nest ``text`` deeper than ``MAX_NESTING``."""
    if len(text) <= CHECK_FROM:
        return False
    deep, openings = _counted(text)
    return (deep or openings > CAREFUL_FROM) and _modelled_too_deep(text)


def _counted(text: str) -> tuple[bool, int]:
    """Whether the tags nest deeper than ``MAX_NESTING`` when every closing tag closes one,
    and how many openings were counted."""
    depth = openings = 0
    for closing in _NESTING_BOUND.findall(text):
        if closing:
            if depth:
                depth -= 1
        else:
            depth += 1
            openings += 1
            if depth > MAX_NESTING:
                return True, openings
    return False, openings


def _modelled_too_deep(text: str) -> bool:
    """lexbor's stack of open elements, closed only where lexbor would close it (its "any
    other end tag" rule); where the model cannot tell, it keeps the element open, so it errs
    towards deep."""
    stack: list[str] = []
    lower: dict[str, str] = {}
    raw = ""  # inside a raw-text element: its closing tag, the only tag there
    for tag in _TOKEN.findall(text):
        if not tag:
            continue  # a comment
        name = lower.get(tag)
        if name is None:
            name = lower[tag] = tag.lower()
        if raw:
            if name != raw:
                continue
            raw = ""
        if name[0] != "/":
            if name not in _VOID_NAMES:
                stack.append(name)
                if len(stack) > MAX_NESTING:
                    return True
                if name in _RAW_TEXT:
                    raw = "/" + name
            continue
        name = name[1:]
        if name in _NOT_POPPED:
            continue
        stop = _SCOPED.get(name, _SPECIAL)
        for depth in range(len(stack) - 1, max(-1, len(stack) - 1 - REACH), -1):
            if stack[depth] == name:
                # </form> takes the form out of the stack and leaves what it holds open.
                del stack[depth : depth + 1 if name == "form" else None]
                break
            if stack[depth] in stop:
                break
    return False
