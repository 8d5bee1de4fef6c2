"""Availability values (schema.org URLs, OpenGraph words, visible text) → our seven states.

A structured value is a schema.org ``ItemAvailability`` in any spelling (``https://…/InStock``,
``schema:InStock``, ``instock``, ``In Stock``) or a feed's word (``oos``, ``available for
order``). Microdata often carries the shown words instead (``<span itemprop=availability>Nicht
lieferbar</span>``, "Status: Sold"): those are read with the words shops use in their buy
boxes, which the visible reader shares (``SOLD_OUT_WORDS``, ``IN_STOCK_WORDS``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from functools import lru_cache

from schemas.messages import Availability

_STATES: dict[str, Availability] = {
    "instock": "in_stock",
    "instoreonly": "in_stock",
    "onlineonly": "in_stock",
    "outofstock": "out_of_stock",
    "soldout": "out_of_stock",
    "preorder": "preorder",
    "presale": "preorder",
    "backorder": "backorder",
    "discontinued": "discontinued",
    "limitedavailability": "limited",
    "madetoorder": "backorder",  # orderable, made and shipped later
    "reserved": "out_of_stock",  # schema.org: reserved for someone, not for sale now
    # Feed and classified-ad words (Facebook catalog, Google Merchant, "Status: Sold").
    "oos": "out_of_stock",
    "availablefororder": "backorder",
    "available": "in_stock",
    "unavailable": "out_of_stock",
    "notavailable": "out_of_stock",
    "sold": "out_of_stock",
    "notsold": "in_stock",
}
# When offers disagree the product is as available as its most available offer.
_RANK: dict[Availability, int] = {
    "in_stock": 0,
    "limited": 1,
    "preorder": 2,
    "backorder": 3,
    "out_of_stock": 4,
    "discontinued": 5,
    "unknown": 6,
}
_NOISE = re.compile(r"[^a-z]")
# The words shops show for a sold-out or an in-stock item, in the languages of the shops we
# meet; sold-out words are tried first ("not in stock", "no disponible" hold in-stock words).
# English ones may be hyphenated, as badges write them ("Out-of-Stock", "Sold-out").
# Lower case, matched against lowered text: with ``re.I`` a 250-character text cost ~0.25 ms
# (every alternative tried case-blind at every position), lowered ~0.06.
_AUCTION_ENDED = (
    r"bidding (?:has )?ended|auction (?:has )?(?:ended|closed)|listing (?:has )?ended"
    r"|angebot (?:wurde )?beendet|auktion (?:ist )?beendet|オークションは終了"
)
SOLD_OUT_WORDS = re.compile(
    r"out[- ]of[- ]stock|sold[- ]out|currently unavailable|unavailable online|not available"
    r"|no longer (?:available|stocked|sold|carried|offered)|(?:has been|is|was) discontinued"
    r"|^\W*discontinued\W*$"
    r"|(?:cannot|can no longer|can't) be (?:ordered|purchased)"
    r"|nicht mehr (?:bestellbar|im sortiment)|temporarily unavailable|not[- ]in[- ]stock"
    r"|ausverkauft"
    r"|nicht (?:mehr )?(?:verfügbar"
    r"|lieferbar|auf lager|vorrätig)|derzeit nicht|rupture de stock|épuisé|indisponible"
    r"|(?:plus|pas) en stock|hors stock|plus disponible|en rupture|nicht zur verfügung"
    r"|(?:inte|ej) tillgänglig|販売(?:を)?終了|販売休止"
    r"|agotado|sin stock|no disponible|sin existencias|esaurito|non disponibile|esgotado"
    r"|indisponível|sem estoque|uitverkocht|niet (?:meer )?(?:op voorraad|leverbaar|beschikbaar)"
    r"|niedostępn|wyprzedany|brak w magazynie|brak towaru|vyprodáno|vypredané|nedostupn"
    r"|není skladem|nie je skladom|nie je možné (?:\S+ )?kúpiť|není možné (?:\S+ )?koupit"
    r"|нет в наличии|распродан|товар закончился|отсутствует|slutsåld|ej i lager|utsolgt"
    r"|ikke på lager|udsolgt|loppuunmyyty|ei varastossa|tükendi|stokta yok|laost otsas"
    r"|nav pieejams|išparduota|在庫切れ|売り切れ|缺貨|售完|已售完|缺货|품절|일시품절|אזל מהמלאי"
    r"|غير متوفر|نفذت الكمية|stoc epuizat|indisponibil|nincs készleten|elfogyott|εξαντλήθηκε"
    r"|μη διαθέσιμο|nema na (?:zalihi|stanju)|rasprodano|немає в наявності|hết hàng"
    r"|สินค้าหมด|ไม่มีสินค้า|tidak tersedia|stok habis|nincs (?:raktáron|készleten)"
    r"|nije (?:na stanju|na zalihi|dostupno)|nu (?:este |e )?[îi]n stoc|inte i lager"
    r"|εκτός αποθέματος|não disponível|nicht vorrätig|vergriffen|wieder (?:verfügbar|lieferbar)"
    r"|back in stock soon|\bno stock\b|^\W*unavailable\W*$|tillfälligt slut|slut i lager"
    r"|loppu varastosta|tilapäisesti loppu|loppunut|在庫なし|在庫無し|品切れ|无货|無貨|售罄"
    r"|재고 ?없음|нет на складе|нет в продаже|fora de estoque|fora de stock|sem stock"
    r"|نفدت? (?:الكمية|من المخزون)|نفذت? من المخزون|غير متاح|אזל ה?מלאי|אין במלאי|לא במלאי"
    # an auction that has ended, a classified ad taken down, sold or reserved
    rf"|{_AUCTION_ENDED}|annonce (?:est )?désactivée|снято с публикации"
    r"|ad (?:is|has) expired|(?:this|the) (?:ad|listing|item) (?:is|has) (?:expired|ended|closed)"
    r"|(?:has been|was) sold\b|(?:is|has been) reserved\b|è stato venduto|est réservée?"
    r"|annuncio (?:scaduto|non (?:è )?più disponibile)|anzeige (?:ist )?(?:abgelaufen|deaktiviert"
    r"|nicht mehr verfügbar)|wurde (?:bereits )?verkauft|is (?:al )?verkocht|ha sido vendid[oa]"
    r"|foi vendid[oa]|został[oa]? sprzedan|объявление (?:не активно|закрыто|устарело)"
    r"|ogłoszenie (?:jest )?nieaktywne|nie jest już dostępn|est[aá] reservad[oa]"
    r"|(?:je |byl[oa]? )?rezervovan[ýáéo]|^\W*rezervováno\W*$"
    # the product itself gone: "Este producto ya no está disponible" (PrestaShop), "non è più
    # disponibile", "não está mais disponível"
    r"|no (?:está|esta) disponible|non è (?:più )?disponibile|não (?:está )?(?:mais )?disponível"
    r"|^\W*(?:sold|verkauft|vendido|vendida|venduto|vendu|solgt|såld|myyty|prodáno|sprzedan[eya]"
    r"|продано|satıldı|נמכר|reserviert|reservado|reservada|gereserveerd|réservé|riservato"
    r"|zarezerwowan[eya])\W*$",
)
IN_STOCK_WORDS = re.compile(
    r"\bin[- ]stock\b|available now|available to (?:ship|order|buy)|available online"
    r"|ships (?:in|within|today)|auf lager|sofort lieferbar|lieferbar|en stock|disponible"
    r"|disponibile|em estoque|op voorraad|på lager|varastossa|na sklade|skladem"
    r"|в наличии|stokta|在庫あり|有現貨|現貨|în stoc|pe stoc|raktáron|készleten"
    r"|σε απόθεμα|na (?:zalihi|stanju)|є в наявності|в наявності|còn hàng|มีสินค้า|stok tersedia"
    r"|\bi lager\b|disponível|em stock|verfügbar\b|versandfertig|versandbereit|leverbaar\b"
    r"|disponibilità immediata|in magazzino|pronta consegna|na stanie|w magazynie|dostępn[aey]\b"
    r"|na skladě|skladom|hay existencias|en existencia|διαθέσιμο|tersedia|có sẵn|noliktavā"
    r"|sandėlyje|na zalogi|有货|现货|在庫有り|재고 ?있음|متوفر|متاح|במלאי|^\W*available\W*$"
    r"|only \d+ left|ready to ship"
    # a stock level for a count (Bitrix Aspro's "Много" / "Достаточно" / "Мало")
    r"|^\W*(?:много|достаточно|мало)\W*$",
)
_AUCTION_WORDS = re.compile(_AUCTION_ENDED)
_PREORDER_WORDS = re.compile(r"pre-?order|vorbestell|précommande|pre-?venta|prenota")
_BACKORDER_WORDS = re.compile(r"back-?order|made to order|auf bestellung|sur commande")
_WORDS: tuple[tuple[re.Pattern[str], Availability], ...] = (
    (SOLD_OUT_WORDS, "out_of_stock"),
    (_PREORDER_WORDS, "preorder"),
    (_BACKORDER_WORDS, "backorder"),
    (IN_STOCK_WORDS, "in_stock"),
)


def normalize_availability(value: object) -> Availability | None:
    """``http://schema.org/InStock``, ``"in stock"``, ``OutOfStock`` … → a state; None if empty."""
    if isinstance(value, list | tuple):
        value = next((v for v in value if isinstance(v, str) and v.strip()), None)
    if not isinstance(value, str):
        return None
    return _normalize(value)


