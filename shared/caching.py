"""Memoisation for functions of page text (hrefs, class lists, URLs).

A page's strings repeat across a site, so caching what they mean pays. But the caches are
long-lived and sized in entries, not bytes: a hostile page of thousands of 5 KB hrefs filled
them with ~16 MB of keys a page, and the parser's memory grew without end (45 → 437 MB in
twenty such pages). ``short_key_cache`` keeps a key only when each of its strings is short;
a longer one is computed each time, which no real page notices.

It wraps ``functools.lru_cache`` (C) rather than ``shared.lru.LRU`` (an ``OrderedDict`` for
the services' caches of sources, robots policies and renders): these caches are hit per link
and per element of every page.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import _CacheInfo, lru_cache, update_wrapper
from typing import Any, ParamSpec, Protocol, TypeVar, cast

P = ParamSpec("P")
R = TypeVar("R")
R_co = TypeVar("R_co", covariant=True)

CACHED_LENGTH = 512  # characters; an href, a class list or a URL longer than this is not kept


class ShortKeyCache(Protocol[P, R_co]):
    """What ``short_key_cache`` makes: the function, cached, with ``lru_cache``'s controls."""

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> R_co: ...

    def cache_clear(self) -> None: ...

    def cache_info(self) -> _CacheInfo: ...


def short_key_cache(
    maxsize: int, limit: int = CACHED_LENGTH
) -> Callable[[Callable[P, R]], ShortKeyCache[P, R]]:
    """``@short_key_cache(4096)``: ``functools.lru_cache`` of ``maxsize`` entries that passes a
    call with a string argument longer than ``limit`` straight to the function. Functions of
    one or two positional arguments (all the page-text caches are) get wrappers of their
    own, without the ``*args`` tuple and loop: with them the bench pages parse as fast as
    with plain ``lru_cache``."""

    def decorate(fn: Callable[P, R]) -> ShortKeyCache[P, R]:
        cached: Callable[..., Any] = lru_cache(maxsize=maxsize)(fn)
        plain: Callable[..., Any] = fn
        arity = fn.__code__.co_argcount

        def one(arg: Any) -> Any:
            if type(arg) is str and len(arg) > limit:
                return plain(arg)
            return cached(arg)

        def two(first: Any, second: Any) -> Any:
            if (type(first) is str and len(first) > limit) or (
                type(second) is str and len(second) > limit
            ):
                return plain(first, second)
            return cached(first, second)

        def many(*args: Any) -> Any:
            if any(type(a) is str and len(a) > limit for a in args):
                return plain(*args)
            return cached(*args)

        call: Any = one if arity == 1 else two if arity == 2 else many
        update_wrapper(call, fn)
        call.cache_clear = cached.cache_clear  # type: ignore[attr-defined]
        call.cache_info = cached.cache_info  # type: ignore[attr-defined]
        return cast(ShortKeyCache[P, R], call)

    return decorate
