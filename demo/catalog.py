"""The demo shop's catalog: products generated from (seed, n_products), changed by epochs.

Everything here is a pure function of the seed, so two processes (the shop and a test) agree
on the truth without talking to each other. Epochs are cumulative: epoch 2 applies its own
changes on top of epoch 1, so a product delisted in epoch 1 stays delisted.
"""

from __future__ import annotations

import random
import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date, timedelta

CATEGORIES: tuple[str, ...] = (
    "kitchen",
    "garden",
    "lighting",
    "bath",
    "office",
    "outdoor",
    "textiles",
    "storage",
)

# (noun, sizes) per category; a name is "<material> <noun> <size>".
_NOUNS: dict[str, tuple[tuple[str, tuple[str, ...]], ...]] = {
    "kitchen": (
        ("Kettle", ("1.2 L", "1.7 L")),
        ("Saucepan", ("16 cm", "20 cm", "24 cm")),
        ("Chef's Knife", ("18 cm", "21 cm")),
        ("Cutting Board", ("Small", "Large")),
        ("Teapot", ("0.8 L", "1.2 L")),
        ("Mixing Bowl", ("Set of 3", "28 cm")),
        ("Colander", ("22 cm", "26 cm")),
    ),
    "garden": (
        ("Trowel", ("Standard", "Narrow")),
        ("Watering Can", ("5 L", "9 L")),
        ("Planter", ("30 cm", "45 cm", "60 cm")),
        ("Pruning Shears", ("Bypass", "Anvil")),
        ("Garden Hose", ("15 m", "25 m")),
        ("Rake", ("12 Tines", "16 Tines")),
    ),
    "lighting": (
        ("Table Lamp", ("E27", "LED")),
        ("Pendant Light", ("35 cm", "50 cm")),
        ("Floor Lamp", ("150 cm", "180 cm")),
        ("Desk Lamp", ("Clamp", "Base")),
        ("Lantern", ("Small", "Large")),
        ("Wall Sconce", ("Single", "Double")),
    ),
    "bath": (
        ("Bath Towel", ("70x140", "100x150")),
        ("Soap Dish", ("Round", "Square")),
        ("Shower Head", ("20 cm", "30 cm")),
        ("Bath Mat", ("50x80", "60x90")),
        ("Toothbrush Holder", ("Single", "Double")),
    ),
    "office": (
        ("Notebook", ("A5", "A4")),
        ("Desk Organizer", ("3 Slots", "5 Slots")),
        ("Stapler", ("20 Sheets", "40 Sheets")),
        ("Monitor Stand", ("50 cm", "60 cm")),
        ("Pen Set", ("4 Pieces", "10 Pieces")),
        ("Letter Tray", ("2 Tier", "3 Tier")),
    ),
    "outdoor": (
        ("Tent", ("2 Person", "4 Person")),
        ("Camping Stove", ("Single Burner", "Double Burner")),
        ("Sleeping Bag", ("Summer", "3 Season")),
        ("Backpack", ("28 L", "45 L", "65 L")),
        ("Headlamp", ("300 lm", "600 lm")),
    ),
    "textiles": (
        ("Throw Blanket", ("130x170", "150x200")),
        ("Cushion Cover", ("45x45", "50x50")),
        ("Table Runner", ("150 cm", "200 cm")),
        ("Duvet Cover", ("Single", "Double", "King")),
        ("Curtain", ("140x250", "140x280")),
    ),
    "storage": (
        ("Storage Basket", ("Small", "Medium", "Large")),
        ("Shelf Unit", ("3 Shelves", "5 Shelves")),
        ("Box Set", ("Set of 2", "Set of 4")),
        ("Coat Rack", ("5 Hooks", "8 Hooks")),
        ("Shoe Rack", ("2 Tier", "4 Tier")),
    ),
}

_MATERIALS = (
    "Brass",
    "Copper",
    "Oak",
    "Bamboo",
    "Ceramic",
    "Steel",
    "Linen",
    "Walnut",
    "Matte Black",
    "Enamel",
    "Rattan",
    "Glass",
)

BRANDS: tuple[str, ...] = (
    "Nordhaus",
    "Atelier Vell",
    "Kobaltwerk",
    "Linden & Co",
    "Mirela",
    "Fjordline",
    "Casa Orsa",
    "Hollow Pine",
    "Tamsin",
    "Brightwell",
    "Oakridge",
    "Veltro",
)

