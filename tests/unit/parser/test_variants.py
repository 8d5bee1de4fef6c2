"""Variants become product rows of their own: ProductGroup/hasVariant (JSON-LD and microdata),
offer lists per size or colour; offers all alike (sellers, tiers) are no variants; the product
stays collapsed to its lowest available price and best stock."""

from __future__ import annotations

import json

from services.parser.formats import parse_payload

URL = "https://shop.test/p/trail"
IN, OUT = "https://schema.org/InStock", "https://schema.org/OutOfStock"


def _page(ld: dict) -> bytes:
    return (
        f'<html><head><title>Trail Shoe</title><script type="application/ld+json">'
        f"{json.dumps(ld)}</script></head><body><h1>Trail Shoe</h1></body></html>"
    ).encode()


def _parse(body: bytes):
    return parse_payload(body, URL, content_type="text/html")


def _offer(price: str, availability: str, **kw) -> dict:
    return {
        "@type": "Offer",
        "price": price,
        "priceCurrency": "EUR",
        "availability": availability,
        **kw,
    }


def test_product_group_variants_have_their_own_rows() -> None:
    ld = {
        "@context": "https://schema.org",
        "@type": "ProductGroup",
        "productGroupID": "TS1",
        "name": "Trail Shoe",
        "url": URL,
        "hasVariant": [
            {"@type": "Product", "sku": "TS1-40", "size": "40", "color": {"name": "Red"},
             "offers": _offer("89.00", IN)},
            {"@type": "Product", "sku": "TS1-41", "size": "41", "offers": _offer("79.00", OUT)},
            {"@type": "Product", "sku": "TS1-41", "size": "41", "offers": _offer("79.00", OUT)},
        ],
    }  # fmt: skip
    parsed = _parse(_page(ld))
    group = parsed.product
    assert group is not None and group.key == "TS1"
    # In stock when any variant is; priced at the lowest available one.
    assert (group.price, group.availability) == ("89.00", "in_stock")
    rows = {p.key: p for p in parsed.products}
    assert set(rows) == {"TS1#TS1-40", "TS1#TS1-41"}  # the one listed twice is one
    sold_out = rows["TS1#TS1-41"]
    assert (sold_out.sku, sold_out.price, sold_out.availability) == (
        "TS1-41",
        "79.00",
        "out_of_stock",
    )
    assert sold_out.variant_of == "TS1" and sold_out.name == "Trail Shoe"
    assert rows["TS1#TS1-40"].attributes == {"size": "40", "colour": "Red"}
    assert sold_out.confidence == group.confidence and sold_out.url == URL


def test_offers_per_size_are_variants_but_alike_offers_are_not() -> None:
    ld = {
        "@context": "https://schema.org",
        "@type": "Product",
        "sku": "TEE",
        "name": "Trail Shoe",
        "offers": [
            _offer("20.00", IN, sku="TEE-S", itemOffered={"@type": "Product", "size": "S"}),
            _offer("22.00", OUT, sku="TEE-M"),
        ],
    }
    parsed = _parse(_page(ld))
    assert parsed.product is not None and parsed.product.price == "20.00"
    assert [(p.key, p.availability) for p in parsed.products] == [
        ("TEE#TEE-S", "in_stock"),
        ("TEE#TEE-M", "out_of_stock"),
    ]
    assert parsed.products[0].attributes == {"size": "S"}
    sellers = dict(ld, offers=[_offer("20.00", IN), _offer("21.00", IN)])
    assert _parse(_page(sellers)).products == []
    single = dict(ld, offers=_offer("20.00", IN))
    assert _parse(_page(single)).products == []


def test_microdata_product_group() -> None:
    body = f"""<html><head><title>Trail Shoe</title></head><body>
    <div itemscope itemtype="https://schema.org/ProductGroup">
      <h1 itemprop="name">Trail Shoe</h1><meta itemprop="productGroupID" content="TS1">
      <link itemprop="url" href="{URL}">
      <div itemprop="hasVariant" itemscope itemtype="https://schema.org/Product">
        <meta itemprop="sku" content="TS1-40"><meta itemprop="size" content="40">
        <div itemprop="offers" itemscope itemtype="https://schema.org/Offer">
          <meta itemprop="price" content="89.00"><meta itemprop="priceCurrency" content="EUR">
          <link itemprop="availability" href="{IN}"></div></div>
      <div itemprop="hasVariant" itemscope itemtype="https://schema.org/Product">
        <meta itemprop="sku" content="TS1-41"><meta itemprop="size" content="41">
        <div itemprop="offers" itemscope itemtype="https://schema.org/Offer">
          <meta itemprop="price" content="79.00"><meta itemprop="priceCurrency" content="EUR">
          <link itemprop="availability" href="{OUT}"></div></div>
    </div></body></html>""".encode()
    parsed = _parse(body)
    assert parsed.product is not None and parsed.product.key == "TS1"
    assert [(p.key, p.attributes, p.availability) for p in parsed.products] == [
        ("TS1#TS1-40", {"size": "40"}, "in_stock"),
        ("TS1#TS1-41", {"size": "41"}, "out_of_stock"),
    ]


def _with_picker(ld: dict) -> bytes:
    picker = (
        '<select name="size"><option value="">Choose</option>'
        '<option data-sku="P-S">S</option><option data-sku="P-M" disabled>M - sold out</option>'
        "</select>"
    )
    return _page(ld).replace(b"</h1>", b"</h1>" + picker.encode())


def test_a_visible_picker_counts_only_without_structured_variants() -> None:
    group = {
        "@context": "https://schema.org",
        "@type": "ProductGroup",
        "productGroupID": "TS1",
        "name": "Trail Shoe",
        "hasVariant": [
            {"@type": "Product", "sku": "TS1-40", "size": "40", "offers": _offer("89.00", IN)},
            {"@type": "Product", "sku": "TS1-41", "size": "41", "offers": _offer("79.00", OUT)},
        ],
    }
    assert [p.key for p in _parse(_with_picker(group)).products] == ["TS1#TS1-40", "TS1#TS1-41"]
    single = {"@type": "Product", "sku": "P", "name": "Trail Shoe", "offers": _offer("20.00", IN)}
    rows = _parse(_with_picker(single)).products
    assert [(p.key, p.sku, p.price, p.availability, p.attributes, p.variant_of) for p in rows] == [
        ("P#P-S", "P-S", "20.00", "in_stock", {"size": "S"}, "P"),
        ("P#P-M", "P-M", "20.00", "out_of_stock", {"size": "M"}, "P"),
    ]
