"""What the page shows a shopper: its title, the price in its buy box, its buy controls and
its stock state, read from the markup without structured data.

Two uses. On a page without structured data this is the product (the *visible* source), when
the layout is a product page's: one title, a price after it and a buy control that is not
inside a card linking elsewhere (see ``listing``). On every page it is the check on the
structured data: a sale price shown beside the structured (regular) price, and a sold-out
buy box where the structured data says InStock.

- **Title**: the one ``<h1>``; with several (recommendation rows use them too), the one that
  the page's ``<title>``/``og:title`` names (see ``_title``); when it names none of them
  (every card titled with an ``<h1>``), the ``<h2>`` it names, the prices read from there.
- **Price**: the first price-marked element (class/id "price", ``itemprop=price``) after the
  title that is not struck through or marked as the old/regular price and not in a
  recommendation container. A container's own text counts with its struck parts removed
  (``<s>49 890</s> <span>44 890 тг.</span>``), and a price split across elements is joined
  the way it is shown (``12<sup>99</sup>``, whole/decimal/fraction spans). Struck and old
  prices seen on the way are kept: a structured price shown as the old price means the
  displayed price is the sale price. Without any price-marked element after the title, the
  first amount near it that carries a currency (``unmarked``): it fills a gap but
  never overrides a structured price.
- **Buy controls**: add-to-cart markup (classes, ids, forms posting to a cart, inputs) or
  buttons and links whose words say buy (or bid, or contact the seller of a classified ad),
  in the languages of the shops we meet; a cart form and the buttons inside it are one.
  Those in recommendation rows are left out before the controls are counted: a page's
  "related" rows can carry dozens of add-to-cart buttons beside its one buy box.
- **Stock**: the first availability-marked elements' words (sold out / out of stock /
  unavailable, pre-order, backorder, in stock … in those languages; a store-pickup notice
  says nothing about buying online), or buy controls that all say sold out. A disabled
  button alone proves nothing: shops disable it until a size is chosen. A sold-out page may
  drop its buy button altogether: with no control outside recommendation rows, a sold-out
  notice outside cards stands in for the buy box.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from decimal import Decimal
from urllib.parse import urlsplit

from selectolax.lexbor import LexborHTMLParser, LexborNode

from schemas.messages import Availability
from services.parser.availability import says_auction_ended, says_sold_out, shown_state
from services.parser.identifiers import is_item_url
from services.parser.listing import cards_link_elsewhere, links_elsewhere, outermost
from services.parser.markup import Alternative, Markup, Query, class_and_id, marks_of
from services.parser.microdata import in_tile_container
from services.parser.prices import (
    amounts_in,
    currency_in_text,
    euro_as_point,
    format_price,
    parse_price,
    shared_symbol,
    shows_money,
)
from services.parser.unmarked import following, labelled_old, unmarked_amount
from shared.caching import short_key_cache

Fields = dict[str, str]

# Each alternative costs a walk of the tree; those whose words the page's markup lacks are left
# out (``markup``): a listing's page runs few of them. A word's test that misses scans the whole
# markup, so a word several alternatives share comes first ("add-to-", "buy").
_ADD_TO_CART = (b"add-to-", b"add-to-cart")
_ADD_TO_BASKET = (b"add-to-", b"add-to-basket")
_BUY = Query(
    Alternative('form[action*="cart" i] [type="submit"]', (b"form", b"action", b"type"),
                (b"cart", b"submit")),
    Alternative('form[action*="cart" i] button', (b"form", b"action", b"button"), (b"cart",)),
    Alternative('form[action*="basket" i] [type="submit"]', (b"form", b"action", b"type"),
                (b"basket", b"submit")),
    Alternative('form[action*="basket" i] button', (b"form", b"action", b"button"), (b"basket",)),
    Alternative('button[name="add-to-cart" i]', (b"button", b"name"), _ADD_TO_CART),
    Alternative('[class*="add-to-cart" i]', words=_ADD_TO_CART),
    Alternative('[class*="addtocart" i]', words=(b"addtocart",)),
    Alternative('[class*="add-to-basket" i]', words=_ADD_TO_BASKET),
    Alternative('[class*="add-to-bag" i]', words=(b"add-to-", b"add-to-bag")),
    Alternative('[id*="add-to-cart" i]', words=_ADD_TO_CART),
    Alternative('[id*="addtocart" i]', words=(b"addtocart",)),
    Alternative('[id*="add-to-basket" i]', words=_ADD_TO_BASKET),
    Alternative('[class*="add_to_cart" i]', words=(b"add", b"cart")),  # "_": &lowbar;
    Alternative('[id*="add_to_cart" i]', words=(b"add", b"cart")),  # PrestaShop 1.6's box
    Alternative('[data-action*="add-to-cart" i]', (b"data-action",), _ADD_TO_CART),
    Alternative('[class*="buy-button" i]', words=(b"buy", b"buy-button")),
    Alternative('[class*="buy-now" i]', words=(b"buy", b"buy-now")),
)  # fmt: skip
# Buttons by their tags, and elements styled as buttons.
_BUTTON_TAGS = (
    Alternative("button", (b"button",)),
    Alternative('input[type="submit"]', (b"input", b"type"), (b"submit",)),
    Alternative('input[type="button"]', (b"input", b"type"), (b"button",)),
    # osCommerce's and Zen Cart's buttons are images that say it in their alt text
    Alternative('input[type="image"]', (b"input", b"type"), (b"image",)),
)
_BTN_CLASS = Alternative('[class*="btn" i]', words=(b"btn",))
# A buy control known by its words, when its markup says nothing (hashed CSS-module classes).
_BUTTONS = Query(
    *_BUTTON_TAGS,
    Alternative('a[role="button"]', (b"role",), (b"button",)),
    _BTN_CLASS,
    Alternative('[class*="buy" i]', words=(b"buy",)),
    Alternative('[class*="cart" i]', words=(b"cart",)),
    Alternative('[href^="javascript:" i]:is([href*="buy" i], [href*="cart" i], '
                '[href*="basket" i])', (b"href",), (b"javascript",)),
    Alternative('[onclick*="buy" i]', (b"onclick",), (b"buy",)),
    Alternative('[onclick*="cart" i]', (b"onclick",), (b"cart",)),
    Alternative('[onclick*="basket" i]', (b"onclick",), (b"basket",)),
)  # fmt: skip
_LINK_BUTTONS = Query(Alternative('a[class*="button" i]', words=(b"button",)))
# Where a notify control is looked for on a page that sells (``_notify_instead``): buttons and
# links styled as buttons or alerts (Magento's "action alert"). Narrower than ``_BUTTONS``,
# whose class and script alternatives make each walk of a real page's ~10,000 elements cost
# twice as much (0.9 against 0.5 ms), and name no notify control we met.
_NOTIFY_CONTROLS = Query(
    *_BUTTON_TAGS,
    Alternative('[role="button"]', (b"role",), (b"button",)),
    _BTN_CLASS,
    *_LINK_BUTTONS.alternatives,
    Alternative('a[class*="alert" i]', words=(b"alert",)),
    Alternative('a[class*="notif" i]', words=(b"notif",)),
)
# A control that calls the shop's buy script (``javascript:buy_process(…)``, ``onclick=
# "addToCart(42)"``), whatever its words say: older shops' buy boxes are links like that.
_BUY_SCRIPT = re.compile(
    r"(?<!\w)(?:buy(?:_?(?:now|it|item|product|process))?|add_?(?:to_?)?(?:cart|basket|bag)"
    r"(?:_?item)?|cart_?add)\s*\(",
    re.I,
)
_BUY_WORDS = re.compile(
    r"add to (?:cart|basket|bag|trolley)|add to your (?:basket|bag|cart)|buy now|buy it now"
    r"|in den (?:warenkorb|einkaufswagen)|ajouter au panier|(?:añadir|agregar) al carr(?:ito|o)"
    r"|aggiungi al carrello|adicionar (?:ao|à) (?:carrinho|sacola)|in (?:de )?winkelwagen"
    r"|dodaj do koszyka|do košíka|do košíku|lägg i varukorg|læg i kurv|legg i handlekurv"
    r"|lisää ostoskoriin|sepete ekle|lisa ostukorvi|pievienot grozam|į krepšelį|в корзину"
    r"|adaug[aă] [iî]n co[sșş]|kosárba|προσθήκη στο καλάθι|dodaj u (?:košaricu|korpu)|v košarico"
    r"|добави в количката|(?:додати )?в кошик|הוסף? לסל|הוספה לסל|thêm vào giỏ"
    r"|[أا]ضف (?:[إا]لى )?(?:ال|لل)?(?:سلة|عربة|حقيبة)"
    r"|ใส่ตะกร้า|tambah(?:kan)? ke (?:keranjang|troli)|beli langsung|\+ ?keranjang"
    r"|añadir a la (?:cesta|bolsa)"
    r"|agregar a la bolsa|ielikt grozā|adicionar ao cesto|winkelmand|tilføj til kurv"
    r"|add to order|order now|jetzt bestellen|pedir ahora|ordina ora|^\s*do koszyka\s*$"
    # A pre-order is how a product not yet out is bought.
    r"|^\s*pre-?order(?: now)?\s*$|vorbestellen|précommander|προπαραγγελία|предзаказ|予約する"
    # An auction's bid and a classified ad's contact are how its item is bought.
    r"|place (?:a |your )?bid|submit bid|bid now|make (?:an )?offer|fai un['’]offerta"
    r"|gebot abgeben|faire une offre|hacer una oferta|chat with (?:the )?seller"
    r"|contact (?:the )?seller|message (?:the )?seller|verkäufer kontaktieren"
    r"|contactar (?:al |con el )?vendedor|contacter le vendeur|contatta (?:il )?venditore"
    r"|napisz do sprzedającego|написать продавцу"
    # classified ads' own words for it: write to the advertiser, show their phone, reply
    r"|nachricht schreiben|send (?:a )?message|envoyer un message|invia (?:un )?messaggio"
    r"|enviar mensaje|enviar mensagem|send melding|skicka meddelande|send besked"
    r"|lähetä viesti|napsat zprávu|napísať správu|napisz wiadomość|mesaj gönder|üzenet küldése"
    r"|написать сообщение|показать (?:телефон|номер)|показати телефон|show (?:phone )?number"
    r"|contact (?:the )?(?:advertiser|dealer|owner)|anbieter kontaktieren|contacter l['’]annonceur"
    r"|contatta l['’]inserzionista|enquire now|שלח הודעה|إرسال رسالة|أرسل رسالة"
    r"|^\s*(?:reply|chat|bericht|reageer|kontakt|contact|contacter|contactar|contattare"
    r"|nachricht|message|mensaje|mensagem|melding|viesti|zpráva|wiadomość)\s*$"
    r"|^\s*(?:kontaktieren|bieten|enchérir|pujar|licytuj|купить|купити|купи|comprar|kaufen"
    r"|acheter|acquista|kup(?:uję|ić| teraz)?|koupit"
    r"|kúpiť|köp|kjøp|osta|buy|cumpăr[aă]|vásárlás|αγορά|mua ngay|beli(?: sekarang)?|satın al"
    r"|(?:comprar|köp|acquista) (?:ahora|agora|nu|ora)|jetzt kaufen|acheter maintenant"
    r"|購買|購入する|立即購買|立即购买|구매하기|바로 ?구매|장바구니)\s*$"
    r"|カートに入れる|カートに追加|加入购物车|加入購物車|放入購物車|장바구니 담기",
)  # lower case: matched against ``_label`` (one regex over a lowered label, not case-blind)
# "Notify me when available" in the languages of the shops we meet (lower case, as _BUY_WORDS).
_NOTIFY_WORDS = re.compile(
    r"notify me|email me when|e-mail me when|let me know when|alert me when|back in stock alert"
    r"|benachrichtig|verfügbarkeit anfragen|m['’]avertir|m['’]alerter|prévenez-moi|avísame"
    r"|avisarme|avise-me|me avise|avvisami|powiadom|upozornit|értesítést kérek|informeer mij"
    r"|уведомить о поступлении|сообщить о поступлении|сообщить о наличии|повідомити про наявність"
    r"|入荷お知らせ|再入荷|到货通知|到貨通知|재입고 알림|עדכנו אותי|הודיעו לי|עדכן אותי"
)
_MAX_BUTTONS = 300
_MAX_CONTROLS = 40  # more add-to-cart controls outside recommendation rows: a grid
_PRICE_NODES = Query(
    Alternative("h1"),
    Alternative('[class*="price" i]', words=(b"price",)),
    Alternative('[id*="price" i]', words=(b"price",)),
    Alternative('[itemprop="price"]', values=((b"itemprop", b"price"),)),
)
# A page without <h1> may title its product in an element classed so (Coupang's
# prod-buy-header__title is an <h2>, VTEX's productName a <div>, Rakuten's item_name a <span>).
_NAME_NODES = Query(
    Alternative('[class*="product-name" i]', words=(b"product-name",)),
    Alternative('[class*="product-title" i]', words=(b"product-title",)),
    Alternative('[class*="productname" i]', words=(b"productname",)),
    Alternative('[class*="producttitle" i]', words=(b"producttitle",)),
    Alternative('[class*="product_name" i]', words=(b"product",)),  # "_": &lowbar;
    Alternative('[class*="product_title" i]', words=(b"product",)),
    Alternative('[class*="item-name" i]', words=(b"item-name",)),
    Alternative('[class*="item_name" i]', words=(b"item",)),
    Alternative('[class*="page-title" i]', words=(b"page-title",)),  # OpenCart's Journal theme
    Alternative('[class*="pageheading" i]', words=(b"pageheading",)),  # osCommerce 2.2's <td>
    Alternative('[class*="sku-name" i]', words=(b"sku-name",)),  # JD's
    Alternative('[class*="goods-name" i]', words=(b"goods-name",)),  # East Asian shops' "goods"
    Alternative('[class*="goods_name" i]', words=(b"goods",)),
)
_MAX_PRICE_NODES = 60  # price-marked elements looked at after the title
# Card prices passed over before the reading stops: each costs a climb and queries of the
# blocks above it, and a listing's grid would have them all asked (1.15 → 2.9 ms a bench
# listing page). A product page's own price comes before a row of others'.
_CARD_PRICES = 3
_AFTER_HEADING = 2000  # nodes after a lower-heading title looked at for its first price
_BUY_BOX_PRICES = 8  # current prices read after the main one (variants, bundles, instalments)
# Not after "with-"/"has-": the element has an old price beside it (Shopware's current price is
# ``product-detail-price with-list-price``), it is not that price.
# Old-price words that are no part of other words, marking an old price wherever they stand.
_OLD_ANYWHERE = r"strike|crossed|line-?through|(?<![a-z])lthr|rrp|msrp|uvp"
# "old", not in "bold", "sold" (Shopify's price--sold-out block) or "hold" (a placeholder)
_OLD_WORDS = (
    rf"(?<![bsh])old|was|compare|{_OLD_ANYWHERE}|list[-_]?price|(?<![a-z])mrp|origin|before|initial"
    r"|non-?sale"  # BigCommerce's price--non-sale, its "Was:" price
)
# "has" or "with" before a mark says the element has one beside it (VTEX's
# sellingPrice--hasListPrice), not that it is one.
_UNLESS_BESIDE = r"(?<!with)(?<!with[-_])(?<!has)(?<!has[-_])"
_OLD = re.compile(rf"{_UNLESS_BESIDE}(?:{_OLD_WORDS}|regular)", re.I)
# An old-price mark on a part of a price box that does not say "price" (x-kom's
# <div class="old">, Cdiscount's fpStriked): the words that are no part of other words, or
# the others as whole class words ("old", not "holder"; "regular", not "font-regular").
_OLD_PART = re.compile(
    rf"{_OLD_ANYWHERE}"
    r"|(?:^|\s)(?:old|was|before|regular|original|origin|initial|compare)(?:$|\s|[-_])"
    r"|[-_](?:old|was|before|original|origin|initial|compare)(?:$|\s)",
    re.I,
)
# The old-price words but "regular": a price marked only "regular", unstruck, with no
# other price beside it, is the price (the non-sale one), not an old one.
_OLD_BUT_REGULAR = re.compile(rf"{_UNLESS_BESIDE}(?:{_OLD_WORDS})", re.I)
_NOT_A_PRICE = re.compile(
    r"unit|per-|instal|monthly|credit|financ|shipping|delivery|bonus|points"
    r"|(?<!incl[-_])(?<!with)(?<!with[-_])tax"  # not BigCommerce's price--withTax
    r"|excl|deposit|filter|save|saving|discount|percent",
    re.I,
)
# A later buy-box price marked as the one that applies now: lower than the first, it is the
# sale price and the first the regular one. An offer's, not an "offers" block's: that lists
# coupon and bank prices (Myntra's "Best Price: Rs. 584" under its ₹649).
_SALE = re.compile(
    r"(?<!non)(?<!non-)sale|special|promo|offer(?!s)|now|current|final|reduced|deal", re.I
)
_SALE_AFTER = 3
_SALE_BOX = 4  # levels from a price up to the block it shares with the main price
# An amount saved, not paid: "(7,800원 할인)" after Cafe24's sale price, "Sie sparen 50,00 €"; an
# amount in parentheses is an aside to the price before it.
_SAVING = re.compile(
    r"^\s*\(.*\)\s*$|\bsave\b|you save|sparen|ersparnis|économisez|ahorr|risparmi|скидк|знижк"
    r"|oszczędzasz|할인(?!판매가|가)|割引|节省|節省",
    re.I,
)
_NOW = re.compile(
    r"(?<![^\W\d_])(?:now|jetzt|nur noch|ahora|maintenant|agora|adesso|nu|teraz|сейчас|por)"
    r"(?![^\W\d_])\s*:?\s*(?=\D{0,6}\d)",
    re.I,
)
_WORD = re.compile(r"[^\W_]{2,}")
_TITLE_PARTS = re.compile(r"\s+[|–—:-]\s+|\s*\|\s*")  # "Name | Shop", "Name - Shop"
_UNSHOWN = ("meta", "link", "input", "script", "style", "option", "select", "noscript", "template")
# A multi-buy offer beside the unit price: "2 for $7.00", "Buy 3 for £10", "3 für 5 €".
_MULTI_BUY = re.compile(
    r"(?:buy\s+|kaufe\s+)?(?<![\d.,])\d{1,2}\s+(?:for|für|pour|por|per|za|за)\s*\D{0,4}\d[\d.,]*",
    re.I,
)
# A price the page shows without its tax beside the one with it (Japanese shops' 税抜 and
# 税込, B2B shops' "excl. VAT"): the shopper pays the other one, when there is one.
_EXCL_TAX = re.compile(
    r"税抜|税別|本体価格|excl\.?\s*(?:vat|tax|mwst)|ex\.?\s*(?:vat|tax)|exkl\.?\s*mwst"
    r"|zzgl\.?\s*mwst|hors taxes|\bhtva?\b|без ндс|bez vat|netto",
    re.I,
)
_PERCENT = re.compile(r"[-−]?\d+(?:[.,]\d+)?\s*[%٪％]")  # Arabic and full-width signs too
# A quantity before the amount it buys: a price-break table's "1+" or "10 pcs", which would
# read as the price ("1+ £1.12 (£1.34 inc VAT)").
_QUANTITY = re.compile(
    r"(?<![\d.,])\d{1,6}\s*(?:\+|(?:pcs?|pieces?|items?|units?|stk|szt|st\.)(?![^\W\d_]))", re.I
)
_STRUCK_TAGS = ("del", "s", "strike")
_LINE_THROUGH = re.compile(r"line-through", re.I)
# Text for screen readers only: the usual utility classes (Bootstrap, WordPress, Tailwind,
# Amazon's a-offscreen). The shopper reads the price beside it.
_SCREEN_READER = re.compile(
    r"screen-?reader|(?:^|[\s_-])(?:sr-only|visually-?hidden|offscreen|blind)(?:$|[\s_-])", re.I
)
_DECIMALS = re.compile(r"[.,]\d{1,2}$")
_FRACTION = re.compile(r"fraction|decimal|cent", re.I)
_STOCK_NODES = Query(  # each alternative is a walk of the tree: few and broad
    Alternative('[class*="availability" i]', words=(b"availability",)),
    Alternative('[class*="stock" i]', words=(b"stock",)),
    Alternative('[id*="availability" i]', words=(b"availability",)),
    Alternative('[id*="stock" i]', words=(b"stock",)),
    Alternative('[class*="sold-out" i]', words=(b"sold-out",)),
    Alternative('[itemprop="availability"]', values=((b"itemprop", b"availability"),)),
)
# Asked only of a product layout with no buy control and no stock state from the above: the
# notice of a sold-out page whose button is gone (Zen Cart's button_sold_out, Newegg's and
# Dawn's inventory line). Each word's test reads the whole page when the word is absent
# (~0.12 M instructions on a bench page), so the other pages do not pay for them.
_MORE_STOCK_NODES = Query(
    Alternative('[class*="sold_out" i]', words=(b"sold",)),  # "_": &lowbar;
    Alternative('[class*="inventory" i]', words=(b"inventory",)),
)
_HIDDEN = re.compile(r"(?:^|[\s_-])(?:hidden|hide|d-none|invisible|is-hidden)(?:$|[\s_-])", re.I)
_HIDDEN_STYLE = re.compile(r"display\s*:\s*none|visibility\s*:\s*hidden", re.I)
_MAX_STOCK_NODES = 12
# A stock label, a colon and its value, a few tags between them (``<li>Availability: In
# Stock</li>``, ``<dt>Verfügbarkeit:</dt><dd>lieferbar</dd>``), in the lowered markup's bytes
# (UTF-8; non-ASCII capitals are not lowered, hence both spellings).
_STOCK_LABELS = (
    "availability", "stock status", "stock", "verfügbarkeit", "lieferstatus", "lieferbarkeit",
    "disponibilité", "disponibilidad", "disponibilidade", "disponibilità", "dostępność",
    "dostupnost", "beschikbaarheid", "tillgänglighet", "saatavuus", "наличие", "Наличие",
    "наявність", "Наявність", "stan magazynowy",
)  # fmt: skip
_STOCK_LABELLED = re.compile(
    rb">\s*(?:"
    + b"|".join(re.escape(label.encode()) for label in _STOCK_LABELS)
    + rb")\s*:\s*(?:<[^<>]{0,300}>\s*){0,4}([^<]{2,80})<"
)
_MAX_STOCK_LABELS = 4
# Bytes after the title read for a stock label: a buy box's facts follow its title closely,
# and the scan (a regex at every ">") costs ≈ 1 µs a KB, 5 ms on a 1 MB page read whole.
_STOCK_LABEL_WINDOW = 30_000
_MAX_CODE_PLACES = 20  # elements looked at for a labelled code's owner
_UNSHOWN_TEXT = ("script", "style", "noscript", "template", "title", "textarea")
_IN_STORE = re.compile(
    r"pick ?up|in stores?\b|nearby stores?|at (?:your|the) store|click (?:&|and) collect|abholung"
    r"|im markt|in der filiale|en magasin|retrait|en tienda|recogida|na loja|retirada|in negozio"
    r"|ritiro|w sklepie|odbiór|v predajni|na predajni|v prodejně|в магазине|самовывоз",
    re.I,
)


@dataclass(slots=True)
class Visible:
    """The facts one reading of the page's layout gives."""

    name: str | None = None
    price: Decimal | None = None
    currency: str | None = None
    old_prices: set[Decimal] = field(default_factory=set)
    shown_prices: set[Decimal] = field(default_factory=set)  # every current price near it
    title: LexborNode | None = None  # the element the name was read from
    # False when the price is an amount read near the title without price markup: it fills a
    # gap but never overrides a structured price.
    price_marked: bool = True
    symbol: str | None = None  # a symbol several currencies share ("$", "kr"), as shown
    buttons: list[LexborNode] = field(default_factory=list)  # buy controls outside cards
    stock: Availability | None = None
    stock_node: LexborNode | None = None  # the first element whose words said ``stock``
    # No buy control at all, yet one product's page: a sold-out notice outside cards, or a
    # marketplace item's URL (an ended auction, a sold ad): a buy box that is closed.
    closed_box: bool = False
    # Buy controls were found, every one in a card that links to another page: a listing's.
    carded: bool = False
    box_text: str = ""  # the text the price was read from (its box's, its old parts left out)
    # The page's stock element says in stock and one of its own buy controls is in use: what
    # a stale structured OutOfStock (a store's stock, a feed's lag) does not outweigh.
    sells: bool = False

    def shows(self, price: Decimal) -> bool:
        """The page shows ``price`` as a current price: read as one, or among the amounts of
        the main price's box (a structured price beside an old one that no mark tells apart:
        Darty's prix_barre, Teknosa's prc-first). The box's amounts are read on demand."""
        return price in self.shown_prices or price in amounts_in(self.box_text)

    def fields(self) -> Fields:
        out: Fields = {}
        if self.name:
            out["name"] = self.name
        if self.price is not None:
            out["price"] = format_price(self.price)
            if self.currency:
                out["currency"] = self.currency
        if self.stock:
            out["availability"] = self.stock
        return out

    @property
    def is_product_layout(self) -> bool:
        """A title, a price and a buy box of its own: a product page without markup. A page
        has one buy box ("add to cart" and "buy now"), perhaps a sticky copy of it and one
        more control after the description; a grid of cards has many. A sold-out product's
        buy box may show its notice instead of any control, and an ended auction none at
        all (``closed_box``)."""
        return bool(
            self.name
            and self.price is not None
            and (1 <= len(self.buttons) <= 6 or self.closed_box)
        )


