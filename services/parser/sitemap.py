"""Sitemaps: ``<urlset>`` and ``<sitemapindex>`` files (gzip too), and robots.txt ``Sitemap:``
lines, turned into links.

A bounded scan of ``<loc>`` elements rather than an XML parser: sitemaps are simple, real ones
are often slightly broken, and a scan can neither expand entities nor build a huge tree.
"""

from __future__ import annotations

import gzip
import html
import re
import zlib

from schemas.messages import Link, LinkKind
from schemas.source import Source
from services.parser.links import classify_url
from shared.urls import canonicalize

MAX_DECOMPRESSED = 50 * 1024 * 1024  # the sitemap protocol's own limit
MAX_URLS = 50_000

_LOC = re.compile(rb"<loc>\s*(?:<!\[CDATA\[)?\s*(.*?)\s*(?:\]\]>)?\s*</loc>", re.I | re.S)
_ENTRY = re.compile(rb"<(?:url|sitemap)>(.*?)</(?:url|sitemap)>", re.I | re.S)
_LASTMOD = re.compile(rb"<lastmod>\s*([0-9T:+\-.Z]{4,40})\s*</lastmod>", re.I)
_INDEX = re.compile(rb"<sitemapindex[\s>]", re.I)
_ROBOTS_SITEMAP = re.compile(rb"^\s*sitemap\s*:\s*(\S+)", re.I | re.M)


def is_sitemap(body: bytes, content_type: str | None) -> bool:
    head = _inflate(body)[:2048].lstrip()
    return head.startswith(b"<?xml") and (b"<urlset" in head or b"<sitemapindex" in head)


def parse_sitemap(body: bytes, url: str, source: Source | None) -> list[Link]:
    """Links of a sitemap (children of an index are ``sitemap`` links, pages are classified
    by the source's rules) or of a robots.txt's ``Sitemap:`` lines."""
    data = _inflate(body)
    found: list[tuple[bytes, LinkKind | None, str | None]]
    if url.rstrip("/").endswith("/robots.txt") and b"<" not in data[:100]:
        found = [(m, "sitemap", None) for m in _ROBOTS_SITEMAP.findall(data)]
    else:
        kind: LinkKind | None = "sitemap" if _INDEX.search(data[:4096]) else None
        found = []
        for entry in _ENTRY.findall(data) or [data]:
            stamp = _LASTMOD.search(entry)
            found += [(m, kind, stamp[1].decode() if stamp else None) for m in _LOC.findall(entry)]
    links: list[Link] = []
    seen: set[str] = set()
    for raw, kind, lastmod in found[:MAX_URLS]:
        canon = canonicalize(html.unescape(raw.decode("utf-8", "replace")), url)
        if canon is None or canon in seen:
            continue
        seen.add(canon)
        links.append(Link(url=canon, kind=kind or classify_url(canon, source), lastmod=lastmod))
    return links


def _inflate(body: bytes) -> bytes:
    """Gunzip a ``.xml.gz`` body (served as a file, so not undone by Content-Encoding)."""
    if not body.startswith(b"\x1f\x8b"):
        return body
    try:
        inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)
        data = inflater.decompress(body, MAX_DECOMPRESSED)
    except zlib.error:
        return b""
    return data


__all__ = ["gzip", "is_sitemap", "parse_sitemap"]
