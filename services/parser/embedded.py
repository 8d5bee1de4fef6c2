"""JSON embedded in HTML: ``<script type="application/json">`` blocks such as Next.js's
``__NEXT_DATA__``, read with the source's ``api.mapping`` like an API response."""

from __future__ import annotations

import logging

from selectolax.lexbor import LexborHTMLParser

from schemas.messages import Product
from schemas.source import ApiMapping
from services.parser.api_mapping import ApiMappingError, decode_json, items_of, map_items

log = logging.getLogger(__name__)

MAX_BLOCKS = 20


def embedded_products(body: bytes, url: str, selector: str, mapping: ApiMapping) -> list[Product]:
    """Products of every block ``selector`` matches; a block that is not JSON is skipped."""
    tree = LexborHTMLParser(body)
    out: list[Product] = []
    for node in tree.css(selector)[:MAX_BLOCKS]:
        text = node.text(deep=True, separator="", strip=False)
        try:
            data = decode_json(text.encode())
            out.extend(map_items(items_of(data, mapping), mapping, url))
        except ApiMappingError as exc:
            log.debug("embedded JSON skipped", extra={"url": url, "error": str(exc)})
    return out