def read_visible(
    tree: LexborHTMLParser,
    *,
    title_hint: str | None,
    markup: Markup | None = None,
    page_urls: set[str] | None = None,
    base: str | None = None,
) -> Visible:
    """Title, buy-box prices and stock words; the buy controls are looked for on demand
    (``find_buttons``): they cost several walks of the tree. ``markup``: the page's, when
    the caller has it (its queries then leave out what cannot match). ``page_urls`` (this
    page's URLs) and ``base``: with them, a price in a card that links to another page is
    not the page's (a related product's card outside any container named so)."""
    out = Visible()
    memo: dict[int, bool] = {}
    # One walk of the tree for the titles and the price elements: _PRICE_NODES holds every
    # h1, in document order.
    nodes = _PRICE_NODES.select(tree, markup)
    # An <h1> that is only an amount is the price set as a heading beside the title's
    # (osCommerce 2.3's <h1 style="float: right">$299.99</h1>), not a title; nor is a logo.
    h1s = [node for node in nodes if node.tag == "h1" and not _no_title(node, title_hint)]
    title = _title(h1s, title_hint)
    if title is None and len(h1s) != 1:
        # Cards of other products in <h1>s, none the page's, or no <h1> at all: its title is
        # then a lower heading, or an element classed as the product's name, that the page's
        # <title> names (Godomall's skins put the product's in an <h3>, the logo in the <h1>).
        title = _title(tree.css("h2, h3"), title_hint, must_name=True)
        if title is None and not h1s:
            title = _title(_NAME_NODES.select(tree, markup), title_hint, must_name=True)
    if title is not None:
        out.name = " ".join(title.text(deep=True, separator=" ").split()) or None
        out.title = title
        if len(h1s) > 1 and out.name and title_hint:
            out.name = _joined_name(h1s, title, out.name, title_hint)
    cards = (page_urls, base) if page_urls is not None and base is not None else None
    first_card = _read_prices(nodes, title, out, memo, cards)
    if out.price is None and title is not None:
        _unmarked_price(title, out, first_card)
    places = (cards[0], cards[1], out.title) if cards is not None else None
    out.stock, out.stock_node = _stock_of(_STOCK_NODES, tree, memo, markup, places)
    return out


