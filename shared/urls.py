"""URL canonicalisation: one spelling per page, so the frontier and the products dedupe.

``canonicalize`` spells a URL as a browser sends it (w3lib's ``safe_url_string``: percent
encoding, IDNA host), lowercases scheme and host, resolves dot segments, drops the fragment and
the default port, strips tracking parameters and refuses anything but http(s). The query keeps
its parameters in the order written: the link is the one the page gives (a sorted query is a
URL no page shows, and some servers route on the order).

w3lib costs ~45 µs a URL and ``urljoin`` another ~12 µs; a listing page has hundreds of links,
so plain ASCII URLs take a hand-written fast path that yields the same string (a unit test holds
the two paths equal) and results are memoised — navigation links repeat on every page of a site.
"""

from __future__ import annotations

import re
from functools import lru_cache
from urllib.parse import urljoin, urlsplit

from w3lib.url import safe_url_string

from shared.caching import short_key_cache

TRACKING_PARAMS = frozenset({"gclid", "fbclid", "msclkid", "srsltid", "mc_cid", "mc_eid"})
TRACKING_PREFIXES = ("utm_",)
DEFAULT_PORTS = {"http": "80", "https": "443"}

# Characters that w3lib leaves untouched in a path / in a query key or value.
_SAFE_PATH = re.compile(r"[A-Za-z0-9._~!$&'()*+,;=:@/-]*")
_SAFE_QUERY_PART = re.compile(r"[A-Za-z0-9._~/:,-]*")
_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*):")
_CONTROL_OR_SPACE = re.compile(r"[\x00- ]").search  # a character at or below U+0020


@lru_cache(maxsize=65536)
def host_of(url: str) -> str:
    """``host[:port]`` as written in ``allowed_domains``: lowercase, default port omitted."""
    try:
        parts = urlsplit(url.strip())
        host = (parts.hostname or "").rstrip(".")
        port = parts.port
    except ValueError:
        return ""
    if port is not None and str(port) != DEFAULT_PORTS.get(parts.scheme.lower()):
        return f"{host}:{port}"
    return host


def is_tracking_param(name: str) -> bool:
    low = name.lower()
    return low in TRACKING_PARAMS or low.startswith(TRACKING_PREFIXES)


MAX_URL = 2048  # the de-facto limit browsers, servers and sitemaps (2,048) agree on


def canonicalize(url: str, base: str | None = None) -> str | None:
    """The canonical absolute http(s) URL of ``url`` resolved against ``base``, else None."""
    if not isinstance(url, str):
        return None
    return _canonicalize(url, base)


@short_key_cache(65536)
def _canonicalize(url: str, base: str | None) -> str | None:
    # Browsers strip leading/trailing C0 controls and spaces and drop tabs/newlines inside.
    url = url.strip(" \t\r\n\f\v\x00").replace("\t", "").replace("\n", "").replace("\r", "")
    if not url or url.startswith("#"):
        return None
    m = _SCHEME.match(url)
    if m:
        if m.group(1).lower() not in DEFAULT_PORTS:
            return None
    elif base:
        origin = _origin(base) if url.startswith("/") and not url.startswith("//") else None
        joined = origin + url if origin else _join(base, url)
        if joined is None:
            return None
        url = joined
    else:
        return None
    try:
        fast = _fast_canonical(url)
        out = fast if fast is not None else _slow_canonical(url)
    except (ValueError, UnicodeError):
        return None
    if out is None or len(out) > MAX_URL:
        return None  # a longer link is junk or an attack, and breaks the frontier's index
    if "@" in out.split("/", 3)[2]:
        return None  # credentials in a link must never be stored, logged or sent on
    return out


@lru_cache(maxsize=1024)
def _origin(base: str) -> str | None:
    """``scheme://host[:port]`` of a plain base URL, for the common root-relative href."""
    scheme, sep, rest = base.partition("://")
    if not sep or scheme.lower() not in DEFAULT_PORTS:
        return None
    netloc = rest.split("/", 1)[0].split("?", 1)[0].split("#", 1)[0]
    return f"{scheme}://{netloc}" if netloc and "@" not in netloc and "\\" not in netloc else None


def _join(base: str, ref: str) -> str | None:
    try:
        joined = urljoin(base, ref)
    except ValueError:
        return None
    m = _SCHEME.match(joined)
    return joined if m and m.group(1).lower() in DEFAULT_PORTS else None


def _fast_canonical(url: str) -> str | None:
    """Canonical form of a plain-ASCII URL, or None when it needs w3lib's full treatment."""
    if not url.isascii() or "%" in url or "\\" in url or "/." in url:
        return None
    scheme, sep, rest = url.partition("://")
    if not sep:
        return None
    scheme = scheme.lower()
    rest, _, _ = rest.partition("#")
    rest, qmark, query = rest.partition("?")
    netloc, slash, path = rest.partition("/")
    if "@" in netloc or "[" in netloc or not netloc:
        return None
    host, colon, port = netloc.partition(":")
    host = host.lower().rstrip(".")
    if not host or (colon and not port.isdigit()):
        return None
    if colon and port != DEFAULT_PORTS.get(scheme):
        host = f"{host}:{int(port)}"
    if _CONTROL_OR_SPACE(host):
        return None
    path = "/" + path if slash else "/"
    if not _SAFE_PATH.fullmatch(path):
        return None
    out = f"{scheme}://{host}{path}"
    if not qmark or not query:
        return out
    kept: list[str] = []
    for part in query.split("&"):
        if not part:
            continue
        key, _, value = part.partition("=")
        if is_tracking_param(key):
            continue  # dropped whatever its spelling: w3lib's escaping keeps a utm_ key utm_
        if not _SAFE_QUERY_PART.fullmatch(key) or not _SAFE_QUERY_PART.fullmatch(value):
            return None
        kept.append(part)
    return out + "?" + "&".join(kept) if kept else out


def _slow_canonical(url: str) -> str | None:
    parts = urlsplit(safe_url_string(url))
    scheme = parts.scheme.lower()
    if scheme not in DEFAULT_PORTS or not parts.hostname:
        return None
    netloc = parts.netloc.lower().rstrip(".")
    if parts.port is not None and str(parts.port) == DEFAULT_PORTS[scheme]:
        netloc = netloc.rsplit(":", 1)[0]
    kept = [p for p in parts.query.split("&") if p and not is_tracking_param(p.partition("=")[0])]
    path = _without_dot_segments(parts.path) or "/"
    return f"{scheme}://{netloc}{path}" + ("?" + "&".join(kept) if kept else "")


def _without_dot_segments(path: str) -> str:
    """RFC 3986 §5.2.4: ``/a/./b/../c`` → ``/a/c``."""
    if "/." not in path:
        return path
    out: list[str] = []
    segments = path.split("/")
    for i, seg in enumerate(segments):
        last = i == len(segments) - 1
        if seg == ".":
            if last:
                out.append("")
        elif seg == "..":
            if len(out) > 1:
                out.pop()
            if last:
                out.append("")
        else:
            out.append(seg)
    return "/".join(out)
