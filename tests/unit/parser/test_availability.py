"""Availability values and shown words → states (``services.parser.availability``)."""

from __future__ import annotations

import pytest

from services.parser.availability import normalize_availability, shown_state


@pytest.mark.parametrize(
    ("value", "state"),
    [
        ("http://schema.org/InStock", "in_stock"),
        ("https://schema.org/InStock ", "in_stock"),
        ("schema:OutOfStock", "out_of_stock"),
        ("instock", "in_stock"),
        ("In Stock", "in_stock"),
        ("http://schema.org/ItemAvailability/PreOrder", "preorder"),
        ("BackOrder", "backorder"),
        ("LimitedAvailability", "limited"),
        ("MadeToOrder", "backorder"),
        ("Reserved", "out_of_stock"),
        ("oos", "out_of_stock"),  # feed words
        ("available for order", "backorder"),
        ("Status: Sold", "out_of_stock"),  # classified ads
        ("NOT SOLD", "in_stock"),
        ("Derzeit nicht lieferbar", "out_of_stock"),  # shown words as a structured value
        ("Pre-order now", "preorder"),
        ("Only 3 left in stock", "in_stock"),
        ("Call us", "unknown"),
    ],
)
def test_structured_values(value: str, state: str) -> None:
    assert normalize_availability(value) == state


@pytest.mark.parametrize(
    ("words", "state"),
    [
        ("Nincs raktáron", "out_of_stock"),  # a negation holds the in-stock words
        ("Sold", "out_of_stock"),  # a classified ad's status, as the whole text
        ("Reserviert", "out_of_stock"),
        ("Sold by Northwind Outlet", None),  # the seller, not the state
        ("No Longer Stocked", "out_of_stock"),  # a distributor's withdrawn part
        ("This product is discontinued and can no longer be ordered.", "out_of_stock"),
        ("Nicht mehr bestellbar", "out_of_stock"),
        ("1,234 sold", None),
        ("Bidding has ended", "out_of_stock"),
        ("Raktáron", "in_stock"),
        ("Nije na stanju", "out_of_stock"),
        ("Nu este în stoc", "out_of_stock"),
        ("În stoc", "in_stock"),
        ("Inte i lager", "out_of_stock"),
        ("I lager", "in_stock"),
        ("Não disponível", "out_of_stock"),
        ("Disponível", "in_stock"),
        ("ไม่มีสินค้า", "out_of_stock"),
        ("Εκτός αποθέματος", "out_of_stock"),
        ("Back-order: ships in 3 weeks", "backorder"),
        ("Out-of-Stock", "out_of_stock"),  # a badge's hyphens
        ("Sold-out", "out_of_stock"),
        ("In-stock", "in_stock"),
        ("Free delivery", None),
        # each negation before the word it holds
        ("غير متوفر", "out_of_stock"),
        ("متوفر", "in_stock"),
        ("אין במלאי", "out_of_stock"),
        ("במלאי", "in_stock"),
        ("Niedostępna", "out_of_stock"),
        ("Dostępne", "in_stock"),
        ("Niet meer leverbaar", "out_of_stock"),
        ("Direct leverbaar", "in_stock"),
        ("Wieder verfügbar ab 12.03.", "out_of_stock"),  # available again later: not now
        ("Sofort verfügbar", "in_stock"),
        ("Sofort versandfertig", "in_stock"),
        ("Verfügbarkeit: 2-3 Tage", None),  # the label, not the word
        ("Back in stock soon", "out_of_stock"),
        ("Unavailable", "out_of_stock"),
        ("Available", "in_stock"),
        ("Available in 3 colours", None),
        ("在庫なし", "out_of_stock"),
        ("品切れ", "out_of_stock"),
        ("재고 없음", "out_of_stock"),
        ("Нет на складе", "out_of_stock"),
        ("Fora de estoque", "out_of_stock"),
        ("Tillfälligt slut", "out_of_stock"),
        ("Disponibilità immediata", "in_stock"),
        ("Tidak tersedia", "out_of_stock"),
        ("Tersedia", "in_stock"),
        ("Ce produit n'est plus en stock", "out_of_stock"),
        ("Hors stock", "out_of_stock"),
        ("Inte tillgänglig för leverans", "out_of_stock"),
        ("予定数の販売を終了しました", "out_of_stock"),  # the sale has ended
        # a classified ad's notice that it is gone, and a product withdrawn
        ("This ad is no longer available", "out_of_stock"),
        ("Questo oggetto è stato venduto", "out_of_stock"),
        ("Cet article est réservé pour un autre membre.", "out_of_stock"),
        ("Dieser Artikel wurde bereits verkauft", "out_of_stock"),
        ("Объявление не активно", "out_of_stock"),
        ("Este producto ya no está disponible", "out_of_stock"),
        ("Ogłoszenie nieaktywne", "out_of_stock"),
        ("Inzerát je rezervovaný.", "out_of_stock"),
        ("Este producto está reservado.", "out_of_stock"),
        ("Over 500 have been sold", None),
        ("Tous droits réservés", None),
        # Bitrix Aspro's stock levels by count
        ("Много", "in_stock"),
        ("Мало", "in_stock"),
    ],
)
def test_shown_words(words: str, state: str | None) -> None:
    assert shown_state(words) == state
