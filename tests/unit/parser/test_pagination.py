"""Pagination discovery, shape by shape: URL relations, pager cues, traps, declared next pages.

Every page here is written for the shape it tests (no page is copied from a dataset): a pager
whose links differ from the page's URL in one of the ways real pagers do, and the links that
look like a pager's but are not.
"""

from __future__ import annotations

import pytest
from selectolax.lexbor import LexborHTMLParser

from services.parser.markup import Markup
from services.parser.page import parse_page
from services.parser.pagination import (
    ADDED,
    CLEAN,
    FAMILY,
    FIRST,
    NONE,
    PAGED,
    VARIANT,
    Pager,
    declared_next,
    relation,
    shape,
    text_cues,
)


def _pagination(url: str, body: str) -> set[str]:
    parsed = parse_page(f"<html><body>{body}</body></html>".encode(), url)
    return {link.url for link in parsed.links if link.kind == "pagination"}


def _kinds(url: str, body: str) -> dict[str, str]:
    parsed = parse_page(f"<html><body>{body}</body></html>".encode(), url)
    return {link.url: link.kind for link in parsed.links}


# -- how a link's URL relates to the page's ------------------------------------------------


@pytest.mark.parametrize(
    ("here", "there", "level"),
    [
        # page parameters, in the page's language and the shop system's spelling
        ("/c/lamps?page=2", "/c/lamps?page=3", CLEAN),
        ("/c/lamps", "/c/lamps?page=2", CLEAN),
        ("/katalog/?PAGEN_1=2", "/katalog/?PAGEN_1=3", CLEAN),
        ("/kategoria?strona=2", "/kategoria?strona=3", CLEAN),
        ("/s?q=tent&start=20", "/s?q=tent&start=40", CLEAN),
        ("/s?q=tent&offset=20", "/s?q=tent&offset=0", CLEAN),
        ("/list?o=2", "/list?o=3", PAGED),  # an offset, or Django admin's sort column
        ("/search?q=tent&first=11", "/search?q=tent&first=21", CLEAN),
        ("/sch/i.html?_nkw=lamp&_pgn=2", "/sch/i.html?_nkw=lamp&_pgn=3", CLEAN),
        ("/shop?product-page=2", "/shop?product-page=3", CLEAN),
        ("/api/lamps?page%5Bnumber%5D=2", "/api/lamps?page%5Bnumber%5D=3", CLEAN),
        ("/?start=10", "/?limitstart=0", CLEAN),
        # SMF: the offset sits inside the board's value
        ("/index.php?board=18.20", "/index.php?board=18.40", CLEAN),
        ("/index.php?board=18.20", "/index.php?board=19.0", FAMILY),
        # the page number in the path, in many forms and languages
        ("/blog/page/2/", "/blog/page/3/", CLEAN),
        ("/damen/seite/3", "/damen/seite/4", CLEAN),
        ("/damen", "/damen/Seite/2", CLEAN),
        ("/ofertas/pagina/2", "/ofertas/pagina/3", CLEAN),
        ("/kryminal/strona/4", "/kryminal/strona/5", CLEAN),
        ("/categories/garden/p8", "/categories/garden/p9", CLEAN),
        ("/categories/garden", "/categories/garden/p2", CLEAN),
        ("/lamps/Page-10", "/lamps/Page-11", CLEAN),
        ("/lamps-100.html", "/lamps-101.html", PAGED),
        ("/lamps.html", "/lamps-2.html", PAGED),
        ("/jokes/index53.html", "/jokes/index54.html", PAGED),
        ("/jokes/", "/jokes/index2.html", PAGED),
        ("/news/list_48_2.html", "/news/list_48_3.html", PAGED),
        ("/Reviews-d15-or20-Hotel.html", "/Reviews-d15-or30-Hotel.html", PAGED),
        ("/Reviews-d15-Hotel.html", "/Reviews-d15-or10-Hotel.html", PAGED),
        ("/events", "/events//p2", CLEAN),
        # cursors
        (
            "https://b.example/search?updated-max=2015-05-19T20:45:00&max-results=7",
            "https://b.example/search?updated-max=2015-05-12T08:00:00&max-results=7",
            PAGED,
        ),
        ("/s?q=a", "/s?q=a&cursor=eyJwIjozfQ", PAGED),
        (  # a MediaWiki category's next 200 members
            "/w/index.php?title=Category:Lighthouses&pagefrom=Fastnet",
            "/w/index.php?title=Category:Lighthouses&pagefrom=Longships",
            PAGED,
        ),
        # pager links that carry other parameters than the page
        ("/forum.php?f=4", "/forum.php?f=4&page=2&order=desc", PAGED),
        ("/live/index.php", "/live/index.php?page=2&ipp=20", PAGED),
        ("/c?page=2&pageSize=32", "/c?page=3&pageSize=32", CLEAN),
        ("/c", "/c?page=2&perpage=20&sid=9f1c2e3d4b5a69788796a5b4c3d2e1f0", PAGED),
        ("/t/x.4/page-9?versionfrom=2014", "/t/x.4/page-8", PAGED),
        ("/forum.jsp?f=2", "/forum.jsp?f=2&start=15&thRange=15", PAGED),
        # the way back to page 1 has no page number at all
        ("/c/lamps?page=3", "/c/lamps", FIRST),
        ("/blog/page/7/", "/blog/", FIRST),
        # not pagination: another listing, a filter, a sort or size variant, an id
        ("/c/lamps?page=2", "/c/lamps?page=2&sort=price", VARIANT),
        ("/c/lamps?page=2", "/c/lamps?limit=96", VARIANT),
        ("/c/lamps?page=2", "/c/lamps?page=3&color=red", FAMILY),
        # from a first page without a number: a search's pager adds its own words, or a filter
        ("/s?wd=tent", "/s?wd=tent&pn=10&rsv_t=ab12", ADDED),
        ("/c/lamps", "/c/lamps?page=2&color=red", ADDED),
        ("/c/lamps", "/c/chairs?page=2", NONE),
        ("/p/123", "/p/124", PAGED),  # a cue decides: see below
        ("/2015/05/12/", "/2015/05/13/", NONE),
        ("/2015/05/", "/2015/05/13/", NONE),
        ("https://s.example/c/lamps", "https://other.example/c/lamps?page=2", NONE),
        # the same site on www. and on the bare host
        ("https://shop.example/c?page=2", "https://www.shop.example/c?page=3", CLEAN),
    ],
)
def test_relation(here: str, there: str, level: int) -> None:
    """Paths are on one site (``https://s.example``); full URLs say which host."""
    here, there = (u if "://" in u else "https://s.example" + u for u in (here, there))
    assert relation(shape(here), there) == level


