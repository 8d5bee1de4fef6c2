"""Browser identities: whole, internally consistent header sets, one per session.

A block detector looks for contradictions more than for any single header: a Firefox
User-Agent with ``sec-ch-ua``, a Windows UA with ``sec-ch-ua-platform: "macOS"``, headers in an
order no browser uses, a Chrome UA over a Python TLS handshake. So an identity is a complete
profile, taken as a unit: the headers in the order the browser sends a top-level navigation,
and ``tls``, the browser profile of the transport (``browser.py``) whose ClientHello and
HTTP/2 frames match the UA. Versions follow the newest profiles of the transport library
(wreq); a unit test checks that these headers equal the library's own defaults for the profile,
so an upgrade that moves them fails a test instead of producing a contradiction.

Deliberate deviation from the real browsers: ``Accept-Language`` has one shape for every profile
(``accept_language``), so a source's locale always yields the same header.
"""

from __future__ import annotations

import functools
import hashlib
import random
import re
from collections.abc import Collection
from dataclasses import dataclass
from typing import Literal
from urllib.parse import urlsplit

import msgspec

_CHROMIUM_ACCEPT = (
    "text/html,application/xhtml+xml,application/xml;q=0.9,image/avif,image/webp,"
    "image/apng,*/*;q=0.8,application/signed-exchange;v=b3;q=0.7"
)
_GECKO_ACCEPT = "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"
# What each browser offers; the transport decodes all of them, under the same size cap.
_ENCODING = {
    "chromium": "gzip, deflate, br, zstd",
    "firefox": "gzip, deflate, br, zstd",
    "safari": "gzip, deflate, br",
}
# aiohttp (plain mode) offers only what it decodes without optional packages.
PLAIN_ENCODING = "gzip, deflate"

SecFetchSite = Literal["none", "same-origin", "same-site", "cross-site"]


class Identity(msgspec.Struct, frozen=True):
    """A named header set; ``id`` is reported with results so blocks can be traced to it.

    ``tls`` names the transport profile (``chrome154/windows``); ``None`` means plain mode
    (aiohttp), used for a pinned User-Agent of no known browser.
    """

    id: str
    headers: dict[str, str]
    tls: str | None = None


@dataclass(frozen=True, slots=True)
class _Profile:
    id: str
    family: str  # "chromium" | "firefox" | "safari": decides header order
    user_agent: str
    tls: str  # the transport profile: "<library profile>/<platform>"
    brands: str | None = None  # sec-ch-ua; Chromium-based browsers only
    platform: str | None = None  # sec-ch-ua-platform


_CHROME_BRANDS = '"Chromium";v="154", "Google Chrome";v="154", "Not A(Brand";v="99"'
_EDGE_BRANDS = '"Chromium";v="148", "Microsoft Edge";v="148", "Not/A)Brand";v="99"'

PROFILES: tuple[_Profile, ...] = (
    _Profile(
        id="chrome154-win",
        family="chromium",
        user_agent=(
            "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 "
            "(KHTML, like Gecko) Chrome/154.0.0.0 Safari/537.36"
        ),
        tls="chrome154/windows",
        brands=_CHROME_BRANDS,
        platform='"Windows"',
    ),
    _Profile(
        id="chrome154-mac",
        family="chromium",
        user_agent=(
            "Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/537.36 "
            "(KHTML, like Gecko) Chrome/154.0.0.0 Safari/537.36"
        ),
        tls="chrome154/macos",
        brands=_CHROME_BRANDS,
        platform='"macOS"',
    ),
    _Profile(
        id="chrome154-linux",
        family="chromium",
        user_agent=(
            "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 "
            "(KHTML, like Gecko) Chrome/154.0.0.0 Safari/537.36"
        ),
        tls="chrome154/linux",
        brands=_CHROME_BRANDS,
        platform='"Linux"',
    ),
    _Profile(
        id="edge148-win",
        family="chromium",
        user_agent=(
            "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 "
            "(KHTML, like Gecko) Chrome/148.0.0.0 Safari/537.36 Edg/148.0.0.0"
        ),
        tls="edge148/windows",
        brands=_EDGE_BRANDS,
        platform='"Windows"',
    ),
    _Profile(
        id="firefox152-win",
        family="firefox",
        user_agent=(
            "Mozilla/5.0 (Windows NT 10.0; Win64; x64; rv:152.0) Gecko/20100101 Firefox/152.0"
        ),
        tls="firefox152/windows",
    ),
    _Profile(
        id="firefox152-mac",
        family="firefox",
        user_agent=(
            "Mozilla/5.0 (Macintosh; Intel Mac OS X 10.15; rv:152.0) Gecko/20100101 Firefox/152.0"
        ),
        tls="firefox152/macos",
    ),
    _Profile(
        id="safari26-mac",
        family="safari",
        user_agent=(
            "Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/605.1.15 "
            "(KHTML, like Gecko) Version/26.4 Safari/605.1.15"
        ),
        tls="safari26_4/macos",
    ),
)
# The current profile of each family: what a pinned browser User-Agent is sent with.
_FAMILY_TLS = {"chromium": "chrome154/windows", "firefox": "firefox152/windows"}
_FAMILY_TLS["safari"] = "safari26_4/macos"