@lru_cache(maxsize=1024)  # a handful of distinct strings, on every offer of every page
def _normalize(value: str) -> Availability | None:
    text = value.strip()
    if not text:
        return None
    if text in _RANK:  # already one of ours
        return text
    # "https://schema.org/InStock", "schema:InStock", "http://schema.org/ItemAvailability/InStock"
    tail = text.rstrip("/").rsplit("/", 1)[-1].rsplit(":", 1)[-1]
    state = _STATES.get(_NOISE.sub("", tail.lower()))
    return state or _from_words(text)


def _from_words(text: str) -> Availability:
    """A structured value written as shown words, or ``unknown``."""
    if len(text) > 200:
        return "unknown"  # a paragraph, not a state
    return shown_state(text) or "unknown"


def shown_state(text: str) -> Availability | None:
    """The state shown words say ("Nicht lieferbar", "Pre-order: ships in March", "Only 3
    left in stock"), sold-out words first; None when they say none."""
    lowered = text.lower()
    for words, state in _WORDS:
        if words.search(lowered):
            return state
    return None


def says_auction_ended(text: str) -> bool:
    """The text says an auction or a listing has ended (a sold-out word, ``SOLD_OUT_WORDS``)."""
    return _AUCTION_WORDS.search(text.lower()) is not None


def says_sold_out(text: str) -> bool:
    """The text holds a sold-out word."""
    return SOLD_OUT_WORDS.search(text.lower()) is not None


def best_availability(values: Iterable[Availability | None]) -> Availability | None:
    """The most available of several offers' states (``in_stock`` if any offer is)."""
    present = [v for v in values if v is not None]
    if not present:
        return None
    return min(present, key=_RANK.__getitem__)