def find_buttons(
    tree: LexborHTMLParser,
    shown: Visible,
    page_urls: set[str],
    base: str,
    markup: Markup | None = None,
) -> None:
    """The buy controls a product layout needs: outside recommendation rows, and not all in
    cards that link elsewhere (a listing), unless the page's URL is a marketplace item's
    (``/itm/<id>``, ``/item/…-<id>``): there the bid or contact box sits beside the seller's
    avatar and the gallery, which look like a card, and no listing has such a URL; there an
    ended auction's or a sold ad's page, which shows no control at all, is still the item's."""
    memo: dict[int, bool] = {}

    def here(nodes: list[LexborNode]) -> list[LexborNode]:
        """The controls that buy here: one that links to another page leads to a product."""
        return [c for c in nodes if not links_elsewhere(c, page_urls, base)]

    # A recommendation row's cards carry add-to-cart buttons of their own (dozens on a
    # furniture shop's page): they are no part of the buy box, and no grid of the page's own.
    every = here(_marked_controls(tree, markup))
    controls = [c for c in every if not in_tile_container(c, memo)]
    if not controls:
        # None marked, or every marked one a recommendation card's (IKEA's rows mark theirs,
        # its buy box does not): the page's own may be known by its words.
        every = here(_worded_controls(tree, markup))
        controls = [c for c in every if not in_tile_container(c, memo)]
    item = any(is_item_url(u) for u in (*page_urls, base))
    # A cart form, its button and the button's label are one control (counted once; the card
    # check climbs from each, the innermost first).
    own = outermost(controls)
    carded = bool(controls) and not item
    if carded:
        carded = cards_link_elsewhere(controls, page_urls, base, every=every, title=shown.title)
        carded = carded or _grid_of_cells(own)
    shown.carded = carded
    if controls and len(controls) <= _MAX_CONTROLS and not carded:
        shown.buttons = own
    elif not controls and item:
        shown.closed_box = True  # the auction has ended, the ad is sold: still the item's page
    elif not controls or carded:
        # No control of the page's own: none at all, or only those of a row of other
        # products' cards (Aspro's "bought with this" row under a sold-out product).
        if shown.stock is None:
            places = (page_urls, base, shown.title)
            shown.stock, shown.stock_node = _stock_of(_MORE_STOCK_NODES, tree, memo, markup, places)
        if shown.stock is None:
            shown.stock_node = _notify_control(tree, markup, memo)
            shown.stock = "out_of_stock" if shown.stock_node is not None else None
        if shown.stock == "out_of_stock" and shown.stock_node is not None:
            # Sold out, the buy button gone: the notice stands in for it, unless it sits in
            # a card that links elsewhere (a grid of sold-out items).
            notice = [shown.stock_node]
            shown.closed_box = not cards_link_elsewhere(notice, page_urls, base, title=shown.title)
    if shown.stock is None and shown.buttons and all(_sold_out(b) for b in shown.buttons):
        shown.stock = "out_of_stock"


