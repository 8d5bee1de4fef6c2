-- Named price lists (member, rec, medical, ...) and attributes (potency, ...) of a product, as
-- catalog APIs give them; a snapshot records the price lists too when they change.
ALTER TABLE products ADD COLUMN prices jsonb NOT NULL DEFAULT '{}';
ALTER TABLE products ADD COLUMN attributes jsonb NOT NULL DEFAULT '{}';
ALTER TABLE snapshots ADD COLUMN prices jsonb;
