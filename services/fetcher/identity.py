"""Browser identities: whole, internally consistent header sets, one per session.

A block detector looks for contradictions more than for any single header: a Firefox
User-Agent with ``sec-ch-ua``, a Windows UA with ``sec-ch-ua-platform: "macOS"``, headers in an
order no browser uses. So an identity is a complete profile, taken as a unit, in the order the
browser sends a top-level navigation over HTTP/1.1 (aiohttp adds ``Host`` and ``Connection``).

Deliberate deviations from the real browsers:

* ``Accept-Encoding`` is ``gzip, deflate`` everywhere: we cannot decode br/zstd reliably, and
  advertising an encoding we cannot read would corrupt bodies.
* ``Accept-Language`` has one shape for every profile (``accept_language``), so a source's
  locale always yields the same header.
"""

from __future__ import annotations

import functools
import hashlib
import random
import re
from dataclasses import dataclass

import msgspec

_CHROMIUM_ACCEPT = (
    "text/html,application/xhtml+xml,application/xml;q=0.9,image/avif,image/webp,"
    "image/apng,*/*;q=0.8,application/signed-exchange;v=b3;q=0.7"
)
_GECKO_ACCEPT = "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"
_ENCODING = "gzip, deflate"


class Identity(msgspec.Struct, frozen=True):
    """A named header set; ``id`` is reported with results so blocks can be traced to it."""

    id: str
    headers: dict[str, str]


@dataclass(frozen=True, slots=True)
class _Profile:
    id: str
    family: str  # "chromium" | "firefox" | "safari": decides header order
    user_agent: str
    brands: str | None = None  # sec-ch-ua; Chromium-based browsers only
    platform: str | None = None  # sec-ch-ua-platform


PROFILES: tuple[_Profile, ...] = (
    _Profile(
        id="chrome131-win",
        family="chromium",
        user_agent=(
            "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 "
            "(KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36"
        ),
        brands='"Google Chrome";v="131", "Chromium";v="131", "Not_A Brand";v="24"',
        platform='"Windows"',
    ),
    _Profile(
        id="chrome131-mac",
        family="chromium",
        user_agent=(
            "Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/537.36 "
            "(KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36"
        ),
        brands='"Google Chrome";v="131", "Chromium";v="131", "Not_A Brand";v="24"',
        platform='"macOS"',
    ),
    _Profile(
        id="chrome131-linux",
        family="chromium",
        user_agent=(
            "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 "
            "(KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36"
        ),
        brands='"Google Chrome";v="131", "Chromium";v="131", "Not_A Brand";v="24"',
        platform='"Linux"',
    ),
    _Profile(
        id="edge131-win",
        family="chromium",
        user_agent=(
            "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 "
            "(KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36 Edg/131.0.0.0"
        ),
        brands='"Microsoft Edge";v="131", "Chromium";v="131", "Not_A Brand";v="24"',
        platform='"Windows"',
    ),
    _Profile(
        id="firefox133-win",
        family="firefox",
        user_agent=(
            "Mozilla/5.0 (Windows NT 10.0; Win64; x64; rv:133.0) Gecko/20100101 Firefox/133.0"
        ),
    ),
    _Profile(
        id="firefox133-mac",
        family="firefox",
        user_agent=(
            "Mozilla/5.0 (Macintosh; Intel Mac OS X 10.15; rv:133.0) Gecko/20100101 Firefox/133.0"
        ),
    ),
    _Profile(
        id="safari18-mac",
        family="safari",
        user_agent=(
            "Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/605.1.15 "
            "(KHTML, like Gecko) Version/18.1 Safari/605.1.15"
        ),
    ),
)

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
        pinned = _Profile(
            id=f"pinned-{digest}", family=_family_of(user_agent), user_agent=user_agent
        )
        return Identity(id=pinned.id, headers=_headers(pinned, language))
    # A fixed shuffle per session, walked by generation: stable, and rotation always changes.
    seed = int.from_bytes(hashlib.sha256(session_key.encode()).digest()[:8], "big")
    order = list(PROFILES)
    random.Random(seed).shuffle(order)
    profile = order[generation % len(order)]
    return Identity(id=profile.id, headers=_headers(profile, language))


def _family_of(user_agent: str) -> str:
    if "Firefox/" in user_agent or "Gecko/" in user_agent:
        return "firefox"
    if "Chrome/" in user_agent or "Chromium/" in user_agent:
        return "chromium"
    if "Safari/" in user_agent:
        return "safari"
    return "firefox"  # the shortest, least distinctive order for anything else


def _headers(profile: _Profile, language: str) -> dict[str, str]:
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
            "Accept-Encoding": _ENCODING,
            "Accept-Language": language,
        }
        return headers
    if profile.family == "safari":
        return {
            "Sec-Fetch-Dest": "document",
            "User-Agent": profile.user_agent,
            "Upgrade-Insecure-Requests": "1",
            "Accept": _GECKO_ACCEPT,
            "Sec-Fetch-Site": "none",
            "Sec-Fetch-Mode": "navigate",
            "Sec-Fetch-User": "?1",
            "Accept-Language": language,
            "Accept-Encoding": _ENCODING,
        }
    return {
        "User-Agent": profile.user_agent,
        "Accept": _GECKO_ACCEPT,
        "Accept-Language": language,
        "Accept-Encoding": _ENCODING,
        "Upgrade-Insecure-Requests": "1",
        "Sec-Fetch-Dest": "document",
        "Sec-Fetch-Mode": "navigate",
        "Sec-Fetch-Site": "none",
        "Sec-Fetch-User": "?1",
    }


# What each family sends for an <img>: a page's image is a sub-resource, not a navigation.
_IMAGE_ACCEPT = {
    "chromium": "image/avif,image/webp,image/apng,image/svg+xml,image/*,*/*;q=0.8",
    "firefox": "image/avif,image/webp,image/png,image/svg+xml,image/*;q=0.8,*/*;q=0.5",
    "safari": "image/webp,image/avif,image/jxl,image/heic,image/heic-sequence,video/*;q=0.8,"
    "image/png,image/svg+xml,image/*;q=0.8,*/*;q=0.5",
}
_NAVIGATION_ONLY = ("Upgrade-Insecure-Requests", "Sec-Fetch-User")


def image_headers(headers: dict[str, str]) -> dict[str, str]:
    """The identity's headers as its browser sends them for an image (same order, same
    client hints), so an image request does not stand out from the pages that embed it."""
    family = _family_of(headers.get("User-Agent", ""))
    out: dict[str, str] = {}
    for name, value in headers.items():
        if name in _NAVIGATION_ONLY:
            continue
        out[name] = {
            "Accept": _IMAGE_ACCEPT[family],
            "Sec-Fetch-Dest": "image",
            "Sec-Fetch-Mode": "no-cors",
            "Sec-Fetch-Site": "same-origin",
        }.get(name, value)
    return out