_CELL_CLIMB = 4
_CELL_HEADING = "h2, h3, h4, h5, h6"


def _grid_of_cells(controls: list[LexborNode]) -> bool:
    """Two or more buy controls, each the only one of a cell that names its product in a
    heading, the cells side by side under one parent: a listing's grid whose cells open the
    product in place, with no link to climb by (Mercadona's product-cell buttons)."""
    if len(controls) < 2 or len(controls) > _MAX_CONTROLS:
        return False
    ids = {c.mem_id for c in controls}
    parents: set[int] = set()
    for control in controls:
        cell = _cell(control, ids)
        if cell is None or cell.parent is None:
            return False
        parents.add(cell.parent.mem_id)
        if len(parents) > 1:
            return False
    return True


def _cell(control: LexborNode, ids: set[int]) -> LexborNode | None:
    """The lowest block above ``control`` that holds a heading, if it holds no other control."""
    block = control.parent
    for _ in range(_CELL_CLIMB):
        if block is None or block.tag in ("body", "main", "html"):
            return None
        if block.css_first(_CELL_HEADING) is not None:
            held = sum(1 for node in block.traverse() if node.mem_id in ids)
            return block if held == 1 else None
        block = block.parent
    return None


# --- title ---------------------------------------------------------------------------------


def _title(
    titles: list[LexborNode], hint: str | None, *, must_name: bool = False
) -> LexborNode | None:
    """The page's title among its ``h1`` elements (in document order): with several, the one
    the page's ``<title>``/``og:title`` names. Named means held in it; of several held, the
    longest when it holds the others ("Tommy Jeans OFLEKI" and "OFLEKI"); none held, the one
    that starts with the title's first part ("SEOUL 100 ML Details" for "SEOUL 100 ML |
    ZARA"). ``must_name``: even one candidate must be named."""
    if len(titles) <= 1 and not (must_name and titles):
        return titles[0] if titles else None
    texts = [" ".join(t.text(deep=True, separator=" ").split()).casefold() for t in titles]
    if len(set(texts)) == 1 and not must_name:
        return titles[0]
    if not hint:
        return None
    wanted = " ".join(hint.split()).casefold()
    named = {text: i for i, text in reversed(list(enumerate(texts))) if text and text in wanted}
    if named:
        longest = max(named, key=len)
        if all(t in longest for t in named):
            return titles[named[longest]]
        # Two headings that the title names together: a brand's and the product's (Myntra's
        # "Roadster" and "Men Blue Slim Fit Jeans"); the title is read from the first.
        first = min(named.values())
        pair = texts[first : first + 2]
        return titles[first] if len(named) == 2 and " ".join(pair) in wanted else None
    head = _TITLE_PARTS.split(wanted, maxsplit=1)[0].strip()
    if len(head) < 8:
        return None
    starting = {i for i, text in enumerate(texts) if text.startswith(head)}
    if len(starting) == 1:
        return titles[starting.pop()]
    if must_name:
        # A lower heading that says the title's words in its own way ("Kettenblatt 34 Zähne
        # BCD 104 schmal-breit" for "Kettenblatt 34Z BCD 104 - Shop"): the one that holds
        # half the words of the title's first part or more, at least two.
        head_words = set(_WORD.findall(head))
        sharing = [
            i
            for i, text in enumerate(texts)
            if len(shared := set(_WORD.findall(text)) & head_words) >= 2
            and 2 * len(shared) >= len(head_words)
        ]
        return titles[sharing[0]] if len(sharing) == 1 else None
    return None


