"""A static shop of the shape issue 13 measured, written to a directory for nginx to serve.

``python -m bench.static_site OUTDIR [--products 5000] [--seed 13]`` writes it alone.

The shape: ``products`` products in 20 categories; listing pages of 20-30 cards with numbered
pagination (``/c/<cat>/page/<n>.html``); product pages of 30-60 KB (median about 45 KB: markup,
description, specs table, reviews) with a JSON-LD Product (sku, name, price, currency,
availability); about 200 links a page: header navigation with a mega menu, footer navigation,
facets (sort and filter parameters), product cards with tracking parameters, breadcrumbs and
related products. robots.txt disallows the facet parameters, cart, account and search, as real
shops do, so a crawler that obeys it fetches exactly the home page, the info pages, the listings
and the products. Links are root-relative, so the site does not depend on the host serving it.

``truth.json`` (written beside the site, not in it) lists every product's path, sku, name,
price, currency and availability.

The generator is a pure function of its arguments (``random.Random(seed)``): the same call
writes the same bytes. It is fast because nothing is written word by word: text comes from
pools built once (paragraphs, reviews, spec rows), each product's card is rendered once, and
the header and footer are the same string on every page. 20,000 products take a few seconds.
"""

from __future__ import annotations

import argparse
import json
import random
import time
from dataclasses import dataclass, field
from pathlib import Path

CATEGORIES = (
    "kitchen", "garden", "lighting", "bathroom", "bedroom", "office", "outdoor", "tools",
    "audio", "video", "computing", "phones", "toys", "sports", "fitness", "travel", "pets",
    "baby", "beauty", "grocery",
)  # fmt: skip
INFO_PAGES = (
    "about", "contact", "shipping", "returns", "faq", "stores", "careers", "press", "privacy",
    "terms", "cookies", "gift-cards",
)  # fmt: skip
BRANDS = (
    "Acme", "Borealis", "Cobalt", "Dunmore", "Elmwood", "Fjord", "Granite", "Halcyon", "Ironbark",
    "Juniper", "Kestrel", "Lumen", "Meridian", "Northwind", "Oakridge", "Pinnacle",
)  # fmt: skip
COLOURS = ("black", "white", "grey", "red", "blue", "green", "yellow", "brown")
SORTS = ("relevance", "price-asc", "price-desc", "newest", "rating")
PRICE_BANDS = ("0-25", "25-50", "50-100", "100-250", "250-")
SUBTYPES = ("essentials", "premium", "sets")
# Query parameters that make a facet: robots.txt disallows them, so no crawler follows one.
FACET_PARAMS = ("sort", "brand", "colour", "price", "rating", "type")
TRACKING = "utm_source={src}&amp;utm_medium={medium}&amp;utm_campaign={campaign}"
CURRENCY = "EUR"
AVAILABILITY = (("InStock", 85), ("OutOfStock", 10), ("PreOrder", 5))
CARDS_PER_LISTING = (20, 30)
RELATED = 16  # cards per carousel; a product page has two
PAGE_BYTES = (31_000, 59_000)  # product pages; the target is drawn around MEDIAN_BYTES
MEDIAN_BYTES = 45_000
PAGER_WINDOW = 3  # numbered page links either side of the current one (first and last always)

_VOCABULARY = (
    "steel oak linen copper matte brushed compact sturdy quiet efficient modern classic durable "
    "lightweight ergonomic adjustable portable foldable rechargeable wireless washable premium "
    "everyday weatherproof handcrafted balanced precise generous slim soft warm bright natural "
    "design comfort finish handle surface base lid frame cable battery motor fabric cushion "
    "strap hinge panel drawer shelf blade nozzle filter seal grip switch dial display sensor "
    "for with and the a of to in on by from every when while after your this that it its is "
    "keeps makes holds fits works lasts cleans stores folds charges heats cools lights measures "
    "easily quickly safely gently firmly evenly reliably daily outdoors indoors years hours "
    "kitchen garden desk table room travel family home weekend morning evening season"
)
_WORDS = _VOCABULARY.split()
_NOUNS = (
    "kettle", "lamp", "chair", "table", "speaker", "blender", "backpack", "jacket", "drill",
    "router", "monitor", "headphones", "toaster", "planter", "mirror", "rug", "shelf", "tent",
    "bottle", "scale", "brush", "bowl", "pan", "clock", "fan", "heater", "cushion", "basket",
)  # fmt: skip
_ADJECTIVES = (
    "compact", "classic", "modern", "deluxe", "smart", "slim", "rugged", "quiet", "nordic",
    "urban", "studio", "travel", "pro", "mini", "family", "eco",
)  # fmt: skip
_SPEC_KEYS = (
    "Material", "Width", "Height", "Depth", "Weight", "Colour", "Finish", "Power", "Voltage",
    "Capacity", "Warranty", "Origin", "Care", "Assembly", "Packaging", "Model year", "Noise",
    "Battery", "Connectivity", "Certification", "Pieces", "Dishwasher safe", "Cable length",
)  # fmt: skip
_REVIEWERS = ("Anna", "Ben", "Chloe", "David", "Emma", "Felix", "Grace", "Hugo", "Iris", "Jon")


