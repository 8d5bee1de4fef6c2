"""Route a payload to the extractor for its format: sitemaps (XML, gzip, robots.txt lines), API
pages (JSON/GraphQL, mapped by the source's ``api`` section) or an HTML page (whose embedded
JSON the ``api`` mapping may read too). One entry point for the parser service, replay and
``trawl parse``."""

from __future__ import annotations

import msgspec

from schemas.messages import ApiRequest, Link, Product
from schemas.source import Source
from services.parser.api_mapping import looks_like_json, parse_api
from services.parser.embedded import embedded_products
from services.parser.page import parse_page
from services.parser.sitemap import is_sitemap, parse_sitemap


class Parsed(msgspec.Struct, frozen=True, kw_only=True):
    """What one payload yields: an HTML page's main product, an API page's listed products
    (and embedded JSON's), links to follow, and an error the job should show."""

    product: Product | None
    links: list[Link]
    products: list[Product] = []
    error: str | None = None


def parse_payload(
    body: bytes,
    url: str,
    *,
    content_type: str | None = None,
    source: Source | None = None,
    kind: str | None = None,
    request: ApiRequest | None = None,
    keyword: str | None = None,
) -> Parsed:
    if kind == "sitemap" or is_sitemap(body, content_type):
        return Parsed(product=None, links=parse_sitemap(body, url, source))
    api = source.api if source is not None else None
    if request is not None or looks_like_json(body, content_type):
        if api is None or api.mapping is None:
            return Parsed(product=None, links=[], error="a JSON payload, but the source has no api")
        page = parse_api(body, url, api, request=request, keyword=keyword)
        return Parsed(product=None, links=page.links, products=page.products, error=page.error)
    html = parse_page(body, url, content_type=content_type, source=source, kind=kind)
    products: list[Product] = list(html.variants)
    if api is not None and api.embedded and api.mapping is not None:
        products += embedded_products(body, url, api.embedded, api.mapping)
    return Parsed(product=html.product, links=html.links, products=products)
