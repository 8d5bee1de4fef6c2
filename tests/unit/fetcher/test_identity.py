"""Browser identities: consistent, deterministic, rotated on a new generation."""

from __future__ import annotations

import itertools
import re

import msgspec
import pytest
from yarl import URL

from services.fetcher.http import accepts
from services.fetcher.identity import (
    PROFILES,
    Identity,
    accept_language,
    identity_avoiding,
    identity_for,
    image_headers,
)
from services.fetcher.proxies import Proxy, pick, pick_avoiding

PLATFORMS = {"Windows NT": '"Windows"', "Macintosh": '"macOS"', "X11; Linux": '"Linux"'}
NAVIGATION = {
    "Sec-Fetch-Dest": "document",
    "Sec-Fetch-Mode": "navigate",
    "Sec-Fetch-Site": "none",
    "Sec-Fetch-User": "?1",
    "Upgrade-Insecure-Requests": "1",
}


def every_identity() -> list[Identity]:
    """One session key per profile is enough to meet them all through rotation."""
    return [identity_for("s", generation=g) for g in range(len(PROFILES))]


def test_there_are_enough_distinct_profiles() -> None:
    ids = {identity.id for identity in every_identity()}
    assert len(ids) == len(PROFILES) >= 6
    assert {"chrome154-win", "edge148-win", "firefox152-win", "safari26-mac"} <= ids
    assert all(identity.tls for identity in every_identity())


@pytest.mark.parametrize("identity", every_identity(), ids=lambda i: i.id)
def test_profile_is_internally_consistent(identity: Identity) -> None:
    headers = identity.headers
    ua = headers["User-Agent"]
    assert headers["Accept-Encoding"].startswith("gzip, deflate, br")
    assert headers["Accept-Language"] == "en-US,en;q=0.9"
    assert headers["Accept"].startswith("text/html,application/xhtml+xml")
    for name, value in NAVIGATION.items():
        # Safari 26 sends neither Upgrade-Insecure-Requests nor Sec-Fetch-User.
        assert headers.get(name, value if "Version/26" in ua else None) == value
    # The transport profile is the UA's browser and version.
    assert identity.tls is not None
    product = next(p for p in ("Edg/", "Firefox/", "Version/", "Chrome/") if p in ua)
    version = ua.split(product)[1].split(".")[0]
    assert version in identity.tls
    chromium = "Chrome/" in ua
    if chromium:
        # Brand list, platform and version agree with the UA.
        major = re.search(r"Chrome/(\d+)", ua)
        assert major is not None
        assert f'"Chromium";v="{major[1]}"' in headers["sec-ch-ua"]
        assert ("Edg/" in ua) == ("Microsoft Edge" in headers["sec-ch-ua"])
        assert headers["sec-ch-ua-mobile"] == "?0"
        (platform,) = [p for marker, p in PLATFORMS.items() if marker in ua]
        assert headers["sec-ch-ua-platform"] == platform
        # Chromium's order: client hints first, Accept-Language and Priority last.
        names = list(headers)
        assert names[:3] == ["sec-ch-ua", "sec-ch-ua-mobile", "sec-ch-ua-platform"]
        assert names[-2:] == ["Accept-Language", "Priority"]
    else:
        # Firefox and Safari send no client hints at all.
        assert not [name for name in headers if name.lower().startswith("sec-ch-ua")]
    if "Firefox/" in ua:
        assert next(iter(headers)) == "User-Agent"
        assert "Gecko/20100101" in ua


def test_deterministic() -> None:
    first = identity_for("shop.example#session-7", generation=2, locale="de-DE")
    again = identity_for("shop.example#session-7", generation=2, locale="de-DE")
    assert first == again
    assert list(first.headers) == list(again.headers)
    # Sessions spread over the profiles rather than all starting on the same one.
    starts = {identity_for(f"session-{n}").id for n in range(50)}
    assert len(starts) >= 4


def test_new_generation_rotates_profile() -> None:
    for key in ("a", "b", "shop.example#1"):
        seen = [identity_for(key, generation=g).id for g in range(3 * len(PROFILES))]
        assert all(x != y for x, y in itertools.pairwise(seen))
        # Every profile is used before any comes back.
        assert len(set(seen[: len(PROFILES)])) == len(PROFILES)


