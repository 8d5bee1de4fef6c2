"""HTML and text rendering for the demo shop, one `Pages` per host.

Pages are built by joining pre-rendered chrome (head noise, header, footer: the same on every
page of a host) with a small per-page part, so a render costs tens of microseconds. Markup
conventions crawlers rely on:

- listing cards: ``<a class="product-card" href="/p/<slug>">`` (some with utm params or
  ``#reviews``), pagination in ``<nav class="pagination">`` with ``a[rel=prev]``/``a[rel=next]``
  and ``<link rel="next">`` in the head;
- product pages: JSON-LD Product, ``<span class="price">`` (human format), canonical link,
  OpenGraph product tags, related tiles in ``<section class="related">``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal
from html import escape
from typing import Any
from urllib.parse import quote_plus

from demo.api import variants
from demo.catalog import SCHEMA_AVAILABILITY, Catalog, Product, epoch_date

HTML = "text/html; charset=utf-8"

_STOCK_TEXT = {"in_stock": "In stock", "out_of_stock": "Out of stock", "preorder": "Pre-order"}
_OG_STOCK = {"in_stock": "in stock", "out_of_stock": "out of stock", "preorder": "preorder"}
_INFO_PAGES = {
    "about": "About us",
    "shipping": "Shipping",
    "returns": "Returns",
    "contact": "Contact",
    "privacy": "Privacy policy",
}


@dataclass(frozen=True, slots=True)
class Page:
    status: int
    body: str
    content_type: str = HTML


def format_price(price: str, currency: str) -> str:
    """Human price: "1.249,00 €" for EUR, "$1,249.00" for USD."""
    whole, cents = price.split(".")
    grouped = f"{int(whole):,}"
    if currency == "EUR":
        return f"{grouped.replace(',', '.')},{cents} €"
    return f"${grouped}.{cents}"


def _noise_css() -> str:
    # Realistic bulk: real shops ship kilobytes of inline CSS in every page.
    blocks = ["<style>:root{--brand:#1f4e79;--accent:#e07a1f;--muted:#6b7280}"]
    for name in ("header", "nav", "grid", "card", "price", "footer", "btn", "badge", "modal"):
        for variant in ("", "--active", "--muted", "--large", "__inner", "__title", "__meta"):
            blocks.append(
                f".{name}{variant}{{display:flex;margin:0 auto;padding:.5rem 1rem;"
                f"color:var(--brand);font:400 14px/1.4 system-ui,sans-serif;"
                f"border-radius:4px;transition:all .2s ease-in-out}}"
            )
    blocks.append("@media (max-width:640px){.grid{grid-template-columns:1fr 1fr}}</style>")
    return "".join(blocks)


def _noise_script() -> str:
    events = ",".join(f'"evt_{i}":{{"sample":0.{i % 10},"queue":[]}}' for i in range(40))
    return (
        "<script>window.dataLayer=window.dataLayer||[];function gtag(){dataLayer.push("
        "arguments)}gtag('js',new Date());gtag('config','G-DEMO000');"
        f"window.__SHOP_CONFIG__={{{events}}};"
        "(function(){var s=document.createElement('script');s.async=true;"
        "s.src='data:text/javascript,void 0';document.head.appendChild(s)})();</script>"
    )


_CSS = _noise_css()
_SCRIPT = _noise_script()


class Pages:
    """Renders every page of one host of the shop."""

    def __init__(
        self, catalog: Catalog, host: int, per_page: int = 8, *, variants: bool = False
    ) -> None:
        self.catalog = catalog
        # Product pages as a ProductGroup with one variant per option (demo.api's options, the
        # same prices and stock the API sources see), instead of one Product with one offer.
        self.variants = variants
        self.host = host
        self.per_page = per_page
        self.base = catalog.base_urls[host]
        self.categories = catalog.host_categories(host)
        self.currency = catalog.currency(host)
        # Links that 404, 2 per host, shown as cards on the first listing pages.
        self.broken: dict[str, list[str]] = {}
        for k in range(2 if self.categories else 0):
            category = self.categories[k % len(self.categories)]
            self.broken.setdefault(category, []).append(f"discontinued-{category}-{k + 1}")
        self._header = self._render_header()
        self._footer = self._render_footer()

    def _group(
        self, p: Product, ld: dict[str, Any], options: list[dict[str, Any]], availability: str
    ) -> dict[str, Any]:
        """The product as a ProductGroup: each option a variant with its own sku and offer."""
        sold_out = "preorder" if availability == "preorder" else "out_of_stock"
        group = {k: v for k, v in ld.items() if k not in ("sku", "offers")}
        group["@type"] = "ProductGroup"
        group["productGroupID"] = p.sku
        group["variesBy"] = "https://schema.org/size"
        group["hasVariant"] = [
            {
                "@type": "Product",
                "sku": o["sku"],
                "name": f"{p.name} ({o['option']})",
                "size": o["option"],
                "offers": {
                    "@type": "Offer",
                    "price": o["sale_price"] or o["price"],
                    "priceCurrency": self.currency,
                    "availability": SCHEMA_AVAILABILITY["in_stock" if o["stock"] else sold_out],
                },
            }
            for o in options
        ]
        return group

    # -- chrome ------------------------------------------------------------------------------
    def _render_header(self) -> str:
        cats = "".join(
            f'<li class="nav__item"><a href="/c/{c}?page=1">{c.title()}</a></li>'
            for c in self.categories
        )
        others = "".join(
            f'<li><a href="{b}/">Store {i + 1}</a></li>'
            for i, b in enumerate(self.catalog.base_urls)
            if i != self.host
        )
        return (
            '<body><div class="promo-banner">Free shipping over 50 — use code DEMO10</div>'
            '<header class="header"><a class="logo" href="/">Demo Shop</a>'
            '<form class="search" action="/search" method="get">'
            '<input type="search" name="q" placeholder="Search products" aria-label="Search">'
            '<button type="submit">Search</button></form>'
            '<ul class="header__account"><li><a href="/account">Sign in</a></li>'
            '<li><a href="/cart" class="cart-link">Cart (0)</a></li></ul>'
            f'<nav class="nav" aria-label="Categories"><ul>{cats}</ul>'
            f'<ul class="nav__stores">{others}</ul></nav></header>'
        )

    def _render_footer(self) -> str:
        info = "".join(
            f'<li><a href="/info/{k}">{escape(v)}</a></li>' for k, v in _INFO_PAGES.items()
        )
        cats = "".join(f'<li><a href="/c/{c}?page=1">{c.title()}</a></li>' for c in self.categories)
        return (
            '<footer class="footer"><div class="footer__inner">'
            f"<section><h4>Customer service</h4><ul>{info}</ul></section>"
            f"<section><h4>Shop</h4><ul>{cats}</ul></section>"
            '<section><h4>Newsletter</h4><form action="/account" method="post">'
            '<input type="email" name="email" placeholder="you@example.com">'
            "<button>Subscribe</button></form></section>"
            '<p class="footer__legal">© 2024 Demo Shop GmbH. All prices include VAT. '
            "This shop is generated for testing crawlers; nothing here is for sale.</p>"
            f"</div></footer>{_SCRIPT}</body></html>"
        )

    def _doc(self, title: str, main: str, canonical: str | None = None, head: str = "") -> str:
        canon = f'<link rel="canonical" href="{canonical}">' if canonical else ""
        return (
            '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
            '<meta name="viewport" content="width=device-width,initial-scale=1">'
            f"<title>{escape(title)} | Demo Shop</title>{canon}{head}{_CSS}</head>"
            f'{self._header}<main id="content">{main}</main>{self._footer}'
        )

    # -- pages -------------------------------------------------------------------------------
    def home(self) -> Page:
        tiles = "".join(
            f'<li class="category-tile"><a href="/c/{c}?page=1">'
            f'<img src="/img/category-{c}.jpg" alt="" width="400" height="240">'
            f"<h2>{c.title()}</h2></a></li>"
            for c in self.categories
        )
        main = (
            '<section class="hero"><h1>Welcome to the Demo Shop</h1>'
            "<p>Hand-picked homeware from independent makers.</p></section>"
            f'<ul class="category-grid">{tiles}</ul>'
        )
        return Page(200, self._doc("Home", main, f"{self.base}/"))

    def not_found(self) -> Page:
        main = (
            '<section class="error"><h1>Page not found</h1>'
            '<p>The page you are looking for does not exist. <a href="/">Back to the shop</a>'
            "</p></section>"
        )
        return Page(404, self._doc("Not found", main))

    def error(self, status: int) -> Page:
        main = f'<section class="error"><h1>Error {status}</h1><p>Please try again later.</p>'
        return Page(status, self._doc(f"Error {status}", main + "</section>"))

    def simple(self, title: str, text: str) -> Page:
        main = f'<section class="static"><h1>{escape(title)}</h1><p>{escape(text)}</p></section>'
        return Page(200, self._doc(title, main))

    def info(self, name: str) -> Page:
        if name not in _INFO_PAGES:
            return self.not_found()
        return self.simple(_INFO_PAGES[name], f"{_INFO_PAGES[name]}: details coming soon.")

    def category(self, category: str, page: int, epoch: int) -> Page:
        if category not in self.categories:
            return self.not_found()
        products = self.catalog.listing(category, epoch)
        extra = ""
        if page == 1 and category in self.broken:
            cards = "".join(
                f'<a class="product-card" href="/p/{slug}"><h3>Archive piece</h3></a>'
                for slug in self.broken[category]
            )
            extra = f'<section class="clearance"><h2>Last chance</h2>{cards}</section>'
        return self._listing(
            title=category.title(),
            path=f"/c/{category}?page=",
            products=products,
            page=page,
            epoch=epoch,
            extra=extra,
        )

    def search(self, query: str, page: int, epoch: int) -> Page:
        needle = query.strip().lower()
        listed = self.catalog.state(epoch).listed
        products = [
            p
            for p in self.catalog.products
            if needle and p.host == self.host and p.index in listed and needle in p.name.lower()
        ]
        return self._listing(
            title=f"Search: {query}",
            path=f"/search?q={quote_plus(query)}&page=",
            products=products,
            page=page,
            epoch=epoch,
        )

    def _listing(
        self,
        *,
        title: str,
        path: str,
        products: list[Product],
        page: int,
        epoch: int,
        extra: str = "",
    ) -> Page:
        n_pages = max(1, -(-len(products) // self.per_page))
        if not 1 <= page <= n_pages:
            return self.not_found()
        chunk = products[(page - 1) * self.per_page : page * self.per_page]
        state = self.catalog.state(epoch)
        cards = "".join(
            self._card(p, state.price[p.index], state.availability[p.index]) for p in chunk
        )
        if not products:
            cards = '<li class="empty">No products found.</li>'
        path = escape(path)  # "&" in the search path must be "&amp;" in attributes
        head = ""
        links = []
        if page > 1:
            head += f'<link rel="prev" href="{self.base}{path}{page - 1}">'
            links.append(f'<a rel="prev" href="{path}{page - 1}">&lsaquo; Previous</a>')
        for n in range(1, n_pages + 1):
            if n == page:
                links.append(f'<span aria-current="page">{n}</span>')
            elif n in (1, n_pages) or abs(n - page) <= 2:
                links.append(f'<a href="{path}{n}">{n}</a>')
            elif abs(n - page) == 3:
                links.append('<span class="gap">…</span>')
        if page < n_pages:
            head += f'<link rel="next" href="{self.base}{path}{page + 1}">'
            links.append(f'<a rel="next" href="{path}{page + 1}">Next &rsaquo;</a>')
        main = (
            '<nav class="breadcrumbs"><a href="/">Home</a> &rsaquo; '
            f"<span>{escape(title)}</span></nav>"
            f'<h1>{escape(title)}</h1><p class="listing__count">{len(products)} products</p>'
            '<form class="toolbar" method="get"><label>Sort by <select name="sort">'
            "<option>Featured</option><option>Price: low to high</option>"
            "<option>Newest</option></select></label></form>"
            f'<ul class="product-grid">{cards}</ul>{extra}'
            f'<nav class="pagination" aria-label="Pages">{"".join(links)}</nav>'
        )
        return Page(200, self._doc(title, main, f"{self.base}{path}{page}", head))

    def _card(self, p: Product, price: str, availability: str) -> str:
        # Some cards carry tracking params or a fragment: crawlers must canonicalise.
        href = f"/p/{p.slug}"
        if p.index % 7 == 3:
            href += "?utm_source=newsletter&amp;utm_medium=email"
        elif p.index % 5 == 1:
            href += "#reviews"
        name = escape(p.name)
        return (
            f'<li class="grid__item"><a class="product-card" href="{href}" data-sku="{p.sku}">'
            f'<img src="/img/{p.slug}.jpg" alt="{name}" loading="lazy" width="300" height="300">'
            f'<h3 class="card__title">{name}</h3></a><div class="card__meta">'
            f'<span class="price">{format_price(price, self.currency)}</span> '
            f'<span class="stock">{_STOCK_TEXT[availability]}</span></div></li>'
        )

    def product(self, slug: str, epoch: int, *, sold_out: bool = False) -> Page:
        """The product's page; ``sold_out``: shown sold out whatever its stock (a transient
        error of the shop, planted by a test)."""
        p = self.catalog.by_slug.get(slug)
        state = self.catalog.state(epoch)
        if p is None or p.host != self.host or p.index not in state.listed:
            return self.not_found()
        price = state.price[p.index]
        availability = "out_of_stock" if sold_out else state.availability[p.index]
        url = self.catalog.url(p)
        image = self.catalog.image(p)
        ld = {
            "@context": "https://schema.org",
            "@type": "Product",
            "sku": p.sku,
            "name": p.name,
            "brand": {"@type": "Brand", "name": p.brand},
            "image": image,
            "url": url,
            "category": p.category,
            "description": p.description,
            "offers": {
                "@type": "Offer",
                "price": price,
                "priceCurrency": self.currency,
                "availability": SCHEMA_AVAILABILITY[availability],
                "url": url,
            },
        }
        options = variants(self.catalog, p, epoch, churn=True) if self.variants else []
        if len(options) > 1:
            ld = self._group(p, ld, options, availability)
            # The page shows what the cheapest option in stock costs (any option if none is).
            paid = [Decimal(o["sale_price"] or o["price"]) for o in options if o["stock"]]
            price = str(min(paid or [Decimal(o["sale_price"] or o["price"]) for o in options]))
        crumbs = {
            "@context": "https://schema.org",
            "@type": "BreadcrumbList",
            "itemListElement": [
                {"@type": "ListItem", "position": 1, "name": "Home", "item": f"{self.base}/"},
                {
                    "@type": "ListItem",
                    "position": 2,
                    "name": p.category.title(),
                    "item": self.catalog.category_url(p.category),
                },
            ],
        }
        name = escape(p.name)
        head = (
            '<meta property="og:type" content="product">'
            f'<meta property="og:title" content="{name}">'
            f'<meta property="og:url" content="{url}">'
            f'<meta property="og:image" content="{image}">'
            f'<meta property="product:price:amount" content="{price}">'
            f'<meta property="product:price:currency" content="{self.currency}">'
            f'<meta property="product:availability" content="{_OG_STOCK[availability]}">'
            f"{_json_ld(ld)}{_json_ld(crumbs)}"
        )
        related = [self.catalog.products[i] for i in p.related if i in state.listed][:4]
        tiles = "".join(
            f'<li><a href="/p/{r.slug}"><img src="/img/{r.slug}.jpg" alt="" width="160" '
            f'height="160"><span class="related__name">{escape(r.name)}</span></a>'
            f'<span class="related__price">'
            f"{format_price(state.price[r.index], self.currency)}</span></li>"
            for r in related
        )
        button = "Pre-order" if availability == "preorder" else "Add to cart"
        disabled = " disabled" if availability == "out_of_stock" else ""
        main = (
            f'<nav class="breadcrumbs"><a href="/">Home</a> &rsaquo; '
            f'<a href="/c/{p.category}?page=1">{p.category.title()}</a> &rsaquo; '
            f"<span>{name}</span></nav>"
            f'<article class="product" data-sku="{p.sku}"><div class="gallery">'
            f'<img src="{image}" alt="{name}" width="600" height="600"></div>'
            f'<div class="buy-box"><h1 class="product__title">{name}</h1>'
            f'<p class="brand">by <a href="/search?q={quote_plus(p.brand)}">{escape(p.brand)}</a>'
            f'</p><p class="price-line"><span class="price">'
            f"{format_price(price, self.currency)}</span>"
            f' <small>incl. VAT</small></p><p class="availability {availability}">'
            f"{_STOCK_TEXT[availability]}</p>"
            '<form class="add-to-cart" action="/cart" method="post">'
            f'<input type="hidden" name="sku" value="{p.sku}">'
            '<input type="number" name="qty" value="1" min="1">'
            f'<button type="submit"{disabled}>{button}</button></form>'
            f'<a class="wishlist" href="/account?wishlist={p.sku}">Add to wishlist</a></div>'
            f'<section class="description"><h2>Description</h2><p>{escape(p.description)}</p>'
            f'<table class="specs"><tr><th>SKU</th><td>{p.sku}</td></tr>'
            f"<tr><th>Brand</th><td>{escape(p.brand)}</td></tr>"
            f"<tr><th>Category</th><td>{p.category.title()}</td></tr></table></section>"
            '<section id="reviews" class="reviews"><h2>Reviews</h2>'
            "<p>No reviews yet. Be the first to review this product.</p></section></article>"
            f'<section class="related"><h2>You may also like</h2><ul>{tiles}</ul></section>'
        )
        return Page(200, self._doc(p.name, main, url, head))

    # -- machine-readable ----------------------------------------------------------------------
    def robots(self) -> Page:
        body = (
            "User-agent: *\n"
            "Disallow: /cart\n"
            "Disallow: /account\n"
            "\n"
            f"Sitemap: {self.base}/sitemap.xml\n"
        )
        return Page(200, body, "text/plain; charset=utf-8")

    def sitemap(self, epoch: int) -> Page:
        state = self.catalog.state(epoch)
        today = epoch_date(epoch).isoformat()
        urls = [
            f"<url><loc>{self.base}/c/{c}?page=1</loc><lastmod>{today}</lastmod></url>"
            for c in self.categories
        ]
        urls.extend(
            f"<url><loc>{self.catalog.url(p)}</loc>"
            f"<lastmod>{epoch_date(state.changed[p.index]).isoformat()}</lastmod></url>"
            for c in self.categories
            for p in self.catalog.listing(c, epoch)
        )
        body = (
            '<?xml version="1.0" encoding="UTF-8"?>\n'
            '<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">\n'
            + "\n".join(urls)
            + "\n</urlset>\n"
        )
        return Page(200, body, "application/xml")


def _json_ld(data: Mapping[str, object]) -> str:
    text = json.dumps(data, ensure_ascii=False).replace("</", "<\\/")
    return f'<script type="application/ld+json">{text}</script>'
