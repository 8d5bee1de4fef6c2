-- The dashboard's Match view and `/api/match` look products up by GTIN or MPN across sources.
-- Partial indexes (most products carry neither), and neither value changes once a product is
-- known, so the refresher's updates stay HOT (0010's fillfactor) and pay nothing for them.
CREATE INDEX products_gtin ON products (gtin) WHERE gtin IS NOT NULL;
CREATE INDEX products_mpn ON products (mpn) WHERE mpn IS NOT NULL;