def test_a_recheck_never_presents_the_identity_or_proxy_it_must_avoid() -> None:
    """A verify job's re-check: another identity and proxy than the fetch that saw the change,
    whatever its own session would draw, as long as the policy has another."""
    for n in range(40):
        key = f"{n}:shop.example"
        drawn = identity_for(key).id
        other = identity_avoiding(key, {drawn})
        assert other.id != drawn
        assert identity_avoiding(key, {"none-of-these"}) == identity_for(key)
        everything = {p.id for p in every_identity()}
        assert identity_avoiding(key, everything).id == drawn  # nothing else to present
    bot = "AcmeBot/2.1"
    pinned = identity_for("s", user_agent=bot)
    assert identity_avoiding("s", {pinned.id}, user_agent=bot) == pinned  # the source's choice
    proxies = [Proxy(id=str(i), url=URL(f"http://10.0.0.{i}:3128"), headers=None) for i in range(3)]
    for n in range(40):
        key = f"{n}:shop.example"
        drawn = pick(proxies, key, 0)
        assert drawn is not None
        again = pick_avoiding(proxies, key, 0, {drawn.id})
        assert again is not None and again.id != drawn.id
    assert pick_avoiding(proxies[:1], "s", 0, {"0"}) == proxies[0]
    assert pick_avoiding([], "s", 0, {"0"}) is None


@pytest.mark.parametrize(
    ("locale", "expected"),
    [
        ("en-US", "en-US,en;q=0.9"),
        ("en-GB", "en-GB,en;q=0.9"),
        ("de-DE", "de-DE,de;q=0.9,en;q=0.8"),
        ("fr_CA", "fr-CA,fr;q=0.9,en;q=0.8"),
        ("nl", "nl,en;q=0.9"),
        ("", "en-US,en;q=0.9"),
    ],
)
def test_accept_language_follows_locale(locale: str, expected: str) -> None:
    assert accept_language(locale) == expected
    if locale:
        assert identity_for("s", locale=locale).headers["Accept-Language"] == expected


def test_pinned_user_agent_never_contradicted() -> None:
    bot = identity_for("s", user_agent="AcmeBot/2.1 (+https://acme.example/bot)")
    assert bot.headers["User-Agent"] == "AcmeBot/2.1 (+https://acme.example/bot)"
    assert bot.id.startswith("pinned-")
    assert bot.tls is None  # no browser claimed: plain mode, no browser handshake
    chrome_ua = (
        "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 "
        "(KHTML, like Gecko) Chrome/120.0.0.0 Safari/537.36"
    )
    pinned = identity_for("s", generation=3, user_agent=chrome_ua, locale="de-DE")
    assert pinned.headers["User-Agent"] == chrome_ua
    assert not [name for name in pinned.headers if name.lower().startswith("sec-ch-ua")]
    assert pinned.headers["Accept-Language"] == "de-DE,de;q=0.9,en;q=0.8"
    assert pinned.tls is not None and pinned.tls.startswith("chrome")
    # The pin is stable across generations: the source chose it.
    assert identity_for("s", generation=4, user_agent=chrome_ua, locale="de-DE") == pinned


def test_identity_round_trips_as_json() -> None:
    identity = identity_for("s")
    assert msgspec.json.decode(msgspec.json.encode(identity), type=Identity) == identity


@pytest.mark.parametrize("generation", range(len(PROFILES)))
def test_an_image_request_looks_like_the_same_browser_loading_an_img(generation: int) -> None:
    page = identity_for("job:shop", generation=generation, locale="en-US").headers
    image = image_headers(page)
    assert image["User-Agent"] == page["User-Agent"]
    assert image["Accept"].startswith("image/") and "text/html" not in image["Accept"]
    assert image["Sec-Fetch-Dest"] == "image" and image["Sec-Fetch-Mode"] == "no-cors"
    assert "Upgrade-Insecure-Requests" not in image and "Sec-Fetch-User" not in image
    assert set(image) == set(page) - {"Upgrade-Insecure-Requests", "Sec-Fetch-User"}
    if "sec-ch-ua" not in page:  # not Chromium: the navigation's order is kept
        assert [k for k in page if k in image] == list(image)
    else:  # Chromium's own order for an image (checked against real Chromium's capture)
        assert list(image)[:2] == ["sec-ch-ua-platform", "User-Agent"]


def test_accept_types_match_exactly_or_by_major_type() -> None:
    assert accepts(["image/*"], "image/webp")
    assert accepts(["text/xml", "application/xml"], "application/xml")
    assert not accepts(["image/*"], "text/html")
    assert not accepts(["application/json"], "application/xml")