def test_a_wordpress_post_id_is_not_a_clean_page_number() -> None:
    assert relation(shape("https://b.example/"), "https://b.example/?p=1234") == PAGED
    assert relation(shape("https://s.example/c?p=2"), "https://s.example/c?p=3") == PAGED


# -- what a pager's link looks like ----------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    ["Next", "Next »", "Older posts", "Weiter", "Suivant", "Siguiente", "Следующая", "次へ",
     "前の記事", "下一页", "›", "»", "< Prev", "Pagina successiva", "Nächste Seite", "→"],
)  # fmt: skip
def test_pager_words(text: str) -> None:
    assert text_cues(text).words


@pytest.mark.parametrize(
    ("text", "number"),
    [("3", "3"), ("[4]", "4"), ("Page 5", "5"), ("1 ...", "1"), ("… 86", "86"), ("9 →", "9")],
)
def test_page_numbers(text: str, number: str) -> None:
    assert text_cues(text).number == number


@pytest.mark.parametrize(
    "text",
    ["Read more about our new collection", "https://s.example/c?page=3", "Kitchen", "Sale",
     "Go to last post"],
)  # fmt: skip
def test_not_pager_text(text: str) -> None:
    cues = text_cues(text)
    assert not (cues.words or cues.number)


def test_a_year_is_a_page_number_only_in_a_pager() -> None:
    assert text_cues("2015").year and not text_cues("2015").number


