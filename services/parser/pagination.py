"""Pagination: which links of a page lead to other pages of the same listing.

Two questions decide it, each answered cheaply:

1. **How does the link's URL relate to the page's?** (``relation``, memoised per URL). Both URLs
   are reduced to a *shape*: the host without ``www.``, the path, the page number wherever it
   sits (``?page=3``, ``?start=40``, ``PAGEN_1=5``, ``board=18.20``, ``/page/3``, ``/p12``,
   ``/seite/3``, ``-or20-``, ``index53.html``, ``list_48_3.html``, ``-101.html``), cursors
   (``updated-max=``, ``after=``…), noise (page size, sort order, view, session ids) and the
   listing's own parameters (its filters). The answer is one of seven levels:

   - ``CLEAN``: the same listing, only the page number moved, by a parameter or path word
     that means "page" (``page``, ``seite``, ``strona``, ``/page/N``…): pagination as it is;
   - ``PAGED``: the same listing at another page, but with an ambiguous number (a bare
     ``-2``, ``index3``, ``?p=``: WordPress posts are ``?p=<id>``), a moved cursor, changed
     noise (a pager adds ``order=desc`` or ``ipp=20``, drops ``versionfrom=``);
   - ``FIRST``: the listing's plain URL seen from a later page: its page 1, but also its menu
     and breadcrumb link;
   - ``ADDED``: from a first page without a page number, the same path with one and other
     new parameters: a search's pager (``pn=10&rsv_t=…``, ``first=11&FORM=PERE``), or a
     filter's link that also sets the page;
   - ``FAMILY``: the same path with other filters (a facet), or another listing on it;
   - ``VARIANT``: this very page sorted, sized or viewed otherwise: never pagination;
   - ``NONE``: another path or another site.

2. **Does the link look like a pager's?** (``Pager``, per page): its words ("Next", "Older
   posts", "Weiter", "Suivant", "Следующая", "次へ", "下一页", "»"…), a page number as its
   text, pager classes or labels on the link (``next``, ``prev``, ``page-numbers``,
   ``pagination_Not_Selected``, ``aria-label="Page 3"``), and whether it sits in a pager
   widget (a container whose class, id or aria-label says pagination, pager, paging,
   page-nav, nav-links…). A text that reads like a title (more than five words, a URL) is
   never a pager's.

``CLEAN`` links are pagination unless their text is a title; ``PAGED`` ones need one cue (a
``?p=`` link a pager's word, class or widget, not just a number: a comment count is one);
``FIRST`` needs "1", a pager word, class or widget; ``ADDED`` a page number or a pager word as
its text; ``FAMILY`` and ``NONE`` need to sit in a pager widget and read like a pager (a
number or a pager word): a pager whose links go to another path (a shop's SEO category URL
paged through ``merchant.mvc?...&Offset=24``) still counts, but a pager word to another
entry (a sibling path without a page number: "‹ Previous" / "Next ›" between articles) does
not. A year (``2015``) is a page number only inside a pager widget; date paths
(``/2015/05/12``) never page by their numbers, and a link to another month (``?mini=2016-04``,
``/2016/04``) is a calendar's, not a listing's page. A ``rel=next|prev`` link is pagination
unless its text is a title (a blog post's link to the next post) or it leads to another entry.

Every per-link step is a dictionary or memoised lookup plus, for the few links that might be
pagination, the link's text: no step looks at the page's other links, so the cost grows with
the number of links, not with its square.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from html import unescape

from selectolax.lexbor import LexborHTMLParser, LexborNode

from services.parser.markup import Alternative, Markup, Query

# --- URL shapes ---------------------------------------------------------------------------

VARIANT, NONE, FAMILY, ADDED, FIRST, PAGED, CLEAN = -1, 0, 1, 2, 3, 4, 5

PAGE_PARAMS = frozenset(
    {"page", "pg", "pag", "paged", "pagenum", "page_num", "pagenumber", "pageno", "page_no",
     "pn", "currentpage", "curpage", "cpage", "pageindex", "page_index", "pagenr", "seite",
     "pagina", "strona", "sayfa", "sida", "side", "sivu", "oldal", "stranica", "trang", "paging",
     "pgn", "_pgn"}
)  # fmt: skip
# ?p= is a page on Magento, a post id on WordPress (?p=123); ?o= an offset on some sites, the
# sort column in Django's admin (?o=2): a pager's cue must say so.
AMBIGUOUS_PARAMS = frozenset({"p", "o"})
OFFSET_PARAMS = frozenset(
    {"offset", "start", "from", "limitstart", "skip", "startindex", "start_index",
     "startrow", "begin", "b_start", "first_result", "first"}
)  # fmt: skip
CURSOR_PARAMS = frozenset(
    {"cursor", "after", "before", "page_token", "pagetoken", "pagingtoken", "continue",
     "continuation", "next", "token", "max_id", "since_id", "until", "since", "updated-max",
     "updated-min", "published-max", "published-min", "pagefrom", "pageuntil", "filefrom",
     "fileuntil", "subcatfrom", "subcatuntil"}
)  # fmt: skip
# PAGEN_1 (Bitrix), sf_paged, product-page, page_number, page[number] (JSON:API, as encoded)…
_PAGE_KEY = re.compile(
    r"pagen_\d+|[a-z]{0,8}[-_]?paged?(?:_?(?:no|num|number|nr|index|idx))?"
    r"|page%5b(?:number|offset)?%5d"
)
# Page size, order, view and session parameters: a pager may add, drop or change them.
_NOISE_KEY = re.compile(
    r"(?:items_?|results_?|rows_?)?per_?-?pag(?:e|ina)|page_?size|pagesize|ipp|limit|size|count"
    r"|num|rows|show|max-?results|results|n|order(?:_?by)?|sort(?:_?(?:by|order|dir))?|dir"
    r"|direction|view|mode|layout|display|[a-z]*layout|by-date|reverse-paginate|ajax|format|_"
    r"|sid|sess(?:ion)?_?id|phpsessid|jsessionid|oscsid|zenid",
)
_SESSION_VALUE = re.compile(r"[0-9a-fA-F]{16,}")
_DOTTED = re.compile(r"(\d+)\.(\d+)")  # SMF: board=18.20 is board 18 from its 20th topic
# A page token in a path: a separator, an optional short word, a number of at most 5 digits
# (ids are longer), optionally a second number (list_48_3); looked for at every position, with
# bounded repeats so that a hostile path of separators stays linear.
_PATH_TOKEN = re.compile(
    r"(?=((?:[/_.-]{1,3}|(?<=[a-z]))([A-Za-z]{1,8}[-_/]?)?(\d{1,5}(?:[-_]\d{1,5})?)(?![\dA-Za-z])))"
)
_PAGE_WORDS = frozenset(
    {"page", "pages", "paged", "p", "pg", "pag", "pagina", "pagine", "seite", "strona", "sayfa",
     "sida", "side", "sivu", "oldal", "stranica", "trang"}
)  # fmt: skip
# A month as a calendar writes it: /2016/03 at a path's end, 2016-03 or 201603 as a value.
_MONTH = re.compile(r"/(?:19|20)\d\d/[01]?\d$|(?<![\d-])(?:19|20)\d\d-?[01]\d(?![\d-])")
_DATE_PATH = re.compile(r"/(?:19|20)\d\d(?:/[01]?\d(?:/[0-3]?\d)?)?(?=/|$)")
_INDEX = re.compile(r"/(?:index|default)\.(?:html?|php|aspx?|jsp|cfm)$", re.I)
_EXT = re.compile(r"\.[A-Za-z]{2,5}$")


@dataclass(frozen=True, slots=True)
class Shape:
    """A URL reduced to what tells its listing and its page apart."""

    host: str
    path: str
    mask: str  # the path with each digit run as "#"
    page: tuple[tuple[str, str], ...]  # page and offset parameters
    ambiguous: bool  # the page number comes from a parameter that may be an id
    cursor: tuple[tuple[str, str], ...]
    core: tuple[tuple[str, str], ...]  # the listing's own parameters (filters)
    masked_core: tuple[tuple[str, str], ...]  # core with this page's number masked
    noise: tuple[tuple[str, str], ...]
    months: tuple[str, ...]  # year-month values (a calendar's month) outside cursors


@lru_cache(maxsize=65536)
def where(url: str) -> tuple[str, str, str]:
    """(host without ``www.``, path, path with each digit run as ``#``): all that most links
    need before they are known to go elsewhere."""
    rest = url.partition("://")[2]
    host, _, rest = rest.partition("/")
    path = "/" + rest.partition("?")[0]
    while "//" in path:
        path = path.replace("//", "/")
    if "index." in path or "default." in path:
        path = _INDEX.sub("", path)
    path = path.rstrip("/")
    return host.removeprefix("www."), path, _DIGITS.sub("#", path) if _HAS_DIGIT(path) else path


_DIGITS = re.compile(r"\d+")
_HAS_DIGIT = re.compile(r"\d").search


@lru_cache(maxsize=65536)
def _digit_runs(path: str) -> int:
    return len(_DIGITS.findall(path))


@lru_cache(maxsize=65536)
def shape(url: str) -> Shape:
    host, path, mask = where(url)
    query = url.partition("?")[2]
    page: list[tuple[str, str]] = []
    cursor: list[tuple[str, str]] = []
    core: list[tuple[str, str]] = []
    noise: list[tuple[str, str]] = []
    ambiguous = False
    for pair in query.split("&") if query else ():
        key, _, value = pair.partition("=")
        low = key.lower()
        numeric = value.isdigit() or not value
        if low in PAGE_PARAMS or low in OFFSET_PARAMS:
            (page if numeric else core).append((low, value))
        elif low in AMBIGUOUS_PARAMS and numeric:
            page.append((low, value))
            ambiguous = True
        elif low in CURSOR_PARAMS:
            cursor.append((low, value))
        elif _NOISE_KEY.fullmatch(low) or _SESSION_VALUE.fullmatch(value):
            noise.append((low, value))
        elif numeric and _PAGE_KEY.fullmatch(low):
            page.append((low, value))
        elif (m := _DOTTED.fullmatch(value)) is not None:
            core.append((low, m.group(1)))
            page.append((low + ".", m.group(2)))
        else:
            core.append((key, value))
    core.sort()
    number = page[0][1] if len(page) == 1 and page[0][1] else None
    masked = core
    if number and any(number in v for _, v in core):
        digits = re.compile(rf"(?<!\d){number}(?!\d)")
        masked = [(k, digits.sub("#", v)) for k, v in core]  # ref=sr_pg_3 on page 3
    return Shape(
        host=host,
        path=path,
        mask=mask,
        page=tuple(sorted(page)),
        ambiguous=ambiguous,
        cursor=tuple(sorted(cursor)),
        core=tuple(core),
        masked_core=tuple(masked),
        noise=tuple(sorted(noise)),
        months=tuple(_MONTH.findall(path + "?" + "&".join(v for _, v in core + noise)))
        if _HAS_DIGIT(url)
        else (),
    )


@lru_cache(maxsize=16384)
def _drops(path: str) -> dict[str, str]:
    """The path without one page-looking token → that token's word: ``/a/page-3`` →
    ``{"/a": "page", "/a/page": ""}``."""
    out: dict[str, str] = {}
    for m in _PATH_TOKEN.finditer(path):
        token, word = m.group(1), _word(m.group(2) or "")
        start = m.start()
        end = start + len(token)
        number = m.group(3)
        if not word and len(number) == 4 and number[:2] in ("19", "20") and token[0] == "/":
            continue  # a year segment: an archive, not a page
        if _in_date(path, start):
            continue
        tail = path[end:]
        if token.startswith("/") and (not tail or _EXT.fullmatch(tail)):
            tail = ""  # a whole last segment (index53.html, list_48_3.html) goes with its extension
        out.setdefault(path[:start] + tail, word)
    return out


def _in_date(path: str, position: int) -> bool:
    return any(m.start() <= position < m.end() for m in _DATE_PATH.finditer(path))


@lru_cache(maxsize=65536)
def _digit_runs_moved(a: str, b: str) -> str | None:
    """When two paths of one mask differ in exactly one number (outside a date), the word in
    front of it (``page-`` → ``page``), else None."""
    runs_a = list(re.finditer(r"\d+", a))
    runs_b = list(re.finditer(r"\d+", b))
    moved = [(x, y) for x, y in zip(runs_a, runs_b, strict=True) if x.group() != y.group()]
    if len(moved) != 1:
        return None
    x, y = moved[0]
    if len(x.group()) > 5 or len(y.group()) > 5 or _in_date(a, x.start()) or _in_date(b, y.start()):
        return None
    word = re.search(r"[A-Za-z]*[-_/]?$", a[: x.start()])
    return _word(word.group() if word else "")


def _word(raw: str) -> str:
    """The page word of a path token, ``?`` for a lone ``p`` with a separator: ``/p12`` is a
    forum's page 12, ``/p/123`` a product."""
    word = raw.strip("-_/").lower()
    return "?" if word == "p" and raw[-1:] in ("-", "_", "/") else word


def relation(here: Shape, url: str) -> int:
    """How ``url`` relates to the page ``here``: one of the levels above."""
    host, path, mask = where(url)
    if host != here.host:
        return NONE
    first = False  # url is the listing's plain URL (its page 1) seen from a later page
    if path == here.path:
        word = None
    elif mask == here.mask:
        word = _digit_runs_moved(here.path, path)
        if word is None:
            return NONE
    elif path in (drops := _drops(here.path)):
        word, first = drops[path], True
    elif may_extend(here.path, path) and here.path in (drops := _drops(path)):
        word = drops[here.path]
    else:
        return NONE
    cand = shape(url)
    page_moved = cand.page != here.page
    cursor_moved = cand.cursor != here.cursor
    loose = False  # the pager drops a parameter the page has, or adds a number (thRange=15)
    if cand.core != here.core and cand.masked_core != here.masked_core:
        extra = set(cand.core) - set(here.core)
        added = extra and {k for k, _ in extra}.isdisjoint(k for k, _ in here.core)
        if extra and not (added and page_moved and all(v.isdigit() for _, v in extra)):
            if added and page_moved and not here.page and not here.cursor and word is None:
                return ADDED  # a first page's pager adds its own words (pn=10&rsv_t=…)
            return FAMILY  # a filter, a facet, another listing on the same path
        loose = True  # the pager adds numbers (thRange=15)
    if word is None:  # same path: the query decides
        if not (page_moved or cursor_moved):
            # the same page without a parameter (the pager's own link to it), or sorted,
            # sized or viewed otherwise
            return PAGED if loose and set(cand.noise) <= set(here.noise) else VARIANT
        if not cand.page and here.page and not cursor_moved:
            # no page number: page 1, unless it also sorts or sizes otherwise
            return FIRST if set(cand.noise) <= set(here.noise) else VARIANT
        ambiguous = cand.ambiguous or here.ambiguous
        clean = page_moved and not cursor_moved and not ambiguous and cand.noise == here.noise
        return CLEAN if clean and not loose else PAGED
    if first:
        return FIRST if not (page_moved or cursor_moved) else PAGED
    clean = word in _PAGE_WORDS and not page_moved and not cursor_moved
    return CLEAN if clean and not loose and cand.noise == here.noise else PAGED


def may_extend(short: str, long: str) -> bool:
    """Whether ``long`` may be ``short`` with a token inserted: a cheap test before the
    token search (a few more characters, one more number, half of ``short`` is a prefix or a
    suffix of ``long``)."""
    extra = len(long) - len(short)
    if not 1 < extra < 32 or _digit_runs(long) <= _digit_runs(short):
        return False
    half = len(short) // 2
    return long.startswith(short[:half]) or long.endswith(short[half:])


@lru_cache(maxsize=65536)
def is_paged_url(url: str) -> bool:
    """A URL that carries a page number, offset or cursor (for URLs announced in ``data-*``
    attributes, which have no page to compare with)."""
    s = shape(url)
    return bool(s.page or s.cursor) or any(w in _PAGE_WORDS for w in _drops(s.path).values())


# --- what a pager's links look like ---------------------------------------------------------

# Containers of pager widgets: found once per page with a wide selector (each alternative is a
# walk of the tree), then told apart by their class, id or label; then their links collected.
# A descendant selector (``X a[href]``) per pattern would cost four times more. An alternative
# whose word the page's markup lacks is left out (``markup.Query``): most pages have no
# WordPress ``nav-links``, many no ``aria-label``.
_PAGER_BOXES = Query(
    Alternative('[class*="pag" i]', words=(b"pag",)),
    Alternative('[id*="pag" i]', words=(b"pag",)),
    Alternative('[aria-label*="pag" i]', names=(b"aria-label",), words=(b"pag",)),
    Alternative('[class*="nav-links" i]', words=(b"nav-links",)),
)
_PAGER_BOX = re.compile(
    r"pagin|pager|page-?nav|page_nav|paginav|page-?numbers|page-?links?|nav-links"
    r"|(?:^|\s)pages(?:\s|$)",
    re.I,
)
# The link's own class, id, label or title (or its list item's class) says where it goes.
_PAGER_ATTR = re.compile(
    r"next|prev|older|newer|pagin|pager|paging|page-?num|page-?link|pageno|go to page|^page \d",
    re.I,
)
_WORDS = (
    # English
    r"next|prev|previous|older|newer|first|last|more|earlier|later|start|end"
    r"|show more|load more|view more|see more|more results|next page|previous page"
    # German, Dutch, Scandinavian, Finnish
    r"|weiter|vor|zurück|nächste|vorherige|erste|letzte|mehr|ältere|neuere|volgende|vorige"
    r"|eerste|laatste|ouder|nieuwer|meer|nästa|föregående|neste|forrige|næste|seuraava|edellinen"
    # Romance languages
    r"|suivant|suivante|précédent|précédente|première|dernière|plus|siguiente|anterior|primera"
    r"|última|último|más|inicio|final|próxima|próximo|seguinte|primeira|successiva|successivo"
    r"|precedente|prima|ultima|avanti|indietro|succ|prec|sig|ant"
    # Slavic, Baltic, Greek, Turkish
    r"|następna|poprzednia|pierwsza|ostatnia|dalej|wstecz|další|předchozí|další stránka"
    r"|следующая|предыдущая|далее|назад|вперёд|вперед"
    r"|первая|последняя|в начало|в конец|ещё|еще|наступна|попередня|επόμενη|προηγούμενη"
    r"|sonraki|önceki|ileri|geri"
    # CJK
    r"|次へ|前へ|次|前|次のページ|前のページ|次の記事|前の記事|最初|最後|下一页|上一页|下页|上页"
    r"|首页|末页|尾页|下一頁|上一頁|首頁|末頁|다음|이전|처음|마지막"
)
_PAGE_NOUNS = (
    r"page|pages|posts|entries|articles|results|comments|items|pagina|página|seite|strona"
    r"|stránka|страница|sivu|sida|side|sayfa"
)
# A pager word, alone or with "page" before or after it: "Next page", "Pagina successiva".
_PAGER_WORDS = re.compile(
    rf"(?:go to |to )?(?:the )?(?:(?:{_PAGE_NOUNS}) )?(?:{_WORDS})(?: (?:{_PAGE_NOUNS}))?", re.I
)
_ARROWS = re.compile(r"[«»‹›<>←→⇐⇒▶◀►◄▸◂❯❮〉〈⟨⟩|.…\s-]+")
_ARROW = re.compile(r"[«»‹›<>←→⇐⇒▶◀►◄▸◂❯❮〉〈⟨⟩]")
_NUMBER = re.compile(
    r"[\[(]?\s*(?:page|seite|pag\.?|pág\.?|p\.|стр\.?|strona|第)?\s*(\d{1,5})\s*(?:页|頁)?\s*[\])]?"
    r"\.?|\d{1,6}\s*[-–]\s*\d{1,6}",
    re.I,
)
# What a pager writes around a number: the gap beside its first or last page ("1 ...",
# "... 86", Discuz!), an arrow beside its last (IPB's "9 →").
_DECORATION = "«»‹›<>←→….· \u00a0-"
MAX_PAGER_TEXT = 40  # "Next page »", "Older posts", "1", "Seite 3 von 12"…


@dataclass(frozen=True, slots=True)
class Cues:
    number: str = ""  # its text is this page number
    year: bool = False  # ... a number that could also be a year
    words: bool = False  # its text is a pager word or an arrow
    marked: bool = False  # its label or image says pager
    title: bool = False  # its text reads like a title: never a pager's


NO_CUES = Cues()


@lru_cache(maxsize=16384)
def text_cues(text: str) -> Cues:
    text = " ".join(text.split())
    if not text:
        return NO_CUES
    if len(text) > MAX_PAGER_TEXT or "://" in text or "www." in text:
        return Cues(title=True)
    m = _NUMBER.fullmatch(text)
    if m is None and (text[0] in _DECORATION or text[-1] in _DECORATION):
        m = _NUMBER.fullmatch(text.strip(_DECORATION))
    if m:
        number = m.group(1) or text
        if len(number) == 4 and number[:2] in ("19", "20"):
            return Cues(year=True)
        return Cues(number=number)
    if _ARROWS.fullmatch(text):
        return Cues(words=_ARROW.search(text) is not None)  # "…" alone is a gap
    bare = _ARROWS.sub(" ", text).strip().lower()
    if _PAGER_WORDS.fullmatch(bare):
        return Cues(words=True)
    return Cues(title=len(text.split()) > 5)


@lru_cache(maxsize=4096)
def _is_box(names: str) -> bool:
    return _PAGER_BOX.search(names) is not None


@lru_cache(maxsize=16384)
def is_pager_attr(value: str) -> bool:
    return _PAGER_ATTR.search(value) is not None


class Pager:
    """One page's pager: decides, link by link, which links are its other pages."""

    __slots__ = ("boxed", "drops", "here")

    def __init__(self, tree: LexborHTMLParser, page_url: str, markup: Markup | None = None) -> None:
        """``markup``: the page's, when the caller has it (see ``_PAGER_BOXES``)."""
        self.here = shape(page_url)
        self.drops = _drops(self.here.path)
        self.boxed: set[int] = set()
        try:
            boxes = _PAGER_BOXES.select(tree, markup)
        except Exception:  # lexbor refuses a selector: no widget cue, the rest still works
            boxes = []
        taken: set[int] = set()
        for box in boxes[:MAX_BOX_CANDIDATES]:
            if box.tag in ("body", "html", "main"):
                continue  # a page-wide "pagination-enabled" class says nothing about a link
            attrs = box.attributes
            names = " ".join(attrs.get(a) or "" for a in ("class", "id", "aria-label"))
            if not _is_box(names):
                continue
            up = box.parent
            if up is not None and (up.mem_id in taken or (up.parent and up.parent.mem_id in taken)):
                continue  # inside a widget already taken (ul.pagination in div.pagination)
            taken.add(box.mem_id)
            for link in box.css("a[href]")[:MAX_BOX_LINKS]:
                self.boxed.add(link.mem_id)
            if len(taken) >= MAX_BOXES:
                break  # each box's links cost a walk of its subtree: a hostile page has many

    def elsewhere(self, place: tuple[str, str, str]) -> bool:
        """Whether a link outside the pager widgets, to ``place`` (``where(url)``), goes
        elsewhere than this listing: told by its path alone, without looking at the link."""
        here = self.here
        host, path, mask = place
        if host != here.host:
            return True
        if path == here.path or mask == here.mask or path in self.drops:
            return False
        # may_extend's first test, inline: most paths differ in length by too much.
        return not 1 < len(path) - len(here.path) < 32 or not may_extend(here.path, path)

    def declared(self, node: LexborNode | None, url: str) -> bool:
        """Whether a link the page declares as next or previous (``rel``) is one: not when it
        reads like a title (a blog post's link to the next post), nor when it leads to another
        entry: a sibling path without a page number (WordPress's post navigation "Next Tablet
        Q review", Joomla's "Weiter" to the next article)."""
        if node is None or node.tag == "link":
            return True
        return not _cues(node).title and not self._to_another_entry(url)

    def _to_another_entry(self, url: str) -> bool:
        """``url`` is on another path that says no page and is none of this one's ancestors
        (a blog's newest page is its home): an article's, not a listing's page."""
        if relation(self.here, url) != NONE or is_paged_url(url):
            return False
        path = where(url)[1]
        return not (path == "" or self.here.path.startswith(path + "/"))

    def paginates(
        self, url: str, node: LexborNode | None, attrs: dict[str, str | None] | None = None
    ) -> bool:
        """Whether ``url``, linked by ``node`` (None: announced without an element; ``attrs``:
        its attributes when already read), is another page of this listing."""
        here = self.here
        boxed = node is not None and node.mem_id in self.boxed
        if not boxed and self.elsewhere(where(url)):
            return False  # the common case: a link elsewhere, told apart by its path alone
        level = relation(here, url)
        if node is None or level == VARIANT:
            return level == CLEAN
        if level == ADDED:  # a filter's link may add a page number too: its text must say page
            cues = _cues(node)
            return not cues.title and bool(cues.number or cues.words)
        if level < FIRST and not boxed:
            return False  # another listing or a filter, outside a pager widget
        cues = _cues(node)
        if cues.title:
            return False
        if level == CLEAN:
            return True
        months = shape(url).months
        if months and months != self.here.months:
            return False  # a calendar's previous or next month: a trap, not a listing's page
        marked = cues.marked or _marked(attrs or node.attributes, node.parent)
        if level == PAGED:
            if here.ambiguous or shape(url).ambiguous:  # ?p=: a post id unless a pager says
                return bool(cues.words or marked or boxed)
            return bool(cues.number or cues.words or marked or boxed)
        if level == FIRST:  # the way back to page 1 is also the menu's and breadcrumb's link
            return cues.number == "1" or cues.words or marked or boxed
        # another path or a filter variant, inside a pager widget: a page number, or a pager
        # word unless the path is another entry's ("‹ Previous" / "Next ›" between articles)
        if cues.number or cues.year:
            return True
        return cues.words and not (level == NONE and self._to_another_entry(url))


MAX_BOX_CANDIDATES = 2000  # elements with "pag" in their class, id or label
MAX_BOXES = 50
MAX_BOX_LINKS = 300


def _marked(attrs: dict[str, str | None], up: LexborNode | None = None) -> bool:
    """The link's class, id, label or title (or its list item's or span's class or id) says
    pager. Not "first" or "last": a list item's "first" is a menu's first item, a forum's
    "lastpost" its newest post."""
    for name in ("class", "id", "aria-label", "title"):
        value = attrs.get(name)
        if value and is_pager_attr(value):
            return True
    if up is not None and up.tag in ("li", "span"):
        up_attrs = up.attributes
        for name in ("class", "id"):
            value = up_attrs.get(name)
            if value and is_pager_attr(value):
                return True
    return False


def _cues(node: LexborNode) -> Cues:
    text = node.text(deep=True, separator=" ")
    if text and not text.isspace():
        return text_cues(text.strip()[:200])
    attrs = node.attributes
    label = attrs.get("aria-label") or attrs.get("title")
    if not label:
        img = node.css_first("img[alt]")
        label = img.attributes.get("alt") if img is not None else None
    cues = text_cues(label.strip()[:200]) if label else NO_CUES
    return Cues(number=cues.number, words=cues.words, marked=cues.words or bool(cues.number))


# --- load more and infinite scroll ------------------------------------------------------------

# A next page a page declares in an attribute: ``data-next-url``, ``data-next-page``,
# ``data-load-more-url``… always; a generic URL attribute (``data-url``, ``data-href``,
# ``data-ajax-url``, ``data-endpoint``, ``data-api-url``…, often a JSON endpoint) only on an
# element that says load more, infinite scroll, pager or next, and then only when the URL carries
# a page number, offset or cursor (or the element says "more"). Found by one scan of the HTML:
# a CSS attribute selector costs a tree walk per attribute name, ten times more.
_DATA_URL = re.compile(
    r"data-(next(?:-?page)?(?:-url|-href|-link)?|load-?more(?:-url)?|more-url|infinite-scroll-url"
    r"|url|href|ajax-url|endpoint|api-url|fetch-url|load-url|source-url)"
    r"""\s*=\s*(?:"([^"<>]{1,2000})"|'([^'<>]{1,2000})')""",
)  # case-sensitive: a literal prefix the regex engine searches fast (pages write it lowercase)
_GENERIC = frozenset({"url", "href", "ajax-url", "endpoint", "api-url", "fetch-url", "load-url",
                      "source-url"})  # fmt: skip
MAX_DATA_URLS = 1000
_TAG_WINDOW = 2000  # characters looked at around a data-* attribute for its tag's class and id
_NAMES = re.compile(r"""\s(?:class|id)\s*=\s*["']([^"']*)""", re.I)  # an element's class and id
_MORE_ELEMENT = re.compile(r"more|load|infinite|scroll|pagin|pager|next")


def declared_next(html: str) -> list[str]:
    """URLs (as written, entities decoded) of the next pages a page declares in ``data-*``
    attributes, for load more buttons and infinite scroll."""
    out: list[str] = []
    for i, m in enumerate(_DATA_URL.finditer(html)):
        if i >= MAX_DATA_URLS:
            break  # a hostile page; a real one declares a few
        if html[m.start() - 1 : m.start()] not in (" ", "\t", "\n", "\r", '"', "'"):
            continue  # part of a longer attribute name (data-foo-url)
        name = m.group(1)
        value = unescape(m.group(2) or m.group(3) or "").strip()
        if not value or not ("/" in value or "?" in value) or value.startswith(("{", "[")):
            continue
        if name in _GENERIC:  # the element's class and id, within its tag (bounded windows)
            start = max(html.rfind("<", max(0, m.start() - _TAG_WINDOW), m.start()), 0)
            end = html.find(">", m.end(), m.end() + _TAG_WINDOW)
            names = " ".join(_NAMES.findall(html, start, end if end > 0 else m.end())).lower()
            if not _MORE_ELEMENT.search(names):
                continue
            if "more" not in names and not _paged_value(value):
                continue
        out.append(value)
    return out


def _paged_value(value: str) -> bool:
    """Whether a URL as written carries a page number, offset or cursor."""
    url = value if "://" in value else "http://x/" + value.lstrip("/")
    return is_paged_url(url)