_LOCALE = re.compile(r"([A-Za-z]{2,3})(?:[-_]([A-Za-z]{2}|[0-9]{3}))?")


def accept_language(locale: str) -> str:
    """``en-US`` → ``en-US,en;q=0.9``; ``de-DE`` → ``de-DE,de;q=0.9,en;q=0.8``.

    English stays as the last fallback, as in a browser installed in another language.
    """
    match = _LOCALE.fullmatch(locale.strip())
    if match is None:
        return "en-US,en;q=0.9"
    lang = match[1].lower()
    tags = [f"{lang}-{match[2].upper()}", lang] if match[2] else [lang]
    if lang != "en":
        tags.append("en")
    weighted = [f"{tag};q=0.{9 - i}" for i, tag in enumerate(tags[1:])]
    return ",".join([tags[0], *weighted])


@functools.lru_cache(maxsize=4096)  # one lookup per fetch; sessions repeat
def identity_for(
    session_key: str,
    *,
    generation: int = 0,
    locale: str = "en-US",
    user_agent: str | None = None,
) -> Identity:
    """The identity of one session; deterministic in (``session_key``, ``generation``).

    Bump ``generation`` after a block: consecutive generations never repeat a profile, and
    every profile is used once before any comes back. ``user_agent`` pins a source's own UA;
    the header order follows its browser family, and no ``sec-ch-ua*`` is sent, since brand
    lists cannot be derived from a UA string without risking a contradiction.
    """
    language = accept_language(locale)
    if user_agent is not None:
        digest = hashlib.sha256(user_agent.encode()).hexdigest()[:8]
        family = _family_of(user_agent)
        pinned = _Profile(
            id=f"pinned-{digest}",
            family=family or "firefox",  # the shortest, least distinctive order
            user_agent=user_agent,
            tls=_FAMILY_TLS.get(family or "", ""),
        )
        return Identity(id=pinned.id, headers=_headers(pinned, language), tls=pinned.tls or None)
    # A fixed shuffle per session, walked by generation: stable, and rotation always changes.
    seed = int.from_bytes(hashlib.sha256(session_key.encode()).digest()[:8], "big")
    order = list(PROFILES)
    random.Random(seed).shuffle(order)
    profile = order[generation % len(order)]
    return Identity(id=profile.id, headers=_headers(profile, language), tls=profile.tls)


def identity_avoiding(
    session_key: str,
    avoid: Collection[str],
    *,
    generation: int = 0,
    locale: str = "en-US",
    user_agent: str | None = None,
) -> Identity:
    """The session's identity at ``generation``, or at the next generations until one is not
    in ``avoid`` (a verify job's re-check must not look like the fetch that saw the change);
    when every profile is avoided (or the source pins one), the one at ``generation``."""
    first = identity_for(session_key, generation=generation, locale=locale, user_agent=user_agent)
    if not avoid or first.id not in avoid:
        return first
    for step in range(1, len(PROFILES)):
        other = identity_for(
            session_key, generation=generation + step, locale=locale, user_agent=user_agent
        )
        if other.id not in avoid:
            return other
    return first