# -- pages ---------------------------------------------------------------------------------


def test_numbered_path_pages_in_a_pager_and_the_way_back_to_page_1() -> None:
    url = "https://f.example/categories/garden/p3"
    body = """
      <div class="breadcrumbs"><a href="/categories/garden">Garden</a></div>
      <div class="Pager"><a href="/categories/garden">1</a><a href="/categories/garden/p2">2</a>
      <a href="/categories/garden/p4">4</a><a href="/categories/garden/p12">12</a>
      <a href="/categories/garden/p4" class="Next">»</a></div>
      <a href="/discussion/77/tomatoes">Tomatoes in shade</a>"""
    assert _pagination(url, body) == {
        "https://f.example/categories/garden",
        "https://f.example/categories/garden/p2",
        "https://f.example/categories/garden/p4",
        "https://f.example/categories/garden/p12",
    }


def test_the_breadcrumb_link_alone_is_not_the_way_back() -> None:
    url = "https://s.example/c/lamps?page=3"
    body = """<nav class="breadcrumb"><a href="/c/lamps">Lamps</a></nav>
      <a href="/c/lamps?page=4">4</a>"""
    assert _pagination(url, body) == {"https://s.example/c/lamps?page=4"}


def test_pager_words_in_many_languages_lead_to_pages_in_the_path() -> None:
    url = "https://s.example/damen/schuhe"
    body = """<p><a href="/damen/schuhe/seite/2">Weiter</a></p>
      <p><a href="/damen/schuhe?sortierung=preis">Preis</a></p>"""
    assert _pagination(url, body) == {"https://s.example/damen/schuhe/seite/2"}
    url = "https://n.example/news/list_48_2.html"
    body = """<ul id="pages"><li><a href="list_48_1.html">首页</a></li>
      <li><a href="list_48_1.html">上一页</a></li><li><a href="list_48_3.html">下一页</a></li>
      <li><a href="list_48_9.html">末页</a></li></ul><a href="/news/2016/123.html">新闻标题</a>"""
    assert _pagination(url, body) == {
        "https://n.example/news/list_48_1.html",
        "https://n.example/news/list_48_3.html",
        "https://n.example/news/list_48_9.html",
    }


def test_a_pager_whose_links_go_to_another_path() -> None:
    """A shop's SEO category URL paged through its engine's own URL."""
    url = "https://s.example/party-supplies.html"
    engine = "/mm5/merchant.mvc?Screen=CTGY&Category_Code=party&Offset="
    body = f"""<div class="paginations"><a href="{engine}24">2</a><a href="{engine}48">3</a>
      <a href="{engine}24">▶</a></div>
      <ul class="menu"><a href="/mm5/merchant.mvc?Screen=LOGN">My account</a>
      <a href="/raffle-tickets.html">Raffle tickets</a></ul>"""
    assert _pagination(url, body) == {
        f"https://s.example{engine}24",
        f"https://s.example{engine}48",
    }


def test_a_first_search_page_whose_pager_adds_its_own_parameters() -> None:
    """Page 1 of a search has none of its pager's parameters; a filter's link that also sets
    the page says no page number."""
    url = "https://s.example/s?ie=utf-8&wd=tent"
    page = "/s?wd=tent&amp;pn={}&amp;oq=tent&amp;ie=utf-8&amp;rsv_t=ab12"
    body = f"""<div id="page"><strong>1</strong><a href="{page.format(10)}">2</a>
      <a href="{page.format(20)}">3</a><a href="{page.format(10)}">下一页&gt;</a></div>
      <div class="facets"><a href="/s?wd=tent&amp;pn=0&amp;rating=4">4★ &amp; up</a></div>"""
    assert _pagination(url, body) == {
        "https://s.example" + page.format(n).replace("&amp;", "&") for n in (10, 20)
    }


