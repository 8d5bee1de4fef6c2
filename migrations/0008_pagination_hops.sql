-- Walking a listing's pages is not going deeper into a site: a pagination link keeps its
-- page's depth (so a category's 40th page and its products are not cut off by max_depth),
-- and counts consecutive pagination hops instead, which links.max_pagination bounds (traps).
ALTER TABLE entries ADD COLUMN pagination_hops int NOT NULL DEFAULT 0;
