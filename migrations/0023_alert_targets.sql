-- What other owners may read of the alert rules: what each rule targets, its source and the
-- product, variant and GTIN it narrows to (each NULL when it does not). The notifier owns this
-- view as it owns alert_rules, and keeps its columns stable while the table changes: the
-- dashboard's "has alerts" filter (the refresher's product list) reads only this view, never
-- the table (webhooks and secrets stay out of its reach). A plain projection, inlined.
CREATE VIEW alert_targets AS
SELECT id AS rule_id, source, product_key, variant_key, gtin
FROM alert_rules;