def test_prev_and_next_between_articles_are_not_pages() -> None:
    """A post's navigation to its neighbours, by ``rel`` or in a box named pager: sibling
    paths without a page number. The way to a blog's newest page (its home) still counts."""
    url = "https://n.example/news/2016/04/council-approves-budget/"
    body = """<div class="article-pager"><a href="/news/2016/04/bridge-closure/">‹ Previous</a>
      <a href="/news/2016/04/school-opens/" class="next-article">Next ›</a></div>
      <nav class="post-navigation"><a href="/news/2016/04/tram-line/" rel="prev">Previous</a>
      <a href="/news/2016/04/tablet-q/" rel="next"><span>Next</span> Tablet Q review</a></nav>"""
    assert _pagination(url, body) == set()
    older = "https://b.example/search?updated-max=2016-03-18T11:07:00-05:00&max-results=7"
    body = '<div class="blog-pager"><a class="blog-pager-newer-link" href="/">Newer Posts</a></div>'
    assert _pagination(older, body) == {"https://b.example/"}


def test_django_admin_sort_columns_are_not_pages() -> None:
    url = "https://a.example/admin/orders/order/"
    body = """<th><a href="?o=1">ID</a></th><th><a href="?o=2">Customer</a></th>
      <th><a class="sortremove" href="?o=" title="Remove from sorting"></a></th>
      <p class="paginator"><span class="this-page">1</span> <a href="?p=1">2</a>
      <a href="?p=2" class="end">3</a></p>"""
    assert _pagination(url, body) == {
        "https://a.example/admin/orders/order/?p=1",
        "https://a.example/admin/orders/order/?p=2",
    }


def test_blogger_older_posts_and_its_archive() -> None:
    url = "https://b.example/"
    older = "/search?updated-max=2016-03-18T11:07:00-05:00&amp;max-results=7"
    year = "/search?updated-min=2015-01-01T00:00:00&amp;updated-max=2016-01-01T00:00:00"
    body = f"""<div class="blog-pager" id="blog-pager"><span id="blog-pager-older-link">
      <a class="blog-pager-older-link" href="{older}">Older Posts</a></span></div>
      <ul class="hierarchy"><li><a href="{year}&amp;max-results=50">2015</a></li></ul>"""
    assert _pagination(url, body) == {"https://b.example" + older.replace("&amp;", "&")}


def test_wordpress_post_permalinks_are_not_pages() -> None:
    url = "https://b.example/"
    posts = "".join(
        f'<article><a href="/?p={1000 + i}"><img src="/t/{i}.jpg"></a>'
        f'<h2><a href="/?p={1000 + i}">What we learned from trip number {i} this year</a></h2>'
        f'<a href="/?p={1000 + i}">Read more</a></article>'
        for i in range(95)
    )
    body = posts + '<div class="nav-links"><a href="/?paged=2">Older posts</a></div>'
    assert _pagination(url, body) == {"https://b.example/?paged=2"}


def test_aria_labelled_pager_with_icon_links() -> None:
    url = "https://s.example/c/lamps?page=2"
    body = """<nav aria-label="Pagination"><a href="/c/lamps?page=1" aria-label="Previous page">
      <svg></svg></a><a href="/c/lamps?page=3" aria-label="Page 3">3</a>
      <a href="/c/lamps?page=3" aria-label="Next page"><svg></svg></a></nav>"""
    assert _pagination(url, body) == {
        "https://s.example/c/lamps?page=1",
        "https://s.example/c/lamps?page=3",
    }


