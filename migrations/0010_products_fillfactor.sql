-- A refresh rewrites the products whose price or stock changed. Neither is indexed, so with
-- room left on the row's page the new version is a HOT update: no index entries, no page
-- split. Applies to pages written from now on; existing ones fill up as before until rewritten.
ALTER TABLE products SET (fillfactor = 80);