AVAILABILITIES: tuple[str, ...] = ("in_stock", "out_of_stock", "preorder")
SCHEMA_AVAILABILITY: dict[str, str] = {
    "in_stock": "https://schema.org/InStock",
    "out_of_stock": "https://schema.org/OutOfStock",
    "preorder": "https://schema.org/PreOrder",
}

# One currency per host, alternating, so a crawl sees both formats.
HOST_CURRENCIES: tuple[str, ...] = ("EUR", "USD")

# Shares of an epoch's changes (of the products listed before it).
DELIST_SHARE = 0.10
PRICE_SHARE = 0.15
AVAILABILITY_SHARE = 0.10

BASE_DATE = date(2024, 6, 1)  # the date of epoch 0; epoch n is n days later


def default_base_urls(n_hosts: int = 2) -> list[str]:
    """Placeholder base URLs, used until a shop has bound its ports."""
    return [f"http://127.0.0.{2 + i}" for i in range(n_hosts)]


def epoch_date(epoch: int) -> date:
    return BASE_DATE + timedelta(days=epoch)


def _slugify(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")


@dataclass(frozen=True, slots=True)
class Product:
    """The epoch-independent part of a product; price and availability live in EpochState."""

    index: int
    sku: str
    slug: str
    name: str
    brand: str
    category: str
    host: int
    description: str
    related: tuple[int, ...]  # candidates, best first; the page shows the first listed ones


@dataclass(frozen=True, slots=True)
class EpochState:
    """Per-product variable fields at one epoch, indexed by Product.index."""

    epoch: int
    listed: frozenset[int]
    price: tuple[str, ...]
    availability: tuple[str, ...]
    changed: tuple[int, ...]  # the epoch of each product's last change (sitemap lastmod)

    @property
    def delisted(self) -> list[int]:
        return [i for i in range(len(self.price)) if i not in self.listed]


class Catalog:
    """A deterministic catalog of `n_products` spread over `len(base_urls)` hosts."""

    def __init__(self, seed: int = 1, n_products: int = 60, base_urls: Sequence[str] = ()) -> None:
        self.seed = seed
        self.n_products = n_products
        self.base_urls = list(base_urls) or default_base_urls()
        self.n_hosts = len(self.base_urls)
        self.categories = CATEGORIES
        self.products = self._generate()
        self.by_slug = {p.slug: p for p in self.products}
        self._states: dict[int, EpochState] = {0: self._base_state()}
        self._listings: dict[tuple[str, int], list[Product]] = {}

    # -- generation ----------------------------------------------------------------------
    def category_host(self, category: str) -> int:
        return self.categories.index(category) % self.n_hosts

    def host_categories(self, host: int) -> list[str]:
        return [c for i, c in enumerate(self.categories) if i % self.n_hosts == host]

    def currency(self, host: int) -> str:
        return HOST_CURRENCIES[host % len(HOST_CURRENCIES)]

    def _generate(self) -> list[Product]:
        rng = random.Random(f"demo-catalog:{self.seed}")
        n_cat = len(self.categories)
        drafts = []
        for i in range(self.n_products):
            category = self.categories[i % n_cat]
            noun, sizes = rng.choice(_NOUNS[category])
            material = rng.choice(_MATERIALS)
            name = f"{material} {noun} {rng.choice(sizes)}"
            sku = f"DS-{i + 1:05d}"
            brand = rng.choice(BRANDS)
            description = (
                f"The {name} by {brand} is made of {material.lower()} and built to last. "
                f"Designed in our studio for everyday {category} use, it pairs well with the "
                f"rest of the {brand} range. Ships within {rng.randint(1, 5)} working days."
            )
            drafts.append((i, sku, name, brand, category, description))
        by_category = [range(c, self.n_products, n_cat) for c in range(n_cat)]
        products = []
        for i, sku, name, brand, category, description in drafts:
            # Related candidates come from the same category, hence the same host.
            same = by_category[i % n_cat]
            related = [j for j in rng.sample(same, min(9, len(same))) if j != i][:8]
            products.append(
                Product(
                    index=i,
                    sku=sku,
                    slug=f"{_slugify(name)}-{sku.lower()}",
                    name=name,
                    brand=brand,
                    category=category,
                    host=self.category_host(category),
                    description=description,
                    related=tuple(related),
                )
            )
        return products

    def _base_state(self) -> EpochState:
        rng = random.Random(f"demo-prices:{self.seed}")
        prices = []
        availability = []
        for _ in self.products:
            whole = int(rng.choice((3, 8, 15, 25, 40, 70, 120, 250, 600, 1200)) * rng.uniform(1, 2))
            prices.append(f"{whole}.{rng.choice(('99', '49', '95', '00'))}")
            roll = rng.random()
            availability.append(
                "in_stock" if roll < 0.8 else "out_of_stock" if roll < 0.92 else "preorder"
            )
        return EpochState(
            epoch=0,
            listed=frozenset(range(len(self.products))),
            price=tuple(prices),
            availability=tuple(availability),
            changed=(0,) * len(self.products),
        )

    # -- epochs ----------------------------------------------------------------------------
    def state(self, epoch: int) -> EpochState:
        if epoch < 0:
            raise ValueError("epoch must be >= 0")
        if epoch not in self._states:
            self._states[epoch] = self._advance(self.state(epoch - 1), epoch)
        return self._states[epoch]

    def _advance(self, prev: EpochState, epoch: int) -> EpochState:
        rng = random.Random(f"demo-epoch:{self.seed}:{epoch}")
        listed = sorted(prev.listed)
        gone = set(rng.sample(listed, round(len(listed) * DELIST_SHARE)))
        remaining = [i for i in listed if i not in gone]
        repriced = rng.sample(remaining, round(len(remaining) * PRICE_SHARE))
        restocked = rng.sample(remaining, round(len(remaining) * AVAILABILITY_SHARE))
        price = list(prev.price)
        availability = list(prev.availability)
        changed = list(prev.changed)
        for i in repriced:
            old = float(price[i])
            factor = rng.choice((0.8, 0.85, 0.9, 0.95, 1.05, 1.1, 1.15, 1.25))
            new = f"{max(1, int(old * factor))}.99"
            price[i] = new if new != price[i] else f"{int(old) + 1}.99"
            changed[i] = epoch
        for i in restocked:
            availability[i] = rng.choice([a for a in AVAILABILITIES if a != availability[i]])
            changed[i] = epoch
        for i in gone:
            changed[i] = epoch
        return EpochState(
            epoch=epoch,
            listed=frozenset(remaining),
            price=tuple(price),
            availability=tuple(availability),
            changed=tuple(changed),
        )

    # -- views -------------------------------------------------------------------------------
    def listing(self, category: str, epoch: int) -> list[Product]:
        """The category's listed products at `epoch`, in catalog order."""
        key = (category, epoch)
        if key not in self._listings:
            listed = self.state(epoch).listed
            self._listings[key] = [
                p for p in self.products if p.category == category and p.index in listed
            ]
        return self._listings[key]

    def url(self, product: Product) -> str:
        return f"{self.base_urls[product.host]}/p/{product.slug}"

    def image(self, product: Product) -> str:
        return f"{self.base_urls[product.host]}/img/{product.slug}.jpg"

    def category_url(self, category: str, page: int = 1) -> str:
        return f"{self.base_urls[self.category_host(category)]}/c/{category}?page={page}"

    def record(self, product: Product, epoch: int) -> dict[str, str]:
        state = self.state(epoch)
        return {
            "key": product.sku,
            "sku": product.sku,
            "name": product.name,
            "brand": product.brand,
            "price": state.price[product.index],
            "currency": self.currency(product.host),
            "availability": state.availability[product.index],
            "url": self.url(product),
            "image": self.image(product),
            "category": product.category,
        }

    def truth(self, epoch: int = 0) -> list[dict[str, str]]:
        """The products listed at `epoch`, as a crawler should find them."""
        listed = self.state(epoch).listed
        return [self.record(p, epoch) for p in self.products if p.index in listed]

    def delisted(self, epoch: int) -> list[dict[str, str]]:
        """Products delisted at or before `epoch`, with their last listed price and stock."""
        return [self.record(self.products[i], epoch) for i in self.state(epoch).delisted]
