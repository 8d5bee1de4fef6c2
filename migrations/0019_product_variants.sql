-- Variants (issue 18): each size or colour of a product group is a product row of its own
-- (own key, sku, attributes, price, availability, snapshots and misses); variant_of is the key
-- of the product it belongs to, NULL for a product that is no variant.
ALTER TABLE products ADD COLUMN variant_of text;
CREATE INDEX products_variant_of ON products (source, variant_of) WHERE variant_of IS NOT NULL;