def _no_title(node: LexborNode, title_hint: str | None) -> bool:
    """An ``<h1>`` that titles nothing: only an amount, no words at all (a shop's logo image,
    MakeShop's ``<h1 class="logo">``, before a sidebar of other products' prices), or the
    shop's name as a link: to its home page (EC-CUBE's header, its product's name an h2), or
    anywhere when the page's title ends with it (a marketplace store's header, "Grinder DR-G40
    : dailyroast", whose store page is a path of the marketplace)."""
    text = node.text(deep=True, separator=" ").strip()
    if not text or (len(text) < 30 and shows_money(text)):
        return True
    link = node.css_first("a[href]")
    if link is None or link.text(deep=True, separator=" ").strip() != text:
        return False
    if urlsplit(link.attributes.get("href") or "").path in ("", "/"):
        return True
    parts = _TITLE_PARTS.split(title_hint.strip()) if title_hint else []
    return len(parts) > 1 and parts[-1].casefold() == text.casefold()


def _joined_name(h1s: list[LexborNode], title: LexborNode, name: str, hint: str) -> str:
    """The name when the title's heading and the next one are named together (brand, then
    product), else the title's own."""
    at = next((i for i, h in enumerate(h1s) if h.mem_id == title.mem_id), len(h1s))
    if at + 1 >= len(h1s):
        return name
    joined = name + " " + " ".join(h1s[at + 1].text(deep=True, separator=" ").split())
    return joined if joined.casefold() in " ".join(hint.split()).casefold() else name


# --- price ---------------------------------------------------------------------------------


def _read_prices(
    nodes: list[LexborNode],
    title: LexborNode | None,
    out: Visible,
    memo: dict[int, bool],
    cards: tuple[set[str], str] | None = None,
) -> LexborNode | None:
    """The prices of ``nodes`` (the page's ``_PRICE_NODES``) from the title on. ``cards``:
    the page's URLs and base, to leave out the prices of cards that link elsewhere until
    the main price is found (OpenCart's "Related Products" are a row of cards under a
    heading, in no container that says so). Returns the first price passed over as a card's or
    a recommendation row's: where a reading of unmarked amounts stops."""
    start = 0
    if title is not None and title.tag == "h1":
        start = next((i + 1 for i, n in enumerate(nodes) if n.mem_id == title.mem_id), 0)
    elif title is not None:  # a lower heading: the price elements from the first after it
        at = {n.mem_id: i for i, n in enumerate(nodes)}
        later = (at[n.mem_id] for n in following(title, _AFTER_HEADING) if n.mem_id in at)
        start = next(later, len(nodes))
    after = 0  # price elements read after the main price: the rest of the buy box
    first_card: LexborNode | None = None  # the first price element of another's card
    carded = 0
    regular: tuple[Decimal, str] | None = None  # the first price marked only "regular"
    olds: set[int] = set()  # the old prices' elements
    untaxed: tuple[Decimal, str] | None = None  # the first price shown without its tax
    box: set[int] = set()  # the main price's element and the blocks around it
    for node in nodes[start : start + _MAX_PRICE_NODES]:
        tag = node.tag  # a property that decodes the name on every read
        if tag == "h1" or tag in _UNSHOWN:
            continue
        marks = class_and_id(node)
        marked_old, not_a_price = _price_marks(marks)
        if not_a_price and not marked_old:
            continue
        if in_tile_container(node, memo):
            if out.price is not None:
                break  # the buy box is behind: recommendations follow
            first_card = first_card or node  # where a reading of unmarked amounts stops
            continue
        if (
            out.price is None
            and cards is not None
            and cards_link_elsewhere([node], cards[0], cards[1], title=title, row=True)
        ):
            first_card = first_card or node
            carded += 1
            if carded >= _CARD_PRICES:
                break  # a listing's grid or a row before any price of the page's own
            continue
        if marked_old or _struck(node) or _inside(node, olds):
            olds.add(node.mem_id)  # its price elements are old too (EC-CUBE's price01 in
            # its priceRegular block)
            text = _content(node) or node.text(deep=True, separator=" ")
            old = parse_price(text)
            if old is not None and old > 0:
                out.old_prices.add(old)
                if regular is None and _OLD_BUT_REGULAR.search(marks) is None and not _struck(node):
                    regular = old, text
            continue
        price, text = _shown_price(node)
        if price is None or price <= 0:
            continue
        if labelled_old(text) and _NOW.search(text) is None:
            out.old_prices.add(price)  # "MRP Rs. 1,599" in an element marked only "price"
            continue
        if out.price is None and _EXCL_TAX.search(text) is not None:
            untaxed = untaxed or (price, text)  # the price, if no taxed one follows
            continue
        out.shown_prices.add(price)
        if out.price is None:
            out.box_text = text
            out.price, out.currency = price, currency_in_text(text)
            out.symbol = shared_symbol(text)
            box = {block.mem_id for block in _lineage(node, _SALE_BOX)}
        else:
            after += 1
            if (
                after <= _SALE_AFTER
                and price < out.price
                and _SALE.search(marks)
                # in the main price's box: osCommerce's sidebar of specials follows its buy box
                and any(block.mem_id in box for block in _lineage(node, _SALE_BOX))
                and not (
                    # a related card's "current price" (Nike's product-card below the buy box)
                    cards is not None
                    and cards_link_elsewhere([node], cards[0], cards[1], title=title, row=True)
                )
            ):
                _sale(out, price, text)
            if after >= _BUY_BOX_PRICES:
                break
    if out.price is None and untaxed is not None:
        regular = regular or untaxed  # only a price without tax: it is the price
    if out.price is None and regular is not None:
        # "regular" with no sale price beside it is the price (Otto's p_price__regular)
        out.price, out.currency = regular[0], currency_in_text(regular[1])
        out.symbol = shared_symbol(regular[1])
        out.shown_prices.add(regular[0])
        out.old_prices.discard(regular[0])
    return first_card


@short_key_cache(4096)  # a site's price elements carry a few dozen distinct classes
def _price_marks(marks: str) -> tuple[bool, bool]:
    """Whether an element's class and id mark an old price, and whether they mark no price."""
    return _OLD.search(marks) is not None, _NOT_A_PRICE.search(marks) is not None


def _sale(out: Visible, price: Decimal, text: str) -> None:
    """A lower buy-box price marked as the sale one ("€59.99 <span class=price--sale>€49.99
    </span>"): the price, the first one the regular. It must carry a currency: "29" beside
    "%" is a discount rate."""
    currency, symbol = currency_in_text(text), shared_symbol(text)
    if (currency or symbol) and not _SAVING.search(text):
        if out.price is not None:
            out.old_prices.add(out.price)
        out.price = price
        out.currency, out.symbol = currency or out.currency, symbol or out.symbol


def _unmarked_price(title: LexborNode, out: Visible, stop: LexborNode | None = None) -> None:
    """``stop``: the first price element of another product's card; the amount is looked for
    before it (a listing's grid, a related row: their amounts are the cards'). Amounts
    labelled as the old price on the way ("MRP: ₹649") are old prices."""
    olds: list[str] = []
    stop_id = stop.mem_id if stop is not None else None
    shown = unmarked_amount(title, _not_shown_price, stop_id, olds)
    for old in olds:
        amount = parse_price(old)
        if amount is not None and amount > 0:
            out.old_prices.add(amount)
    price = parse_price(shown) if shown else None
    if shown and price is not None:
        out.price, out.currency, out.price_marked = price, currency_in_text(shown), False
        out.symbol = shared_symbol(shown)
        out.shown_prices.add(price)


def _not_shown_price(node: LexborNode) -> bool:
    """An element whose text is no current price: struck, old, or not shown at all."""
    attrs = node.attributes
    marks = marks_of(attrs)
    return (
        node.tag in _STRUCK_TAGS
        or node.tag in _UNSHOWN
        or _price_marks(marks)[0]
        or _unseen_part(marks, attrs.get("style"))
    )


def _content(node: LexborNode) -> str | None:
    content = node.attributes.get("content")
    return content if content and parse_price(content) is not None else None


def _shown_price(node: LexborNode) -> tuple[Decimal | None, str]:
    """The price an element shows, its struck and old parts left out, and its text."""
    content = _content(node)
    text = _PERCENT.sub(" ", _own_text(node))
    if " " in text:
        text = _MULTI_BUY.sub(" ", text)  # "2 for $7.00 $4.49 each": the unit price
        text = _QUANTITY.sub(" ", text)
    if content is not None:
        return parse_price(content), text
    if text and text[-1].isdigit() and not _DECIMALS.search(text):
        text += _cents_after(node)
    now = _NOW.search(text) if len(text) < 80 else None
    if now is not None:  # "Was €59.99 Now €49.99": the price after "now" is paid
        after = parse_price(text[now.end() :])
        if after is not None and after > 0:
            return after, text
    return parse_price(text), text