def _family_of(user_agent: str) -> str | None:
    if "Firefox/" in user_agent or "Gecko/" in user_agent:
        return "firefox"
    if "Chrome/" in user_agent or "Chromium/" in user_agent:
        return "chromium"
    if "Safari/" in user_agent:
        return "safari"
    return None  # a bot's own name: plain mode, no handshake of a browser it does not claim


def _headers(profile: _Profile, language: str) -> dict[str, str]:
    encoding = _ENCODING[profile.family]
    if profile.family == "chromium":
        headers: dict[str, str] = {}
        if profile.brands is not None and profile.platform is not None:
            headers["sec-ch-ua"] = profile.brands
            headers["sec-ch-ua-mobile"] = "?0"
            headers["sec-ch-ua-platform"] = profile.platform
        headers |= {
            "Upgrade-Insecure-Requests": "1",
            "User-Agent": profile.user_agent,
            "Accept": _CHROMIUM_ACCEPT,
            "Sec-Fetch-Site": "none",
            "Sec-Fetch-Mode": "navigate",
            "Sec-Fetch-User": "?1",
            "Sec-Fetch-Dest": "document",
            "Accept-Encoding": encoding,
            "Accept-Language": language,
            "Priority": "u=0, i",
        }
        return headers
    if profile.family == "safari":
        return {
            "Sec-Fetch-Dest": "document",
            "User-Agent": profile.user_agent,
            "Accept": _GECKO_ACCEPT,
            "Sec-Fetch-Site": "none",
            "Sec-Fetch-Mode": "navigate",
            "Accept-Language": language,
            "Priority": "u=0, i",
            "Accept-Encoding": encoding,
        }
    return {
        "User-Agent": profile.user_agent,
        "Accept": _GECKO_ACCEPT,
        "Accept-Language": language,
        "Accept-Encoding": encoding,
        "Upgrade-Insecure-Requests": "1",
        "Sec-Fetch-Dest": "document",
        "Sec-Fetch-Mode": "navigate",
        "Sec-Fetch-Site": "none",
        "Sec-Fetch-User": "?1",
        "Priority": "u=0, i",
        "TE": "trailers",
    }


# What each family sends for an <img>: a page's image is a sub-resource, not a navigation.
_IMAGE_ACCEPT = {
    "chromium": "image/avif,image/webp,image/apng,image/svg+xml,image/*,*/*;q=0.8",
    "firefox": "image/avif,image/webp,image/png,image/svg+xml,image/*;q=0.8,*/*;q=0.5",
    "safari": "image/webp,image/avif,image/jxl,image/heic,image/heic-sequence,video/*;q=0.8,"
    "image/png,image/svg+xml,image/*;q=0.8,*/*;q=0.5",
}
_IMAGE_PRIORITY = {"chromium": "i", "firefox": "u=5, i", "safari": "u=3, i"}
_NAVIGATION_ONLY = ("Upgrade-Insecure-Requests", "Sec-Fetch-User")


# Chromium reorders an image request's headers (captured from Chromium 156); the other
# families keep their navigation order.
_CHROMIUM_IMAGE_ORDER = (
    "sec-ch-ua-platform",
    "User-Agent",
    "sec-ch-ua",
    "sec-ch-ua-mobile",
    "Accept",
    "Sec-Fetch-Site",
    "Sec-Fetch-Mode",
    "Sec-Fetch-Dest",
    "Accept-Encoding",
    "Accept-Language",
    "Priority",
)


def image_headers(headers: dict[str, str]) -> dict[str, str]:
    """The identity's headers as its browser sends them for an image (same client hints, the
    family's order), so an image request does not stand out from the pages that embed it."""
    family = _family_of(headers.get("User-Agent", "")) or "firefox"
    out: dict[str, str] = {}
    for name, value in headers.items():
        if name in _NAVIGATION_ONLY:
            continue
        out[name] = {
            "Accept": _IMAGE_ACCEPT[family],
            "Sec-Fetch-Dest": "image",
            "Sec-Fetch-Mode": "no-cors",
            "Sec-Fetch-Site": "same-origin",
            "Priority": _IMAGE_PRIORITY[family],
        }.get(name, value)
    if family == "chromium":
        rank = {name: i for i, name in enumerate(_CHROMIUM_IMAGE_ORDER)}
        out = dict(sorted(out.items(), key=lambda item: rank.get(item[0], len(rank))))
    return out


