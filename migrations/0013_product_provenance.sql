-- How the parser found each product (jsonld, microdata, rdfa, opengraph, visible, css) and how
-- sure it was (0..1), as the last page parse reported them. Nullable: products written before
-- this, and products from API mappings, carry neither. A parse below 0.5 is not confident: the
-- refresher must not count a miss or an out-of-stock from it.
ALTER TABLE products ADD COLUMN found_by text;
ALTER TABLE products ADD COLUMN confidence double precision;
