"""API sources without a network: templates, the JSON mapping (variants, prices, stock), the
stop conditions and guards, embedded JSON, and the demo shop's API shapes."""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import pytest

from demo import api as demo_api
from demo.catalog import Catalog
from schemas.messages import ApiRequest, Attempt, FetchPolicy, FetchWork
from schemas.source import Source
from services.fetcher.service import api_request_parts
from services.parser.api_mapping import ApiMappingError, parse_api
from services.parser.formats import parse_payload
from shared.api_template import first_request, next_request, request_key
from shared.sources import source_from_dict

URL = "https://shop.test/graphql"


def source(api: dict[str, Any]) -> Source:
    return source_from_dict({"name": "t", "api": api})


def body(doc: Any) -> bytes:
    return json.dumps(doc).encode()


LISTING = {
    "url": "https://shop.test/api?page={page}",
    "pagination": {"per_page": 2, "start": 1},
    "mapping": {
        "items": "data.items",
        "fields": {"key": "id", "name": "title", "price": "price", "currency": "'EUR'"},
    },
}


# -- templates ---------------------------------------------------------------------------------


def test_graphql_template_fills_variables_with_values_not_text() -> None:
    s = source({"preset": "graphql", "url": URL, "pagination": {"per_page": 25}})
    url, req = first_request(s.api)
    assert url == URL and req.method == "POST" and req.page == 0
    assert json.loads(req.body)["variables"] == {"page": 0, "perPage": 25}
    _, nxt = next_request(s.api, req, items=25)
    assert json.loads(nxt.body)["variables"] == {"page": 1, "perPage": 25}
    assert (nxt.items_before, nxt.pages) == (25, 2)
    # Same URL, different bodies: different entries; a plain GET is told apart by its URL.
    assert request_key(req) != request_key(nxt) and len(request_key(req)) == 16
    assert request_key(ApiRequest(method="GET")) == ""


def test_keyword_and_cursor_are_quoted_in_urls_and_literal_in_bodies() -> None:
    s = source(
        {
            "url": "https://shop.test/api?q={keyword}&after={cursor}",
            "method": "POST",
            "body": {"search": "{keyword}", "note": "for {keyword}!"},
            "headers": {"X-Search": "{keyword}"},
            "pagination": {"strategy": "cursor", "next_cursor": "next"},
            "mapping": {"items": "items", "fields": {"key": "id"}},
        }
    )
    url, req = first_request(s.api, keyword="oak & brass")
    assert url == "https://shop.test/api?q=oak%20%26%20brass&after="
    assert json.loads(req.body) == {"search": "oak & brass", "note": "for oak & brass!"}
    assert req.headers == {"X-Search": "oak & brass"}
    url, _ = next_request(s.api, req, items=3, cursor="a/b=", keyword="oak")
    assert url.endswith("after=a%2Fb%3D")


def test_fetcher_sends_the_request_exactly_as_an_api_call() -> None:
    request = ApiRequest(method="POST", body='{"a":1}', headers={"authorization": "x"})
    attempt = Attempt(job_id=1, entry_id=1, source="t", url=URL, request=request)
    work = FetchWork(attempt=attempt, domain="shop.test", policy=FetchPolicy())
    headers = {"Accept": "text/html", "Sec-Fetch-Mode": "navigate", "Sec-Fetch-User": "?1"}
    method, sent = api_request_parts(work, headers)
    assert (method, sent) == ("POST", b'{"a":1}')
    assert headers["Accept"] == "application/json"
    assert headers["Content-Type"] == "application/json"
    assert headers["Sec-Fetch-Mode"] == "cors" and "Sec-Fetch-User" not in headers
    assert headers["authorization"] == "x"
    plain = msgspec_replace(work, attempt=msgspec_replace(attempt, request=None))
    assert api_request_parts(plain, {}) == ("GET", None)


