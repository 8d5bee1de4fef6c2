"""The shop's JavaScript-only section, under ``/js/``: what a plain fetch sees is an empty shell.

- ``/js/c/<category>``: a listing whose cards are loaded by script from ``/js/api/c/...``, a
  batch at a time, more on each click of "Load more";
- ``/js/p/<slug>``: a product page whose JSON-LD, price and buy box are injected by script
  after a fetch() of ``/js/api/p/<slug>``;
- ``/js/probe?target=URL``: a page whose scripts try to reach ``target`` and the cloud metadata
  address in every way a page can (fetch, image, iframe, websocket, a redirect through the
  shop), for the renderer's SSRF test;
- ``/js/redirect?to=URL``: an open redirect.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from html import escape
from urllib.parse import urlsplit

from demo.catalog import Catalog
from demo.pages import Pages, format_price

JS_BATCH = 2  # cards per load: most categories need a click or more for all their products
METADATA_URL = "http://169.254.169.254/latest/meta-data/"


@dataclass(frozen=True)
class JsAnswer:
    status: int
    body: bytes
    content_type: str
    headers: dict[str, str]


def handles(path: str) -> bool:
    return path.startswith("/js/")


def _html(body: str, status: int = 200) -> JsAnswer:
    return JsAnswer(status, body.encode(), "text/html; charset=utf-8", {})


def _json(doc: object, status: int = 200) -> JsAnswer:
    return JsAnswer(status, json.dumps(doc).encode(), "application/json", {})


def _shell(title: str, main: str, script: str) -> str:
    return (
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
        f"<title>{escape(title)} | Demo Shop</title></head><body>"
        f'<main id="content">{main}</main><script>{script}</script></body></html>'
    )


_LISTING_SCRIPT = """
(function () {
  var category = document.body.querySelector("[data-category]").dataset.category;
  var list = document.getElementById("cards");
  var more = document.querySelector("button.load-more");
  var offset = 0;
  function load() {
    fetch("/js/api/c/" + category + "?offset=" + offset)
      .then(function (r) { return r.json(); })
      .then(function (data) {
        data.cards.forEach(function (card) {
          var item = document.createElement("li");
          var link = document.createElement("a");
          link.className = "product-card";
          link.href = "/js/p/" + card.slug;
          link.textContent = card.name;
          var price = document.createElement("span");
          price.className = "price";
          price.textContent = card.price;
          item.append(link, " ", price);
          list.appendChild(item);
        });
        offset += data.cards.length;
        more.hidden = !data.more;
      });
  }
  more.addEventListener("click", load);
  load();
})();
"""

_PRODUCT_SCRIPT = """
(function () {
  var slug = document.body.querySelector("[data-slug]").dataset.slug;
  fetch("/js/api/p/" + slug)
    .then(function (r) { return r.json(); })
    .then(function (data) {
      var doc = new DOMParser().parseFromString(data.html, "text/html");
      doc.head.querySelectorAll(
        'script[type="application/ld+json"], meta[property], link[rel=canonical]'
      ).forEach(function (node) { document.head.appendChild(node); });
      document.title = doc.title;
      document.getElementById("content").replaceWith(doc.getElementById("content"));
    });
})();
"""

_PROBE_SCRIPT = """
(function () {
  var target = new URLSearchParams(location.search).get("target");
  var metadata = "METADATA";
  [target, metadata].forEach(function (url) {
    fetch(url).catch(function () {});
    fetch("/js/redirect?to=" + encodeURIComponent(url)).catch(function () {});
    var img = new Image(); img.src = url + "?img";
    var frame = document.createElement("iframe"); frame.src = url + "?frame";
    document.body.appendChild(frame);
    try { new WebSocket(url.replace(/^http/, "ws") + "?ws"); } catch (e) {}
  });
  var done = document.createElement("p");
  done.id = "probed";
  done.textContent = "probed";
  document.body.appendChild(done);
})();
""".replace("METADATA", METADATA_URL)


class JsPages:
    """The ``/js/`` section of one host."""

    def __init__(self, catalog: Catalog, pages: Pages) -> None:
        self.catalog = catalog
        self.pages = pages

    def respond(self, path: str, query: dict[str, str], epoch: int) -> JsAnswer:
        head, _, rest = path.removeprefix("/js/").partition("/")
        if head == "c" and rest in self.pages.categories:
            main = (
                f'<h1 data-category="{escape(rest)}">{escape(rest.title())}</h1>'
                '<ul id="cards" class="product-grid"></ul>'
                '<button class="load-more" type="button" hidden>Load more</button>'
            )
            return _html(_shell(rest.title(), main, _LISTING_SCRIPT))
        if head == "p" and rest and "/" not in rest:
            main = f'<div data-slug="{escape(rest)}">Loading…</div>'
            return _html(_shell("Loading", main, _PRODUCT_SCRIPT))
        if head == "api":
            return self._api(rest, query, epoch)
        if head == "probe" and not rest:
            return _html(_shell("Probe", "<h1>Probe</h1>", _PROBE_SCRIPT))
        if head == "redirect" and not rest:
            target = query.get("to", "")
            if urlsplit(target).scheme not in ("http", "https", "ws", "wss"):
                return _json({"error": "to: an absolute URL"}, 400)
            return JsAnswer(302, b"", "text/plain", {"Location": target})
        return _json({"error": "not found"}, 404)

    def _api(self, rest: str, query: dict[str, str], epoch: int) -> JsAnswer:
        kind, _, name = rest.partition("/")
        if kind == "c" and name in self.pages.categories:
            offset = int(query["offset"]) if query.get("offset", "").isdigit() else 0
            products = self.catalog.listing(name, epoch)
            state = self.catalog.state(epoch)
            batch = products[offset : offset + JS_BATCH]
            cards = [
                {
                    "slug": p.slug,
                    "name": p.name,
                    "price": format_price(state.price[p.index], self.pages.currency),
                }
                for p in batch
            ]
            return _json({"cards": cards, "more": offset + len(batch) < len(products)})
        if kind == "p" and name:
            page = self.pages.product(name, epoch)
            if page.status != 200:
                return _json({"error": "no such product"}, 404)
            return _json({"html": page.body})
        return _json({"error": "not found"}, 404)