@pytest.mark.parametrize(
    "widget",
    [
        '<div class="NAV-LINKS">{}</div>',  # WordPress's, in capitals
        '<nav Aria-Label="Pages">{}</nav>',
        '<nav aria-label="&#80;agination">{}</nav>',  # a reference spells the word
        '<ul class="pagination">{}</ul>',
        '<p class="pagelink conl">{}</p>',  # FluxBB's
    ],
)
def test_pager_widgets_are_found_with_the_markup_as_without(widget: str) -> None:
    link = '<a href="/c/x?page=3">3</a>'
    body = f"<html><body>{widget.format(link)}</body></html>".encode()
    tree = LexborHTMLParser(body)
    url = "https://s.example/c/x?page=2"
    boxed = Pager(tree, url, Markup(body)).boxed
    assert boxed and boxed == Pager(tree, url).boxed
    absent = f"<html><body><div class=pg>{link}</div></body></html>".encode()
    assert not Pager(LexborHTMLParser(absent), url, Markup(absent)).boxed


def test_pager_links_on_the_www_twin_of_the_page_host() -> None:
    url = "https://shop.example/c/lamps?page=2"
    body = """<div class="pagination"><a href="https://www.shop.example/c/lamps?page=3">3</a>
      </div><a href="https://elsewhere.example/c/lamps?page=3">3</a>"""
    assert _pagination(url, body) == {"https://www.shop.example/c/lamps?page=3"}


def test_product_ids_and_a_calendar_are_not_pages() -> None:
    url = "https://s.example/p/123"
    body = """<section class="related"><a href="/p/124">Lamp</a><a href="/p/125"><img></a>
      </section><table class="calendar"><tr><td><a href="/2016/03/01/">1</a></td>
      <td><a href="/2016/03/02/">2</a></td></tr></table>
      <ul class="pager date-nav"><li class="date-prev"><a href="/events?mini=2016-02">«</a></li>
      <li class="date-next"><a href="/events?mini=2016-04">»</a></li></ul>"""
    assert _pagination(url, body) == set()


def test_sort_and_size_links_in_a_pager_are_not_pages() -> None:
    url = "https://s.example/c/lamps?page=2&pageSize=32"
    body = """<div class="paginator"><a href="/c/lamps?page=3&amp;pageSize=32">3</a>
      <a href="/c/lamps?pageSize=60">60</a><a href="/c/lamps?pageSize=96">96</a>
      <a href="/c/lamps?order=price&amp;pageSize=32">Price</a></div>"""
    assert _pagination(url, body) == {"https://s.example/c/lamps?page=3&pageSize=32"}


def test_a_title_is_never_a_pager_link() -> None:
    url = "https://f.example/threads/marsh.4057/"
    body = """<div class="PageNav"><a href="/threads/marsh.4057/page-2">2</a></div>
      <blockquote><a href="/threads/marsh.4057/page-144">https://f.example/threads/marsh.4057/page-144</a>
      </blockquote>"""
    assert _pagination(url, body) == {"https://f.example/threads/marsh.4057/page-2"}


def test_head_next_and_prev_are_kept_deduplicated_first_and_last_are_not() -> None:
    url = "https://s.example/c/lamps?page=2"
    html = """<html><head><link rel="next" href="/c/lamps?page=3&amp;utm_source=x">
      <link rel="prev" href="https://www.s.example/c/lamps?page=1">
      <link rel="last" href="/c/lamps?page=40"></head><body>
      <div class="pagination"><a href="/c/lamps?page=3">3</a></div></body></html>"""
    parsed = parse_page(html.encode(), url)
    assert {link.url for link in parsed.links if link.kind == "pagination"} == {
        "https://s.example/c/lamps?page=3",
        "https://www.s.example/c/lamps?page=1",
    }


# -- load more and infinite scroll --------------------------------------------------------------