def msgspec_replace(struct: Any, **changes: Any) -> Any:
    import msgspec

    return msgspec.structs.replace(struct, **changes)


# -- mapping -----------------------------------------------------------------------------------


GQL_ITEM = {
    "id": "P1",
    "name": "Oak Lamp",
    "brand": {"name": "Nordhaus"},
    "url": "/p/oak-lamp",
    "image": "https://cdn.test/1.jpg",
    "currency": "USD",
    "availability": "IN_STOCK",
    "variants": [
        {"id": "P1-S", "sku": "S1", "option": "Small", "price": "10.5", "salePrice": None,
         "stock": 4},
        {"id": "P1-L", "sku": "L1", "option": "Large", "price": 12, "salePrice": "9.99",
         "stock": 0},
    ],
}  # fmt: skip


def gql_page(items: list[dict], total: int) -> bytes:
    return body({"data": {"products": {"totalCount": total, "items": items}}})


def test_variants_expand_to_one_product_per_option_with_price_and_stock() -> None:
    s = source({"preset": "graphql", "url": URL})
    page = parse_api(gql_page([GQL_ITEM], 1), URL, s.api)
    small, large = page.products
    assert (small.key, small.name, small.sku) == ("P1:P1-S", "Oak Lamp – Small", "S1")
    assert (small.price, small.sale_price, small.currency) == ("10.50", None, "USD")
    assert (small.availability, small.stock) == ("in_stock", 4)
    assert (large.price, large.sale_price, large.availability) == ("12.00", "9.99", "out_of_stock")
    assert small.brand == "Nordhaus" and small.url == "https://shop.test/p/oak-lamp"
    assert page.links == [] and page.error is None  # no request: replay / `trawl parse`


def test_cheapest_mode_keeps_one_product_at_the_lowest_price() -> None:
    s = source({"preset": "graphql", "url": URL, "mapping": {"variants": {"mode": "cheapest"}}})
    (product,) = parse_api(gql_page([GQL_ITEM], 1), URL, s.api).products
    assert (product.key, product.price, product.sale_price) == ("P1", "12.00", "9.99")
    assert (product.availability, product.stock) == ("in_stock", 4)


def test_stated_availability_wins_over_stock_except_plain_in_stock() -> None:
    item = {**GQL_ITEM, "availability": "PREORDER"}
    s = source({"preset": "graphql", "url": URL, "mapping": {"in_stock_below": 5}})
    small, large = parse_api(gql_page([item], 1), URL, s.api).products
    assert (small.availability, large.availability) == ("preorder", "preorder")
    small, _ = parse_api(gql_page([GQL_ITEM], 1), URL, s.api).products
    assert small.availability == "limited"  # 4 left, under in_stock_below


def test_prices_in_cents_and_money_objects() -> None:
    s = source(
        {
            **LISTING,
            "mapping": {
                "items": "items",
                "cents": True,
                "fields": {"key": "id", "price": "price", "sale_price": "sale"},
            },
        }
    )
    doc = {"items": [{"id": 1, "price": 1299, "sale": {"amount": 999, "currencyCode": "gbp"}}]}
    (product,) = parse_api(body(doc), URL, s.api).products
    assert (product.key, product.price, product.sale_price, product.currency) == (
        "1", "12.99", "9.99", "GBP",
    )  # fmt: skip


def test_items_without_a_key_and_broken_fields_are_skipped_not_fatal() -> None:
    s = source(
        {**LISTING, "mapping": {"items": "items", "fields": {"key": "id", "url": "join('', x)"}}}
    )
    doc = {"items": [{"name": "no id"}, {"id": 7, "x": None}, "junk"]}
    (product,) = parse_api(body(doc), URL, s.api).products
    assert (product.key, product.url) == ("7", None)
    with pytest.raises(ApiMappingError):
        parse_api(b"<html>", URL, s.api)