@dataclass(frozen=True)
class Product:
    index: int
    sku: str
    slug: str
    name: str
    brand: str
    category: str
    price: str  # a decimal string, as the JSON-LD offer gives it
    availability: str  # schema.org name: InStock, OutOfStock, PreOrder

    @property
    def path(self) -> str:
        return f"/p/{self.slug}.html"


@dataclass
class Site:
    """What was written: every product, and the page counts by kind."""

    root: Path
    products: list[Product]
    listings: dict[str, int]  # category → number of listing pages
    info_pages: int
    bytes_written: int = 0
    truth_file: Path | None = None
    product_sizes: list[int] = field(default_factory=list)

    @property
    def pages(self) -> int:
        """Every page a crawler that obeys robots.txt fetches (robots.txt itself not counted)."""
        return 1 + self.info_pages + sum(self.listings.values()) + len(self.products)

    def truth(self) -> list[dict[str, str]]:
        return [
            {
                "path": p.path,
                "sku": p.sku,
                "name": p.name,
                "price": p.price,
                "currency": CURRENCY,
                "availability": p.availability,
            }
            for p in self.products
        ]


def listing_path(category: str, page: int) -> str:
    return f"/c/{category}/page/{page}.html"


def robots_txt() -> str:
    lines = ["User-agent: *", "Disallow: /cart", "Disallow: /account", "Disallow: /search"]
    for param in FACET_PARAMS:
        lines += [f"Disallow: /*?{param}=", f"Disallow: /*&{param}="]
    return "\n".join(lines) + "\n"


class _Text:
    """Pools of prose built once per site: pages pick from them instead of writing words."""

    def __init__(self, rng: random.Random) -> None:
        def sentence(n: int) -> str:
            words = rng.choices(_WORDS, k=n)
            return " ".join(words).capitalize() + "."

        def paragraph(lo: int, hi: int) -> str:
            return " ".join(sentence(rng.randint(8, 16)) for _ in range(rng.randint(lo, hi)))

        self.paragraphs = [paragraph(3, 8) for _ in range(400)]
        self.reviews = [
            f'<article class="review" itemprop="review"><header><span class="review__stars" '
            f'aria-label="{stars} of 5">{"★" * stars}{"☆" * (5 - stars)}</span> '
            f'<h4 class="review__title">{sentence(rng.randint(3, 6))}</h4></header>'
            f'<p class="review__meta">by <span class="review__author">'
            f"{rng.choice(_REVIEWERS)} {chr(65 + rng.randrange(26))}.</span> on "
            f'<time datetime="2024-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}">'
            f"{rng.randint(1, 28)} {rng.choice(('Jan', 'Mar', 'May', 'Aug', 'Oct'))} 2024"
            f'</time> · Verified purchase</p><div class="review__body"><p>'
            f'{paragraph(2, 6)}</p></div><footer class="review__actions">'
            f'<button type="button" class="review__helpful">Helpful ({rng.randint(0, 40)})'
            f'</button><button type="button" class="review__report">Report</button></footer>'
            f"</article>\n"
            for stars in (rng.choice((2, 3, 4, 4, 5, 5, 5)) for _ in range(600))
        ]
        self.review_bytes = [len(r.encode()) for r in self.reviews]
        self.spec_rows = [
            f'<tr><th scope="row">{key}</th><td>{" ".join(rng.choices(_WORDS, k=3))} '
            f"{rng.randint(1, 999)}</td></tr>"
            for key in _SPEC_KEYS
            for _ in range(8)
        ]