_DIGIT_OR_EURO = "0123456789€"
_CENTS = re.compile(r"[.,]\d{2}(?!\d)")


def _cents_after(node: LexborNode) -> str:
    """The cents a whole number's price element leaves to its next sibling (PcComponentes'
    <span class="baseprice">399</span><span class="cents">,99€</span>), or ""."""
    sibling = node.next
    while (
        sibling is not None and sibling.tag == "-text" and not (sibling.text_content or "").strip()
    ):
        sibling = sibling.next  # the blanks between two elements
    if sibling is None or sibling.tag in _UNSHOWN:
        return ""
    text = (sibling.text_content if sibling.tag == "-text" else sibling.text(deep=True)) or ""
    text = text.strip()
    if _CENTS.match(text):
        return text
    if len(text) == 2 and text.isdigit() and _is_fraction(sibling):
        return "." + text
    return ""


def _own_text(node: LexborNode) -> str:
    skipped: set[int] = set()
    pieces: list[str] = []
    for sub in node.traverse(include_text=True):
        if sub.mem_id == node.mem_id:
            continue
        parent = sub.parent
        if parent is not None and parent.mem_id in skipped:
            skipped.add(sub.mem_id)
            continue
        if sub.tag == "-text":
            piece = (sub.text_content or "").strip()
            if piece:
                fraction = parent is not None and _is_fraction(parent)
                _join(pieces, piece, fraction)
            continue
        tag = sub.tag
        attrs = sub.attributes
        marks = marks_of(attrs)
        # Marked only "regular", and not struck through, it is the price the container shows
        # (Vue Storefront's sf-price__regular, Dawn's price__regular): a regular price that a
        # sale price replaces is struck (Dawn's <s class="price-item--regular">) or marked old.
        old = _price_marks(marks)[0] and _OLD_BUT_REGULAR.search(marks) is not None
        struck = tag in _STRUCK_TAGS or (
            old and ("price" in marks.lower() or _OLD_PART.search(marks) is not None)
        )
        if (
            struck
            or (not old and _is_aside(marks))
            or tag in ("script", "style")
            or _unseen_part(marks, attrs.get("style"))
        ):
            skipped.add(sub.mem_id)
    return " ".join(pieces)


# A part of a price box marked as another amount than the price: an instalment, a financing
# offer, a saving, a shipping fee (Otto's "Finanzierung ab 15,93 € mtl." inside its price
# box, read as the price once the regular price beside it counted as old). Narrower than
# _NOT_A_PRICE: "unit" marks the main price on some shops (Yodobashi's js_scl_unitPrice).
_ASIDE = re.compile(r"instal|monthly|financ|credit|sav(?:e|ing)|deposit|shipping|delivery", re.I)


@short_key_cache(4096)
def _is_aside(marks: str) -> bool:
    return bool(marks) and _ASIDE.search(marks) is not None


def _unseen_part(marks: str, style: str | None) -> bool:
    """A part of a price element the shopper does not read as its price: struck by its inline
    style (``text-decoration: line-through``, as a ``<del>`` would be), or text for screen
    readers only (WooCommerce's "Original price was: $45.00." beside the struck price)."""
    if style and _LINE_THROUGH.search(style):
        return True
    return _screen_reader_only(marks)


# Keyed by class and id only: a page's inline styles are unique per element (page builders),
# and a hostile one's as long as the page, so they are not kept in a cache.
@short_key_cache(4096)
def _screen_reader_only(marks: str) -> bool:
    return bool(marks.strip()) and _SCREEN_READER.search(marks) is not None


def _join(pieces: list[str], piece: str, fraction: bool) -> None:
    """Glue a split price back: "12" + "." + "99", "12" + <sup>99</sup> or "$229" +
    <span>99</span> (two digits in an element of their own after a whole number) → "12.99".
    A whole number grouped with dots ("29.999" + <span>90</span>, Mercado Libre's) takes a
    decimal comma, so that the grouping is not read as the decimal point. French shops put
    the symbol where the point would be: "279" + <sup>€99</sup> or "279€" + <sup>99</sup>
    → "279€99"."""
    if (
        pieces
        and fraction
        and pieces[-1][-1] in _DIGIT_OR_EURO
        and euro_as_point(pieces[-1] + piece)
    ):
        pieces[-1] += piece  # "279€99" (or "279€" + <sup>99</sup>): the reader's 279.99
        return
    if pieces and piece == "€" and pieces[-1][-1].isdigit():
        pieces[-1] += piece  # "499" + <span>€<sup>99</sup></span>: the point's place
        return
    if pieces:
        last = pieces[-1]
        cents = len(piece) == 2 and piece.isdigit() and not _DECIMALS.search(last)
        if last[-1].isdigit() and (piece[0] in ".," or ((fraction or cents) and piece.isdigit())):
            point = "," if "." in last else "."
            pieces[-1] = last + ("" if piece[0] in ".," else point) + piece
            return
        if last[-1] in ".," and piece[0].isdigit() and last[:-1][-1:].isdigit():
            pieces[-1] = last + piece
            return
    pieces.append(piece)


def _is_fraction(node: LexborNode) -> bool:
    if node.tag == "sup":
        return True
    marks = node.attributes.get("class") or ""
    return bool(marks) and _FRACTION.search(marks) is not None


def _lineage(node: LexborNode | None, levels: int = 3) -> Iterator[LexborNode]:
    """``node`` and its parents, ``levels`` elements in all at most."""
    for _ in range(levels):
        if node is None:
            return
        yield node
        node = node.parent


def _inside(node: LexborNode, ids: set[int]) -> bool:
    """``node`` sits in one of the elements ``ids`` (at most three levels up)."""
    return bool(ids) and any(parent.mem_id in ids for parent in _lineage(node.parent))


def _struck(node: LexborNode) -> bool:
    """Struck through by its tag (``<del>``, ``<s>``) or inline style, or inside such an
    element (three levels up)."""
    for element in _lineage(node):
        if element.tag in _STRUCK_TAGS:
            return True
        style = element.attributes.get("style")
        if style and _LINE_THROUGH.search(style):
            return True
    return False


# --- buy controls and stock ----------------------------------------------------------------


def buy_controls(tree: LexborHTMLParser, markup: Markup | None = None) -> list[LexborNode]:
    """The page's add-to-cart controls: by markup, else by their words. ``markup``: the
    page's, when the caller has it."""
    return _marked_controls(tree, markup) or _worded_controls(tree, markup)


def _marked_controls(tree: LexborHTMLParser, markup: Markup | None) -> list[LexborNode]:
    marked = {node.mem_id: node for node in _BUY.select(tree, markup)}  # one can match twice
    return list(marked.values())


def _worded_controls(tree: LexborHTMLParser, markup: Markup | None) -> list[LexborNode]:
    # Links styled as buttons only when no button says buy (Prom's <a class="b-button">):
    # some pages carry hundreds of them, which would push the buy box past _MAX_BUTTONS.
    return _worded(_BUTTONS, tree, markup) or _worded(_LINK_BUTTONS, tree, markup)


def _worded(query: Query, tree: LexborHTMLParser, markup: Markup | None) -> list[LexborNode]:
    worded = []
    seen: set[int] = set()
    for node in query.select(tree, markup)[:_MAX_BUTTONS]:
        if node.mem_id in seen:
            continue  # one element can match two of the selectors ("buyBtn": buy and btn)
        seen.add(node.mem_id)
        words = _control_words(node)
        if (
            (len(words) < 60 and _BUY_WORDS.search(words))
            or _calls_buy_script(node)
            or (words in _ADD_WORDS and _beside_quantity(node))
        ):
            worded.append(node)
    return outermost(worded)


# A grocer's buy button says only "Add", beside the quantity to add (Tesco's, Ocado's,
# Carrefour's "Ajouter"): alone, the word adds reviews, addresses and wish-list entries.
_ADD_WORDS = frozenset(
    ("add", "ajouter", "añadir", "agregar", "aggiungi", "hinzufügen", "toevoegen", "dodaj",
     "lägg till", "adicionar", "lisää", "ekle", "добавить")
)  # fmt: skip
_QUANTITY_INPUT = (
    'input[type="number"], input[name*="qty" i], input[name*="quantity" i], '
    'input[id*="qty" i], input[id*="quantity" i]'
)


