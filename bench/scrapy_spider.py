"""A minimal, idiomatic Scrapy spider for the benchmark: follow the shop's links, emit the
JSON-LD product of every product page as a JSON line. robots.txt obeyed, no delays,
concurrency 128 — what a Scrapy user would write for a site they own.

``scrapy runspider bench/scrapy_spider.py -a start=http://127.0.0.2:8801/ -a hosts=... -O out.jl``

``-a drop_params=utm_*,gclid,fbclid`` removes those query parameters (``*`` ends a prefix) from
every link before it is followed, as a user would for a shop whose links carry tracking
parameters: Scrapy's duplicate filter compares whole URLs, so without it each tracked spelling
of a product page is fetched again.
"""

from __future__ import annotations

import json
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import scrapy


class ShopSpider(scrapy.Spider):
    name = "shop"
    custom_settings = {
        "ROBOTSTXT_OBEY": True,
        "CONCURRENT_REQUESTS": 128,
        "CONCURRENT_REQUESTS_PER_DOMAIN": 128,
        "DOWNLOAD_DELAY": 0,
        "AUTOTHROTTLE_ENABLED": False,
        "COOKIES_ENABLED": False,
        "TELNETCONSOLE_ENABLED": False,
        "LOG_LEVEL": "WARNING",
        "REQUEST_FINGERPRINTER_IMPLEMENTATION": "2.7",
    }

    def __init__(
        self, start: str = "", hosts: str = "", drop_params: str = "", **kwargs: object
    ) -> None:
        super().__init__(**kwargs)
        self.start_urls = start.split(",")
        self.allowed_domains = hosts.split(",")  # host:port, like trawl's allowed_domains
        names = [p.strip() for p in drop_params.split(",") if p.strip()]
        self.drop_exact = frozenset(p for p in names if not p.endswith("*"))
        self.drop_prefixes = tuple(p[:-1] for p in names if p.endswith("*"))

    def clean(self, url: str) -> str:
        """``url`` without the dropped query parameters."""
        if "?" not in url:
            return url
        parts = urlsplit(url)
        query = [
            (k, v)
            for k, v in parse_qsl(parts.query, keep_blank_values=True)
            if k not in self.drop_exact and not k.startswith(self.drop_prefixes)
        ]
        return urlunsplit(parts._replace(query=urlencode(query)))

    def parse(self, response: scrapy.http.Response):  # type: ignore[override]
        for raw in response.css('script[type="application/ld+json"]::text').getall():
            try:
                data = json.loads(raw)
            except ValueError:
                continue
            for node in data if isinstance(data, list) else [data]:
                if isinstance(node, dict) and node.get("@type") == "Product":
                    offers = node.get("offers") or {}
                    offer = offers[0] if isinstance(offers, list) and offers else offers
                    yield {
                        "url": response.url,
                        "sku": node.get("sku"),
                        "name": node.get("name"),
                        "price": offer.get("price") if isinstance(offer, dict) else None,
                        "currency": offer.get("priceCurrency") if isinstance(offer, dict) else None,
                    }
        if self.drop_exact or self.drop_prefixes:
            hrefs = response.css("a::attr(href)").getall()
            yield from response.follow_all([self.clean(response.urljoin(h)) for h in hrefs])
        else:
            yield from response.follow_all(css="a::attr(href)", callback=self.parse)
