"""short_key_cache: page strings are memoised only when short, so a hostile page's long hrefs
and class lists cannot fill the parser's long-lived caches."""

from __future__ import annotations

from services.parser import links
from services.parser.page import parse_page
from shared import urls
from shared.caching import CACHED_LENGTH, short_key_cache


def test_short_keys_are_cached_and_long_ones_are_not() -> None:
    calls: list[str] = []

    @short_key_cache(16)
    def upper(text: str) -> str:
        calls.append(text)
        return text.upper()

    long = "x" * (CACHED_LENGTH + 1)
    assert upper("ab") == upper("ab") == "AB"
    assert upper(long) == upper(long) == long.upper()
    assert calls == ["ab", long, long]  # the short one once, the long one each time
    assert upper.cache_info().currsize == 1
    upper.cache_clear()
    assert upper.cache_info().currsize == 0


def test_two_and_more_arguments() -> None:
    @short_key_cache(16)
    def join(a: str, b: str | None) -> str:
        return a + (b or "")

    @short_key_cache(16)
    def join3(a: str, b: str, c: str) -> str:
        return a + b + c

    long = "y" * (CACHED_LENGTH + 1)
    assert join("a", None) == "a" and join("a", long) == "a" + long and join(long, "b")
    assert join.cache_info().currsize == 1
    assert join3("a", "b", "c") == "abc" and join3("a", long, "c") == "a" + long + "c"
    assert join3.cache_info().currsize == 1


def test_a_page_of_long_hrefs_leaves_the_url_caches_as_they_were() -> None:
    """The shape that grew the parser by ~16 MB a page: thousands of 5 KB hrefs."""
    tail = "q" * 5000
    anchors = "".join(f'<a class="c{i}{tail}" href="/x/{i}/{tail}">l</a>' for i in range(300))
    page = f"<html><body><h1>t</h1>{anchors}<a href='/short'>s</a></body></html>".encode()
    before = (links._resolve.cache_info().currsize, urls._canonicalize.cache_info().currsize)
    found = parse_page(page, "https://hostile.example/p")
    after = (links._resolve.cache_info().currsize, urls._canonicalize.cache_info().currsize)
    assert [link.url for link in found.links] == ["https://hostile.example/short"]
    assert after[0] - before[0] <= 2 and after[1] - before[1] <= 2  # the short href's, at most
    assert not any(len(key) > CACHED_LENGTH for key in links._MARKS)
    assert not any(len(raw) > CACHED_LENGTH for raw in links._site_hrefs("https://hostile.example"))