def _beside_quantity(node: LexborNode) -> bool:
    """A quantity field in the control's block (its parent or grandparent)."""
    return any(block.css_first(_QUANTITY_INPUT) is not None for block in _lineage(node.parent, 2))


def _notify_control(
    tree: LexborHTMLParser,
    markup: Markup | None,
    memo: dict[int, bool],
    *,
    shown: bool = False,
    query: Query = _BUTTONS,
) -> LexborNode | None:
    """A control that offers to tell the shopper when the product is back, outside
    recommendation rows: what a sold-out page shows where its buy button was. ``shown``:
    only one that is not hidden."""
    for node in query.select(tree, markup)[:_MAX_BUTTONS]:
        words = _control_words(node)
        if (
            len(words) < 60
            and _NOTIFY_WORDS.search(words)
            and not in_tile_container(node, memo)
            and not (shown and _hidden(node))
        ):
            return node
    return None


def _calls_buy_script(node: LexborNode) -> bool:
    attrs = node.attributes
    href = attrs.get("href") or ""
    script = href[11:] if href[:11].lower() == "javascript:" else ""
    return any(_BUY_SCRIPT.search(code) for code in (script, attrs.get("onclick") or "") if code)


def _stock_of(
    query: Query,
    tree: LexborHTMLParser,
    memo: dict[int, bool],
    markup: Markup | None,
    cards: tuple[set[str], str, LexborNode | None] | None = None,
) -> tuple[Availability | None, LexborNode | None]:
    """What the first availability elements (``query``'s) say, and the first of them that
    says it; nothing when they disagree (a page carries the messages of every state and
    shows one of them by script). ``cards``: the page's URLs, its base and its title, to
    leave out the states of other products' cards when the states disagree."""
    said = _stock_states(query.select(tree, markup)[:_MAX_STOCK_NODES], memo)
    states = {state for _, state in said}
    if len(states) > 1 and cards is not None:
        # A row of cards, each with its own state, in no container named so (Aspro's "bought
        # with this" row under a sold-out product): the states of cards that link to other
        # pages are theirs (a climb each, asked only when the states disagree).
        page_urls, base, title = cards
        said = [
            (node, state)
            for node, state in said
            if not cards_link_elsewhere([node], page_urls, base, title=title, row=True)
        ]
        states = {state for _, state in said}
    return (states.pop(), said[0][0]) if len(states) == 1 else (None, None)


def _stock_states(
    nodes: list[LexborNode], memo: dict[int, bool]
) -> list[tuple[LexborNode, Availability]]:
    """What ``nodes`` say, each that says something."""
    said: list[tuple[LexborNode, Availability]] = []
    seen: set[int] = set()  # an element that matches two of the selectors comes twice
    for node in nodes:
        if node.mem_id in seen or (tag := node.tag) in _UNSHOWN or tag in ("body", "html", "link"):
            continue
        seen.add(node.mem_id)
        state = _stock_words(node.text(deep=True, separator=" "))
        if state == "out_of_stock":
            if _badge_off(node) or _in_picker(node):
                continue
            # said by the shown part? (a price block holds Dawn's unshown sold-out badge)
            state = _stock_words(_shown_words(node))
        if state is not None and not _hidden(node) and not in_tile_container(node, memo):
            said.append((node, state))
    return said


# A BEM element's sold-out modifier (Shopify's price__badge--sold-out, Dawn's
# price__badge-sold-out): the template renders the badge always, and its stylesheet shows it
# only inside a block that carries the state (price--sold-out).
# An element named for the state (Ecwid's details-product-purchase__sold-out) is no badge.
_BEM_SOLD_OUT = re.compile(
    r"(?:^|\s)([a-z0-9-]+)__(?:[a-z0-9-]*--|[a-z0-9]*badge-)sold-?out(?:\s|$)", re.I
)
_BLOCK_CLIMB = 6


# A picker of sizes, colours or other variants: a sold-out size says nothing of the others.
# An option's own item too (Gmarket's link__option--soldout, PChome's specItem), not a block
# of a product's options (Magento's product-options-wrapper holds the buy box), nor a
# button's size (Lazada's pdp-button_size_xl, Bootstrap's btn-size-lg).
_PICKER = re.compile(
    r"picker|swatch|size(?![-_]{1,2}(?:x*[sml]|lg|md|sm|small|medium|large|big|\d)(?![^\W_]))"
    r"|variant|dimension|spec-?item|option(?:$|\s|--|__|-?item|-?value)",
    re.I,
)


def _in_picker(node: LexborNode) -> bool:
    """``node`` or one of its two parents is classed as a variant picker or one of its items
    (H&M's size list, whose sold-out sizes are disabled buttons saying so)."""
    for element in _lineage(node):
        classes = element.attributes.get("class")
        if classes and _PICKER.search(classes):
            return True
    return False


def _badge_off(node: LexborNode) -> bool:
    """``node`` is a block's sold-out badge, and the block around it does not say sold out:
    the stylesheet hides it (in stock, the badge is there all the same)."""
    found = _BEM_SOLD_OUT.search(node.attributes.get("class") or "")
    if found is None:
        return False
    block = found.group(1).lower()
    parent = node.parent
    for _ in range(_BLOCK_CLIMB):
        if parent is None:
            return False
        classes = (parent.attributes.get("class") or "").lower().split()
        if block in classes:
            return not any(c.startswith(block + "-") and "sold" in c for c in classes)
        parent = parent.parent
    return False


@short_key_cache(4096)  # a site says its few stock messages on every page
def _stock_words(text: str) -> Availability | None:
    """The state a stock element's text says, if it says one about buying online."""
    if not text or len(text) > 300 or _IN_STORE.search(text):
        return None  # a shop's stock for pickup says nothing about buying online
    state = shown_state(text)
    if state == "in_stock" and _NOTIFY_WORDS.search(text.lower()):
        # "Notify me when in stock" is not "in stock": a template's control, often hidden
        # by script (mobly's "Avise-me quando chegar" on in-stock pages), says no state
        return None
    return state


def read_disabled_sold_out(
    tree: LexborHTMLParser, shown: Visible, page_urls: set[str], base: str, markup: Markup
) -> None:
    """``shown.stock`` out of stock when a disabled button says sold out outside
    recommendation rows and cards (Shopify's 'Sold Out' add-to-cart under a stale JSON-LD
    InStock). Asked only of a structured product in stock whose page marked no state: one
    walk, and only on a page whose markup writes ``disabled``."""
    if shown.stock is not None:
        return
    memo: dict[int, bool] = {}
    for node in _DISABLED.select(tree, markup)[:_MAX_CONTROLS]:
        if (
            _sold_out(node)
            and not _in_picker(node)
            and not in_tile_container(node, memo)
            and not cards_link_elsewhere([node], page_urls, base, title=shown.title)
        ):
            shown.stock, shown.stock_node = "out_of_stock", node
            return


_DISABLED = Query(
    Alternative("button[disabled]", (b"button", b"disabled")),
    Alternative("input[disabled]", (b"input", b"disabled")),
)


# Where a buy box that is closed says why (an ad sold, reserved or expired, a product
# withdrawn): elements named for the ad's state, which the stock query does not ask for
# (Gumtree's vip-expired-banner, Avito's item-closed-warning, Subito's sold-banner, Vinted's
# item-status--reserved, OLX's css-inactive, Target's data-test="outOfStockMessage"). Each
# word's test reads the page when the word is absent (~10 µs on 45 KB): ARIA's role="status"
# and role="alert", which most of those notices carry, cost 36 µs to tell apart from the
# page's other roles and add no notice the names miss, so they are not asked.
_NOTICE_NODES = Query(
    Alternative('[class*="closed" i]', words=(b"closed",)),
    Alternative('[class*="expired" i]', words=(b"expired",)),
    Alternative('[class*="inactive" i]', words=(b"inactive",)),
    Alternative('[class*="reserved" i]', words=(b"reserved",)),
    Alternative('[class*="sold" i]', words=(b"sold",)),
    Alternative('[class*="status" i]', words=(b"status",)),
    Alternative('[data-test*="stock" i]', (b"data-test",), (b"stock",)),
    Alternative('[data-testid*="stock" i]', (b"data-test", b"data-testid"), (b"stock",)),
    Alternative('[data-test-id*="stock" i]', (b"data-test", b"data-test-id"), (b"stock",)),
)
_MAX_NOTICES = 12
# What a page whose buy button is out of use writes somewhere (a hidden one is disabled too,
# in the templates we met): without it (most pages) the buy controls are not looked for (a
# walk of the tree, ~0.1 ms on a 45 KB page).
_UNSELLABLE = b"disabled"  # the sold-out check before this one has tested it
_WORDED = re.compile(r"[^\W\d_]")  # a letter, in any script


