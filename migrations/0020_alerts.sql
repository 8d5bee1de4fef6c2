-- Alert rules and their deliveries (issue 18), owned by the notifier.
--
-- A rule watches a source's change events, narrowed to one product, variant or GTIN, for one
-- condition: below (price under threshold), drop (a fall of at least threshold %), change (any
-- price change of at least min_change %), back_in_stock, out_of_stock, delisted. It alerts at
-- most once per product (and variant) within debounce_seconds.
CREATE TABLE alert_rules (
    id bigserial PRIMARY KEY,
    source text NOT NULL,
    product_key text,
    variant_key text,
    gtin text,
    condition text NOT NULL,
    threshold numeric,
    min_change double precision NOT NULL DEFAULT 0,
    debounce_seconds integer NOT NULL DEFAULT 3600,
    webhook text,
    secret text NOT NULL,            -- HMAC-SHA256 key of the webhook's signature
    apprise text,                    -- an Apprise URL (optional extra) instead of a webhook
    allow_private jsonb NOT NULL DEFAULT '[]',  -- networks the SSRF guard lets the webhook reach
    created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX alert_rules_source ON alert_rules (source);

-- One delivery per rule and event: the idempotency record. A redelivered event finds its row
-- and sends nothing that was sent.
CREATE TABLE alert_deliveries (
    rule_id bigint NOT NULL REFERENCES alert_rules (id) ON DELETE CASCADE,
    event_id bigint NOT NULL,
    source text NOT NULL,
    key text NOT NULL,
    variant text NOT NULL DEFAULT '',
    status text NOT NULL DEFAULT 'pending',  -- pending | sent | failed
    attempts integer NOT NULL DEFAULT 0,
    last_error text,
    created_at timestamptz NOT NULL DEFAULT now(),
    sent_at timestamptz,
    PRIMARY KEY (rule_id, event_id)
);
-- The debounce looks up a rule's recent alerts of one product.
CREATE INDEX alert_deliveries_debounce ON alert_deliveries (rule_id, key, variant, created_at);