def _products(rng: random.Random, count: int, categories: tuple[str, ...]) -> list[Product]:
    states = [s for s, _ in AVAILABILITY]
    weights = [w for _, w in AVAILABILITY]
    out = []
    for i in range(count):
        noun = rng.choice(_NOUNS)
        adjective = rng.choice(_ADJECTIVES)
        brand = rng.choice(BRANDS)
        cents = int(rng.lognormvariate(3.6, 0.9) * 100)
        out.append(
            Product(
                index=i,
                sku=f"ST-{i:06d}",
                slug=f"{brand.lower()}-{adjective}-{noun}-{i}",
                name=f"{brand} {adjective.capitalize()} {noun.capitalize()} {i}",
                brand=brand,
                category=categories[i % len(categories)],
                price=f"{max(199, min(cents, 199_999)) / 100:.2f}",
                availability=rng.choices(states, weights)[0],
            )
        )
    return out


def _split(rng: random.Random, n: int) -> list[int]:
    """Cards per listing page for a category of ``n`` products: each 20-30 when ``n`` allows
    (a category of 31-39 cannot), the number of pages and the sizes drawn at random."""
    lo, hi = CARDS_PER_LISTING
    if n <= hi:
        return [n]
    fewest, most = -(-n // hi), n // lo
    k = rng.randint(fewest, max(fewest, most))
    sizes = [n // k + (1 if i < n % k else 0) for i in range(k)]
    for _ in range(2 * k):  # uneven pages, as a shop's are
        i, j, step = rng.randrange(k), rng.randrange(k), rng.randint(1, 3)
        if i != j and sizes[i] - step >= lo and sizes[j] + step <= hi:
            sizes[i] -= step
            sizes[j] += step
    return sizes


def _header(categories: tuple[str, ...]) -> str:
    top = "".join(
        f'<li><a href="/info/{p}.html">{p.replace("-", " ").title()}</a></li>'
        for p in ("stores", "faq", "contact", "shipping", "gift-cards")
    )
    menu = []
    for cat in categories:
        subs = "".join(
            f'<li><a class="mega-menu__link" href="{listing_path(cat, 1)}?type={t}">'
            f"{cat.title()} {t}</a></li>"
            for t in SUBTYPES
        )
        menu.append(
            f'<li class="main-nav__item"><a class="main-nav__link" '
            f'href="{listing_path(cat, 1)}">{cat.title()}</a>'
            f'<div class="mega-menu"><ul class="mega-menu__list">{subs}</ul></div></li>'
        )
    return (
        '<header class="site-header"><div class="topbar"><ul class="topbar__links">'
        f"{top}</ul></div>"
        '<div class="site-header__main"><a class="logo" href="/" aria-label="Home">'
        '<svg width="120" height="32" role="img"><title>Static Shop</title></svg></a>'
        '<form class="search" action="/search" method="get" role="search">'
        '<input type="search" name="q" placeholder="Search products" aria-label="Search">'
        '<button type="submit">Search</button></form>'
        '<a class="account" href="/account" rel="nofollow">Account</a>'
        '<a class="cart" href="/cart" rel="nofollow">Cart <span class="cart__count">0</span></a>'
        f'</div><nav class="main-nav" aria-label="Categories"><ul>{"".join(menu)}</ul></nav>'
        "</header>\n"
    )


def _footer(categories: tuple[str, ...]) -> str:
    cats = "".join(f'<li><a href="{listing_path(c, 1)}">{c.title()}</a></li>' for c in categories)
    info = "".join(
        f'<li><a href="/info/{p}.html">{p.replace("-", " ").title()}</a></li>' for p in INFO_PAGES
    )
    social = "".join(
        f'<li><a href="https://{s}.example.com/staticshop" rel="noopener">{s.title()}</a></li>'
        for s in ("facebook", "instagram", "pinterest", "youtube", "tiktok")
    )
    return (
        '<footer class="site-footer"><div class="site-footer__columns">'
        f'<section><h3>Shop</h3><ul class="footer-nav">{cats}</ul></section>'
        f'<section><h3>Customer service</h3><ul class="footer-nav">{info}</ul></section>'
        f'<section><h3>Follow us</h3><ul class="social">{social}</ul></section>'
        '<section class="newsletter"><h3>Newsletter</h3><form action="/newsletter" '
        'method="post"><input type="email" name="email" aria-label="Email">'
        '<button type="submit">Subscribe</button></form></section></div>'
        '<p class="legal">© 2024 Static Shop · Prices include VAT · '
        '<a href="/info/privacy.html">Privacy</a> · <a href="/info/terms.html">Terms</a> · '
        '<a href="/info/cookies.html">Cookies</a></p></footer>\n'
    )


def _card(p: Product) -> tuple[str, str, str]:
    """A product card in three parts; its two links end where the tracking query goes."""
    stars = 3 + p.index % 3
    return (
        f'<li class="product-card" data-sku="{p.sku}"><a class="product-card__image" '
        f'href="{p.path}?',
        f'"><img src="/img/{p.sku}.jpg" alt="{p.name}" loading="lazy" width="240" height="240">'
        f'</a><div class="product-card__body"><a class="product-card__title" href="{p.path}?',
        f'">{p.name}</a><div class="product-card__brand">{p.brand}</div>'
        f'<div class="price"><span class="price__amount">€{p.price}</span></div>'
        f'<div class="rating" aria-label="{stars} of 5">{"★" * stars}{"☆" * (5 - stars)} '
        f"<span>({7 + p.index % 211})</span></div></div></li>\n",
    )


def _page(title: str, header: str, footer: str, body: str, head_extra: str = "") -> str:
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{title} | Static Shop</title>"
        '<link rel="stylesheet" href="/assets/site.css">'
        f"{head_extra}</head>\n<body>{header}<main>{body}</main>{footer}"
        '<script src="/assets/site.js" defer></script></body></html>\n'
    )


def _breadcrumbs(*crumbs: tuple[str, str | None]) -> str:
    items = "".join(
        f'<li><a href="{href}">{label}</a></li>'
        if href
        else f'<li aria-current="page">{label}</li>'
        for label, href in crumbs
    )
    return f'<nav class="breadcrumbs" aria-label="Breadcrumb"><ol>{items}</ol></nav>'


def _facets(category: str) -> str:
    base = listing_path(category, 1)
    groups = (
        ("Sort by", "sort", SORTS),
        ("Brand", "brand", tuple(b.lower() for b in BRANDS[:10])),
        ("Colour", "colour", COLOURS),
        ("Price", "price", PRICE_BANDS),
        ("Rating", "rating", ("4", "3", "2")),
    )
    html = []
    for label, param, values in groups:
        links = "".join(
            f'<li><a class="facet__option" href="{base}?{param}={v}" rel="nofollow">{v}</a></li>'
            for v in values
        )
        html.append(f'<section class="facet"><h3>{label}</h3><ul>{links}</ul></section>')
    return f'<aside class="facets">{"".join(html)}</aside>'


def _pager(category: str, page: int, last: int) -> str:
    shown = sorted(
        {1, last, *range(max(1, page - PAGER_WINDOW), min(last, page + PAGER_WINDOW) + 1)}
    )
    links = []
    if page > 1:
        links.append(f'<a rel="prev" href="{listing_path(category, page - 1)}">Previous</a>')
    previous = 0
    for n in shown:
        if n - previous > 1:
            links.append('<span class="pagination__gap">…</span>')
        if n == page:
            links.append(f'<span class="pagination__current" aria-current="page">{n}</span>')
        else:
            links.append(f'<a href="{listing_path(category, n)}">{n}</a>')
        previous = n
    if page < last:
        links.append(f'<a rel="next" href="{listing_path(category, page + 1)}">Next</a>')
    return f'<nav class="pagination" aria-label="Pagination">{"".join(links)}</nav>'


def _jsonld(p: Product, description: str) -> str:
    data = {
        "@context": "https://schema.org",
        "@type": "Product",
        "sku": p.sku,
        "name": p.name,
        "brand": {"@type": "Brand", "name": p.brand},
        "image": f"/img/{p.sku}.jpg",
        "description": description,
        "category": p.category,
        "offers": {
            "@type": "Offer",
            "price": p.price,
            "priceCurrency": CURRENCY,
            "availability": f"https://schema.org/{p.availability}",
            "url": p.path,
            "itemCondition": "https://schema.org/NewCondition",
        },
    }
    return f'<script type="application/ld+json">{json.dumps(data)}</script>'


def generate(
    root: Path,
    *,
    products: int = 5000,
    categories: int = 20,
    seed: int = 13,
    truth_file: Path | None = None,
) -> Site:
    """Write the site under ``root`` (created; existing files overwritten) and, when given,
    the truth to ``truth_file``."""
    if not 1 <= categories <= len(CATEGORIES):
        raise ValueError(f"categories: 1 to {len(CATEGORIES)}")
    rng = random.Random(seed)
    cats = CATEGORIES[:categories]
    text = _Text(rng)
    items = _products(rng, products, cats)
    cards = [_card(p) for p in items]
    header, footer = _header(cats), _footer(cats)
    by_category: dict[str, list[Product]] = {c: [] for c in cats}
    for p in items:
        by_category[p.category].append(p)

    site = Site(root=root, products=items, listings={}, info_pages=len(INFO_PAGES))
    for sub in ("p", "c", "info"):
        (root / sub).mkdir(parents=True, exist_ok=True)
    written = 0

    def write(path: str, html: str) -> int:
        nonlocal written
        data = html.encode()
        (root / path.lstrip("/")).write_bytes(data)
        written += len(data)
        return len(data)

    write("/robots.txt", robots_txt())
    featured = []
    for p in items[:: max(1, len(items) // 24)][:24]:
        a, b, c = cards[p.index]
        track = TRACKING.format(src="home", medium="featured", campaign="spring")
        featured.append(f"{a}{track}{b}{track}{c}")
    write(
        "/index.html",
        _page(
            "Home",
            header,
            footer,
            f'<section class="hero"><h1>Static Shop</h1><p>{text.paragraphs[0]}</p></section>'
            f'<section class="featured"><h2>Featured</h2><ul class="product-grid">'
            f"{''.join(featured)}</ul></section>",
        ),
    )
    for i, name in enumerate(INFO_PAGES):
        title = name.replace("-", " ").title()
        body = "".join(f"<p>{text.paragraphs[(7 * i + k) % 400]}</p>" for k in range(6))
        write(
            f"/info/{name}.html",
            _page(
                title,
                header,
                footer,
                _breadcrumbs(("Home", "/"), (title, None)) + f"<h1>{title}</h1>{body}",
            ),
        )

    for cat in cats:
        members = by_category[cat]
        chunks: list[list[Product]] = []
        for size in _split(rng, len(members)):
            chunks.append(members[:size])
            members = members[size:]
        (root / "c" / cat / "page").mkdir(parents=True, exist_ok=True)
        site.listings[cat] = len(chunks)
        facets = _facets(cat)
        title = cat.title()
        for n, chunk in enumerate(chunks, 1):
            grid = []
            for pos, p in enumerate(chunk):
                a, b, c = cards[p.index]
                track = TRACKING.format(src="plp", medium="grid", campaign=f"{cat}-{n}-{pos}")
                grid.append(f"{a}{track}{b}{track}{c}")
            body = (
                _breadcrumbs(("Home", "/"), (title, listing_path(cat, 1)), (f"Page {n}", None))
                + f'<h1>{title}</h1><p class="intro">{text.paragraphs[(n + len(cat)) % 400]}</p>'
                + f'<div class="listing">{facets}<section class="results">'
                f'<p class="results__count">{len(chunk)} of {len(by_category[cat])} products</p>'
                f'<ul class="product-grid">{"".join(grid)}</ul>'
                f"{_pager(cat, n, len(chunks))}</section></div>"
            )
            head = f'<link rel="canonical" href="{listing_path(cat, n)}">'
            write(listing_path(cat, n), _page(f"{title} – page {n}", header, footer, body, head))

    sizes = []
    for p in items:
        siblings = by_category[p.category]
        description = "</p><p>".join(
            text.paragraphs[rng.randrange(400)] for _ in range(rng.randint(2, 5))
        )
        summary = f"The {p.name} by {p.brand}: {text.paragraphs[p.index % 400][:160]}"
        specs = "".join(text.spec_rows[rng.randrange(len(text.spec_rows))] for _ in range(18))
        carousels = []
        for label, medium in (("Related products", "related"), ("Customers also viewed", "cav")):
            track = TRACKING.format(src="pdp", medium=medium, campaign=p.sku)
            row = []
            for _ in range(RELATED):
                a, b, c = cards[siblings[rng.randrange(len(siblings))].index]
                row.append(f"{a}{track}{b}{track}{c}")
            carousels.append(
                f'<section class="related carousel"><h2>{label}</h2>'
                f'<ul class="product-grid">{"".join(row)}</ul></section>'
            )
        cat_title = p.category.title()
        before = (
            _breadcrumbs(("Home", "/"), (cat_title, listing_path(p.category, 1)), (p.name, None))
            + f'<article class="product" data-sku="{p.sku}"><div class="product__gallery">'
            + "".join(
                f'<img src="/img/{p.sku}-{k}.jpg" alt="{p.name} view {k}" width="600" height="600">'
                for k in range(1, 5)
            )
            + f'</div><div class="product__buy"><h1 class="product__name">{p.name}</h1>'
            f'<p class="product__brand">by <a href="{listing_path(p.category, 1)}?brand='
            f'{p.brand.lower()}">{p.brand}</a></p>'
            f'<p class="product__sku">SKU {p.sku}</p><p class="price"><span '
            f'class="price__amount">€{p.price}</span> <span class="price__vat">incl. VAT'
            f'</span></p><p class="availability availability--{p.availability.lower()}">'
            f"{p.availability}</p>"
            '<form class="add-to-cart" action="/cart" method="post"><input type="hidden" '
            f'name="sku" value="{p.sku}"><input type="number" name="qty" value="1" min="1">'
            '<button type="submit">Add to cart</button></form></div>'
            f'<section class="product__description"><h2>Description</h2><p>{description}</p>'
            f'</section><section class="product__specs"><h2>Specifications</h2><table '
            f'class="specs"><tbody>{specs}</tbody></table></section>'
            '<section class="product__reviews" id="reviews"><h2>Customer reviews</h2>'
        )
        after = f"</section></article>{''.join(carousels)}"
        head = f'<link rel="canonical" href="{p.path}">{_jsonld(p, summary)}'
        shell = _page(p.name, header, footer, before + after, head)
        target = min(max(int(rng.gauss(MEDIAN_BYTES, 6500)), PAGE_BYTES[0]), PAGE_BYTES[1])
        # Reviews fill the page to its target size (each is 0.5-1.3 KB; the last one may
        # overshoot by that much, still inside PAGE_BYTES).
        size = len(shell.encode())
        reviews = []
        while size < target - 600:
            k = rng.randrange(len(text.reviews))
            reviews.append(text.reviews[k])
            size += text.review_bytes[k]
        html = _page(p.name, header, footer, before + "".join(reviews) + after, head)
        sizes.append(write(p.path, html))
    site.product_sizes = sizes
    site.bytes_written = written
    if truth_file is not None:
        truth_file.write_text(json.dumps(site.truth(), indent=0))
        site.truth_file = truth_file
    return site


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m bench.static_site", description=__doc__)
    p.add_argument("outdir", type=Path)
    p.add_argument("--products", type=int, default=5000)
    p.add_argument("--categories", type=int, default=len(CATEGORIES))
    p.add_argument("--seed", type=int, default=13)
    args = p.parse_args(argv)
    t0 = time.monotonic()
    site = generate(
        args.outdir / "site",
        products=args.products,
        categories=args.categories,
        seed=args.seed,
        truth_file=args.outdir / "truth.json",
    )
    sizes = sorted(site.product_sizes)
    print(
        f"{site.pages} pages ({len(site.products)} products, "
        f"{sum(site.listings.values())} listings) in {time.monotonic() - t0:.1f} s, "
        f"{site.bytes_written / 1e6:.0f} MB; product pages {sizes[0] / 1000:.0f}-"
        f"{sizes[-1] / 1000:.0f} KB, median {sizes[len(sizes) // 2] / 1000:.0f} KB"
    )


if __name__ == "__main__":
    main()