def read_gone_notice(
    tree: LexborHTMLParser, shown: Visible, page_urls: set[str], base: str, markup: Markup
) -> None:
    """``shown.stock`` out of stock when the page says its item is gone: a notice outside
    cards and pickers that says sold, reserved, expired or withdrawn (and no notice says
    otherwise), or a control that offers to tell the shopper when it is back while every buy
    control is hidden (IdoSell's "Powiadom o dostępności" where its hidden "Dodaj do
    koszyka" was). Asked of a product in stock, or of no state, whose stock elements said
    nothing: a stale structured InStock, or a classified ad's page, whose state is no
    stock element's."""
    if shown.stock is not None:
        return
    memo: dict[int, bool] = {}
    gone: LexborNode | None = None
    for node, state in _stock_states(_NOTICE_NODES.select(tree, markup)[:_MAX_NOTICES], memo):
        if state == "out_of_stock" and says_auction_ended(_shown_words(node)):
            # An auction's end is no notice of stock here: the annotations of real pages
            # count an ended eBay or LiveAuctioneers lot as in stock (its page still
            # describes the item), so only a stock element's own words make it sold out.
            continue
        if _in_picker(node) or cards_link_elsewhere([node], page_urls, base, title=shown.title):
            continue  # another item's card's, or a size's
        if state != "out_of_stock":
            return  # the notices disagree: one of them is a template's
        gone = gone or node
    if gone is None and markup.names(_UNSELLABLE):
        gone = _notify_instead(tree, markup, memo, (page_urls, base, shown.title))
    if gone is not None:
        shown.stock, shown.stock_node = "out_of_stock", gone


def _notify_instead(
    tree: LexborHTMLParser,
    markup: Markup | None,
    memo: dict[int, bool],
    places: tuple[set[str], str, LexborNode | None],
) -> LexborNode | None:
    """A notify control shown outside recommendation rows while every buy control of the
    page's own is hidden or disabled: the page offers a message, not a sale. (A disabled
    button alone says nothing: shops disable it until a size is chosen.) ``places``: the
    page's URLs, its base and its title, to leave out the buttons of other products' cards."""
    page_urls, base, title = places
    # The notify control first: most pages have none, and each search walks the tree.
    notify = _notify_control(tree, markup, memo, shown=True, query=_NOTIFY_CONTROLS)
    if notify is None:
        return None
    for control in buy_controls(tree, markup)[:_MAX_CONTROLS]:
        words = _control_words(control)
        if not _WORDED.search(words) or _NOTIFY_WORDS.search(words):
            continue  # a quantity's "+" and "-" in the cart form, or the notify control
        if _hidden(control) or "disabled" in control.attributes:
            continue
        if in_tile_container(control, memo):
            continue
        if not cards_link_elsewhere([control], page_urls, base, title=title):
            return None  # a buy control of the page's own, enabled
    return notify


def read_selling(
    tree: LexborHTMLParser, shown: Visible, page_urls: set[str], base: str, markup: Markup
) -> None:
    """``shown.sells`` when the page's stock element says in stock and a buy control of the
    page's own is shown, enabled and not a sold-out one. Asked only of a product whose
    structured data says it cannot be bought: the controls cost walks of the tree."""
    if shown.stock != "in_stock":
        return
    if not shown.buttons:
        find_buttons(tree, shown, page_urls, base, markup)
    shown.sells = any(_in_use(control) for control in shown.buttons)


_OUT_OF_USE = re.compile(r"(?:^|[\s_-])disabled(?:$|[\s_-])", re.I)


def _in_use(control: LexborNode) -> bool:
    """A buy control that is shown, enabled and not a sold-out one. A control may be the block
    around the button (a "buy-box" is one, counted once): a disabled button in it is out of use
    too."""
    attrs = control.attributes
    if _hidden(control) or _sold_out(control) or "disabled" in attrs:
        return False
    if attrs.get("aria-disabled") == "true" or _OUT_OF_USE.search(attrs.get("class") or ""):
        return False
    return control.css_first('[disabled], [aria-disabled="true"]') is None


def read_stock_label(shown: Visible, markup: Markup) -> None:
    """``shown.stock`` from a labelled value, when nothing marked gave it (``_labelled_stock``);
    a scan of the markup, so the caller asks only for a product that has no state."""
    if shown.stock is None:
        shown.stock = _labelled_stock(markup)


def shown_only_in_cards(
    tree: LexborHTMLParser,
    text: str,
    page_urls: set[str],
    base: str,
    title: LexborNode | None,
) -> bool:
    """Every element whose own text holds ``text`` sits in a recommendation container or in
    a card of a row of cards that link to other pages: it is another product's ("Art.-Nr.
    770-120" in a related row), not this page's. False when no shown element holds it
    (script data, an attribute): nothing says whose it is. A row, not a lone card: a shop's
    facts block can sit beside one link with an image to another page (otto.de's article
    number does)."""
    if '"' in text or "\\" in text:
        return False  # no code the label scan reads has them; the selector could not say it
    try:
        nodes = tree.css(f':lexbor-contains("{text}")')
    except Exception:  # a selector lexbor refuses: nothing is known
        return False
    shown = [node for node in nodes[:_MAX_CODE_PLACES] if node.tag not in _UNSHOWN_TEXT]
    memo: dict[int, bool] = {}
    return bool(shown) and all(
        in_tile_container(node, memo)
        or cards_link_elsewhere([node], page_urls, base, title=title, row=True)
        for node in shown
    )


def _labelled_stock(markup: Markup) -> Availability | None:
    """The state a labelled value after the title says ("Availability: Out Of Stock" in a list
    of product facts, "Наличие: нет в наличии"), for a layout whose stock element carries no
    class or id that says so. Read from the lowered bytes, in ``_STOCK_LABEL_WINDOW`` after
    the title."""
    lowered = markup.lowered
    start = lowered.find(b"<h1")
    if start < 0:
        start = max(0, lowered.find(b"<body"))
    end = start + _STOCK_LABEL_WINDOW
    for i, match in enumerate(_STOCK_LABELLED.finditer(lowered, start, end)):
        if i >= _MAX_STOCK_LABELS:
            break
        words = match.group(1).decode("utf-8", "replace").strip()
        state = _stock_words(words) if words else None
        if state is not None:
            return state
    return None


def _hidden(node: LexborNode) -> bool:
    parent: LexborNode | None = node
    for _ in range(4):
        if parent is None or not parent.is_element_node:
            return False
        if _hides(parent):
            return True
        parent = parent.parent
    return False


def _hides(element: LexborNode) -> bool:
    """The element itself is hidden: by attribute, by a hiding class, or by its style."""
    attrs = element.attributes
    if "hidden" in attrs or (attrs.get("aria-hidden") or "") == "true":
        return True
    return bool(
        _HIDDEN.search(attrs.get("class") or "") or _HIDDEN_STYLE.search(attrs.get("style") or "")
    )


def _shown_words(node: LexborNode, depth: int = 0) -> str:
    """The text of ``node`` less that of its hidden descendants (eBay's live region holds a
    hidden "The listing has ended" on every page) and unshown badges (``_badge_off``)."""
    parts: list[str] = []
    for child in node.iter(include_text=True):
        if child.is_text_node:
            parts.append(child.text_content or "")
        elif depth < 8 and child.tag not in _UNSHOWN and not (_hides(child) or _badge_off(child)):
            parts.append(_shown_words(child, depth + 1))
    return " ".join(" ".join(parts).split())


def _sold_out(node: LexborNode) -> bool:
    """A buy control that says sold out. Not merely disabled: shops disable the button until
    a size is chosen."""
    words = _control_words(node)
    return len(words) < 60 and says_sold_out(words)


def _control_words(node: LexborNode) -> str:
    """What a button, link or input says (an input by its value), as ``_label`` reads it."""
    if node.tag == "input":
        attrs = node.attributes
        return _label(attrs.get("value") or attrs.get("alt") or attrs.get("title") or "")
    return _label(node.text(deep=True, separator=" ") or "")


def _label(text: str) -> str:
    """A control's words as read: lower case, its runs of white space one space (Shopware's
    label is two spans, "In den" and "Warenkorb", on lines of their own)."""
    if len(text) >= 1000:
        return text.lower()
    words = " ".join(text.split()).lower()
    half = len(words) // 2
    if words[half : half + 1] == " " and words[:half] == words[half + 1 :]:
        return words[:half]  # said twice, once for screen readers (Naver's "blind" span)
    return words
