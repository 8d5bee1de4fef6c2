"""A minimal, idiomatic Scrapy spider for the benchmark: follow the shop's links, emit the
JSON-LD product of every product page as a JSON line. robots.txt obeyed, no delays,
concurrency 64 — what a Scrapy user would write for a site they own.

``scrapy runspider bench/scrapy_spider.py -a start=http://127.0.0.2:8801/ -a hosts=... -O out.jl``
"""

from __future__ import annotations

import json

import scrapy


class ShopSpider(scrapy.Spider):
    name = "shop"
    custom_settings = {
        "ROBOTSTXT_OBEY": True,
        "CONCURRENT_REQUESTS": 64,
        "CONCURRENT_REQUESTS_PER_DOMAIN": 64,
        "DOWNLOAD_DELAY": 0,
        "AUTOTHROTTLE_ENABLED": False,
        "COOKIES_ENABLED": False,
        "TELNETCONSOLE_ENABLED": False,
        "LOG_LEVEL": "WARNING",
        "REQUEST_FINGERPRINTER_IMPLEMENTATION": "2.7",
    }

    def __init__(self, start: str = "", hosts: str = "", **kwargs: object) -> None:
        super().__init__(**kwargs)
        self.start_urls = start.split(",")
        self.allowed_domains = hosts.split(",")  # host:port, like trawl's allowed_domains

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
        yield from response.follow_all(css="a::attr(href)", callback=self.parse)