def test_declared_next_pages() -> None:
    html = """<div class="products" data-next-url="/c/lamps?page=2&amp;ajax=1"></div>
      <button class="btn load-more" data-endpoint="/api/products?category=lamps&amp;page=2">
      More</button><div class="infinite-scroll" data-ajax-url="/api/list?cursor=abc"></div>
      <a class="share" data-url="https://s.example/c/lamps">Share</a>
      <div class="quick-view" data-url="/p/12?view=quick"></div>
      <div data-next="2"></div><div data-product-url="/p/9"></div>"""
    assert declared_next(html) == [
        "/c/lamps?page=2&ajax=1",
        "/api/products?category=lamps&page=2",
        "/api/list?cursor=abc",
    ]


def test_an_ajax_fragment_declares_its_next_fragment() -> None:
    url = "https://s.example/c/lamps?page=2&ajax=1"
    body = """<link rel="next" href="/c/lamps?page=3&amp;ajax=1">
      <div class="card"><a href="/p/lamp-1">Lamp 1</a></div>"""
    assert _kinds(url, body) == {
        "https://s.example/c/lamps?page=3&ajax=1": "pagination",
        "https://s.example/p/lamp-1": "product",
    }


@pytest.mark.parametrize(
    ("url", "body", "pages"),
    [
        (  # Magento 2: ?p= in a "pages" block
            "https://s.example/lamps.html?p=2",
            '<div class="pages"><ul class="items pages-items"><li class="item"><a class="page" '
            'href="/lamps.html?p=1"><span>1</span></a></li><li class="item pages-item-next">'
            '<a class="action next" href="/lamps.html?p=3" title="Next"><span>Next</span></a>'
            '</li></ul></div><a href="/lamps.html?p=2&amp;product_list_order=price">Price</a>',
            {"/lamps.html?p=1", "/lamps.html?p=3"},
        ),
        (  # Drupal: zero-based ?page= in ul.pager, with titles on the links
            "https://s.example/news",
            '<ul class="pager"><li class="pager-next"><a title="Go to next page" '
            'href="/news?page=1">next ›</a></li><li class="pager-last"><a '
            'title="Go to last page" href="/news?page=12">last »</a></li></ul>',
            {"/news?page=1", "/news?page=12"},
        ),
        (  # phpBB: offsets, the first page without one
            "https://f.example/viewforum.php?f=7&start=50",
            '<div class="pagination"><a href="./viewforum.php?f=7">1</a> <a '
            'href="./viewforum.php?f=7&amp;start=25">2</a> <strong>3</strong> <a '
            'href="./viewforum.php?f=7&amp;start=75">4</a></div>'
            '<a href="./viewtopic.php?f=7&amp;t=1234">A topic</a>',
            {"/viewforum.php?f=7", "/viewforum.php?f=7&start=25", "/viewforum.php?f=7&start=75"},
        ),
        (  # eBay-like search: _pgn, the pager adds a tracking parameter of its own
            "https://s.example/sch/i.html?_nkw=lamp",
            '<nav class="pagination" aria-label="Results pagination"><a '
            'href="/sch/i.html?_nkw=lamp&amp;_pgn=2&amp;rt=nc">2</a><a class="pagination__next" '
            'href="/sch/i.html?_nkw=lamp&amp;_pgn=2&amp;rt=nc" aria-label="Go to next search '
            'page"></a></nav>',
            {"/sch/i.html?_nkw=lamp&_pgn=2&rt=nc"},
        ),
        (  # a numbered pager without any class: numbers on the page's own URL shape
            "https://s.example/catalog/lamps-2.html",
            '<p><a href="/catalog/lamps.html">1</a> 2 <a href="/catalog/lamps-3.html">3</a> '
            '<a href="/catalog/lamps-3.html">&gt;&gt;</a></p><a href="/catalog/desks-2.html">'
            "Desks</a>",
            {"/catalog/lamps.html", "/catalog/lamps-3.html"},
        ),
    ],
)
def test_common_pager_markup(url: str, body: str, pages: set[str]) -> None:
    origin = url.split("/", 3)[:3]
    assert _pagination(url, body) == {"/".join(origin) + p for p in pages}