# Firefox puts Connection right before the first of these it sends (Chromium right after Host,
# Safari last).
_FIREFOX_CONNECTION_BEFORE = ("Upgrade-Insecure-Requests", "Sec-Fetch-Dest")


def on_the_wire(headers: dict[str, str], *, http1: bool) -> tuple[dict[str, str], list[str]]:
    """The headers of a request and their order as the identity's browser puts them on the
    connection. HTTP/2 carries Host as ``:authority`` and forbids Connection. Over HTTP/1.1
    Chromium sends Host, then ``Connection: keep-alive``, and no Priority header (captured from
    Chromium 156 over HTTP/1.1, plain and TLS; ``tests/support/fingerprints``)."""
    if not http1:
        return headers, list(headers)
    family = _family_of(headers.get("User-Agent", "")) or "firefox"
    out = dict(headers)
    if family == "chromium":
        out.pop("Priority", None)
    names = [name for name in out if name.lower() not in ("host", "connection")]
    if family == "chromium":
        at = 0
    elif family == "firefox":
        at = next((names.index(n) for n in _FIREFOX_CONNECTION_BEFORE if n in names), len(names))
    else:
        at = len(names)
    names.insert(at, "Connection")
    out["Connection"] = "keep-alive"
    return out, ["Host", *names]


# Where each family puts Referer: right before the first of these headers that it sends.
_REFERER_BEFORE = {
    "chromium": ("Accept-Encoding",),
    "firefox": ("Upgrade-Insecure-Requests", "Sec-Fetch-Dest"),
    "safari": ("Sec-Fetch-Site",),
}


def sec_fetch_site(url: str, referrer: str | None) -> SecFetchSite:
    """What a browser computes for a request to ``url`` made from the page ``referrer``.

    Same-site is approximated by the last two host labels (no public-suffix list), so
    ``a.shop.co.uk`` and ``b.other.co.uk`` read as same-site; sites rarely link that way.
    """
    if not referrer:
        return "none"
    target, origin = _split(url), _split(referrer)
    if target == origin:
        return "same-origin"
    if target[0] == origin[0] and _site(target[1]) == _site(origin[1]):
        return "same-site"
    return "cross-site"


def referer_value(url: str, referrer: str) -> str | None:
    """The Referer under Chrome's default policy (strict-origin-when-cross-origin): the full
    page URL within an origin, the origin alone across origins, nothing from https to http."""
    target, origin = _split(url), _split(referrer)
    if origin[0] == "https" and target[0] != "https":
        return None
    page = referrer.split("#", 1)[0]
    if target == origin:
        return page
    return f"{origin[0]}://{origin[1]}{'' if origin[2] is None else f':{origin[2]}'}/"


def with_referrer(headers: dict[str, str], url: str, referrer: str | None) -> dict[str, str]:
    """``headers`` for a request to ``url`` reached from the page ``referrer``: Referer in the
    family's place and ``Sec-Fetch-Site`` as the browser computes it. No referrer: a typed
    URL (``none``), as the headers already say for a navigation."""
    if not referrer:
        return headers
    site = sec_fetch_site(url, referrer)
    value = referer_value(url, referrer)
    family = _family_of(headers.get("User-Agent", "")) or "firefox"
    before = next((h for h in _REFERER_BEFORE[family] if h in headers), None)
    out: dict[str, str] = {}
    for name, current in headers.items():
        if name == before and value is not None:
            out["Referer"] = value
        out[name] = site if name == "Sec-Fetch-Site" else current
    if value is not None and "Referer" not in out:
        out["Referer"] = value
    return out


_DEFAULT_PORTS = {"http": 80, "https": 443}


def _split(url: str) -> tuple[str, str, int | None]:
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    port = parts.port if parts.port != _DEFAULT_PORTS.get(scheme) else None
    return scheme, (parts.hostname or "").lower(), port


def _site(host: str) -> str:
    return ".".join(host.rsplit(".", 2)[-2:])