def test_graphql_errors_become_the_page_error() -> None:
    s = source({"preset": "graphql", "url": URL})
    page = parse_api(body({"errors": [{"message": "rate limited"}]}), URL, s.api)
    assert page.products == [] and page.error == "API error: rate limited"


# -- stop conditions and guards ----------------------------------------------------------------


def _page(s: Source, doc: Any, request: ApiRequest):
    return parse_api(body(doc), URL, s.api, request=request)


def test_page_strategy_stops_at_a_short_page_or_the_total() -> None:
    s = source(LISTING)
    _, first = first_request(s.api)
    full = {"data": {"items": [{"id": 1}, {"id": 2}]}}
    (link,) = _page(s, full, first).links
    assert (link.url, link.kind, link.request.page) == (
        "https://shop.test/api?page=2", "pagination", 2,
    )  # fmt: skip
    assert _page(s, {"data": {"items": [{"id": 3}]}}, link.request).links == []
    assert _page(s, {"data": {"items": []}}, link.request).links == []
    totalled = source({**LISTING, "pagination": {**LISTING["pagination"], "total": "total"}})
    at_end = msgspec_replace(first, items_before=2)
    assert _page(totalled, {**full, "total": 4}, at_end).links == []
    assert _page(totalled, {**full, "total": 5}, at_end).links != []


def test_offset_strategy_advances_by_per_page() -> None:
    s = source(
        {
            **LISTING,
            "url": "https://shop.test/api?offset={offset}&limit={per_page}",
            "pagination": {"strategy": "offset", "per_page": 2},
        }
    )
    url, first = first_request(s.api)
    assert url == "https://shop.test/api?offset=0&limit=2"
    (link,) = _page(s, {"data": {"items": [{"id": 1}, {"id": 2}]}}, first).links
    assert link.url == "https://shop.test/api?offset=2&limit=2" and link.request.offset == 2


def test_cursor_strategy_follows_the_cursor_and_stops_on_a_repeat() -> None:
    s = source(
        {
            **LISTING,
            "url": "https://shop.test/api?after={cursor}",
            "pagination": {"strategy": "cursor", "next_cursor": "next"},
        }
    )
    _, first = first_request(s.api)
    (link,) = _page(s, {"data": {"items": [{"id": 1}]}, "next": "abc"}, first).links
    assert link.request.cursor == "abc" and link.url.endswith("after=abc")
    assert _page(s, {"data": {"items": [{"id": 2}]}, "next": None}, link.request).links == []
    looped = _page(s, {"data": {"items": [{"id": 2}]}, "next": "abc"}, link.request)
    assert looped.links == [] and "repeated cursor 'abc'" in looped.error
    assert [p.key for p in looped.products] == ["2"]  # the page itself still counts


def test_max_pages_guard_is_an_error_not_a_silent_stop() -> None:
    s = source({**LISTING, "pagination": {**LISTING["pagination"], "max_pages": 3}})
    _, req = first_request(s.api)
    full = {"data": {"items": [{"id": 1}, {"id": 2}]}}
    for _ in range(2):
        (link,) = _page(s, full, req).links
        req = link.request
    assert req.pages == 3
    last = _page(s, full, req)
    assert last.links == [] and "max_pages (3)" in last.error


# -- formats: JSON routing, embedded JSON, `trawl parse` of a stored payload --------------------


