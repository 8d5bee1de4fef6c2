-- What other owners may read of the catalog. The refresher owns this view as it owns the
-- products table, and keeps its columns stable while the table changes: a refresh job's seeds
-- (the scheduler re-visits every product page the source knows) come from here, never from
-- the table. A plain projection: the planner inlines it and the table's indexes apply.
CREATE VIEW catalog_product_urls AS
SELECT source, url
FROM products
WHERE url IS NOT NULL;