def test_router_sends_json_to_the_mapping_and_reads_embedded_json_in_html() -> None:
    s = source({"preset": "graphql", "url": URL})
    parsed = parse_payload(gql_page([GQL_ITEM], 1), URL, source=s)  # sniffed: no content type
    assert len(parsed.products) == 2 and parsed.product is None
    assert parse_payload(b"{}", URL, content_type="application/json").error
    nextjs = {
        "name": "t",
        "seeds": ["https://shop.test/"],
        "api": {
            "embedded": "script#__NEXT_DATA__",
            "mapping": {
                "items": "props.pageProps.products",
                "fields": {"key": "sku", "name": "name", "price": "price.value"},
            },
        },
    }
    doc = {"props": {"pageProps": {"products": [{"sku": "A", "name": "x", "price": {"value": 3}}]}}}
    html = (
        "<html><body><a href='/c?page=2' rel='next'>next</a>"
        f"<script id='__NEXT_DATA__' type='application/json'>{json.dumps(doc)}</script>"
        "</body></html>"
    ).encode()
    parsed = parse_payload(html, "https://shop.test/c", source=source_from_dict(nextjs))
    assert [(p.key, p.price) for p in parsed.products] == [("A", "3.00")]
    assert any(link.kind == "pagination" for link in parsed.links)


# -- the demo shop's API -----------------------------------------------------------------------


def _crawl(s: Source, catalog: Catalog, path: str) -> tuple[dict[str, Any], int]:
    url, req = first_request(s.api)
    found: dict[str, Any] = {}
    pages = 0
    while req is not None:
        query = dict(parse_qsl(urlsplit(url).query))
        sent = (req.body or "").encode()
        status, doc = demo_api.respond(catalog, 0, path, req.method, query, sent)
        assert status == 200
        page = parse_payload(body(doc), url, source=s, request=req)
        assert page.error is None
        pages += 1
        found.update({p.key: p for p in page.products})
        url, req = (page.links[0].url, page.links[0].request) if page.links else (url, None)
    return found, pages


@pytest.mark.parametrize("per_page", [7, 10])
def test_demo_cursor_endpoint_lists_every_option_once(per_page: int) -> None:
    catalog = Catalog(1, 30)
    s = source(
        {
            "preset": "graphql",
            "method": "GET",
            "graphql": None,
            "url": "https://shop.test/api/products?cursor={cursor}&limit={per_page}",
            "pagination": {
                "strategy": "cursor",
                "next_cursor": "next_cursor",
                "per_page": per_page,
            },
            "mapping": {"items": "items"},
        }
    )
    found, pages = _crawl(s, catalog, "/api/products")
    truth = {t["key"]: t for t in demo_api.truth(catalog, 0)}
    assert set(found) == set(truth) and pages == -(-30 // per_page)
    for key, want in truth.items():
        got = found[key]
        assert (got.price, got.sale_price, got.stock, got.availability) == (
            want["price"], want["sale_price"], want["stock"], want["availability"],
        ), key  # fmt: skip


def test_demo_fault_key_of_a_graphql_post_names_its_variables() -> None:
    sent = body({"query": "{ x }", "variables": {"perPage": 10, "page": 3}})
    assert demo_api.fault_key("/graphql", "POST", "", sent) == "/graphql?page=3&perPage=10"
    assert demo_api.fault_key("/products.json", "GET", "page=2", b"") == "/products.json?page=2"


def test_named_price_lists_and_attributes_per_option() -> None:
    item = {
        **GQL_ITEM,
        "potency": {"thc": "20%"},
        "variants": [{"id": "P1-S", "price": "10", "recPrice": "11.5", "medPrice": 9,
                      "stock": 3}],
    }  # fmt: skip
    mapping = {
        "fields": {"attributes.thc": "potency.thc"},
        "variants": {"fields": {"prices.rec": "recPrice", "prices.medical": "medPrice"}},
    }
    s = source({"preset": "graphql", "url": URL, "mapping": mapping})
    (product,) = parse_api(gql_page([item], 1), URL, s.api).products
    assert product.prices == {"rec": "11.50", "medical": "9.00"}
    assert product.attributes == {"thc": "20%"}


def test_unknown_mapped_fields_are_still_refused() -> None:
    import pytest

    from shared.errors import SourceError

    with pytest.raises(SourceError, match='"pirce" is not a product field'):
        source({"preset": "graphql", "url": URL, "mapping": {"fields": {"pirce": "x"}}})
