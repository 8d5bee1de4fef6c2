-- The notifier's queries: alert_rules and alert_deliveries (migrations/0020_alerts.sql).
-- Only services/notifier/store.py runs them.

-- name: add_rule
INSERT INTO alert_rules (source, product_key, variant_key, gtin, condition, threshold,
                         min_change, debounce_seconds, webhook, secret, apprise, allow_private)
VALUES ($1, $2, $3, $4, $5, $6::numeric, $7, $8, $9, $10, $11, $12)
RETURNING {rule_out}

-- name: list_rules
SELECT {rule_out} FROM alert_rules WHERE ($1::text IS NULL OR source = $1) ORDER BY id

-- name: delete_rule
-- A rule from a source file is removed by applying the file without it.
DELETE FROM alert_rules WHERE id = $1 AND origin IS NULL RETURNING id

-- name: rule_origin
SELECT origin FROM alert_rules WHERE id = $1

-- name: lock_file_rules
-- Two applies of one source at once reconcile one after the other.
SELECT pg_advisory_xact_lock(hashtext('alert_rules:' || $1))

-- name: file_rules
SELECT id, file_key FROM alert_rules WHERE source = $1 AND origin = 'source'

-- name: add_file_rule
INSERT INTO alert_rules (source, product_key, variant_key, gtin, condition, threshold,
                         min_change, debounce_seconds, webhook, secret, apprise, allow_private,
                         origin, file_key)
VALUES ($1, $2, $3, $4, $5, $6::numeric, $7, $8, $9, $10, $11, $12, 'source', $13)
RETURNING id

-- name: update_file_rule
-- A named file rule changed in the file: updated in place (only when something differs). Its
-- secret is the file's reference, else the one generated for it before (a reference the file
-- no longer gives is replaced by a generated key, $10).
UPDATE alert_rules SET
    product_key = $2, variant_key = $3, gtin = $4, condition = $5, threshold = $6::numeric,
    min_change = $7, debounce_seconds = $8, webhook = $9,
    secret = COALESCE($11, CASE WHEN secret LIKE '${%}' THEN $10 ELSE secret END),
    apprise = $12, allow_private = $13
WHERE id = $1 AND (product_key, variant_key, gtin, condition, threshold, min_change,
                   debounce_seconds, webhook, apprise, allow_private,
                   $11::text IS NOT NULL AND secret <> $11, $11::text IS NULL AND secret LIKE '${%}')
    IS DISTINCT FROM ($2, $3, $4, $5, $6::numeric, $7, $8, $9, $12, $13::jsonb, false, false)
RETURNING id

-- name: delete_file_rules
-- The source's file rules the file no longer has.
DELETE FROM alert_rules
WHERE source = $1 AND origin = 'source' AND NOT (file_key = ANY($2::text[]))
RETURNING id

-- name: rules_for
-- The rules an event may match: its source's, narrowed by product, variant or GTIN when set.
SELECT {rule_out} FROM alert_rules
WHERE source = $1 AND (product_key IS NULL OR product_key = $2)
  AND (variant_key IS NULL OR variant_key = $3)
  AND (gtin IS NULL OR gtin = $4)
ORDER BY id

-- name: lock_product
-- Serialises the claims of one rule and product: two replicas with two events of the same
-- product cannot both pass the debounce.
SELECT pg_advisory_xact_lock($1::int, hashtext($2 || '#' || $3))

-- name: delivery
SELECT status, attempts FROM alert_deliveries WHERE rule_id = $1 AND event_id = $2

-- name: debounced
-- Another event of this product alerted (or is being alerted) by this rule within the window.
-- One given up on (dead-lettered, or refused) reached nobody, so it holds nothing back.
SELECT EXISTS (
    SELECT 1 FROM alert_deliveries
    WHERE rule_id = $1 AND key = $2 AND variant = $3 AND event_id <> $4
      AND status <> 'given_up'
      AND created_at > now() - make_interval(secs => $5))

-- name: claim_delivery
INSERT INTO alert_deliveries (rule_id, event_id, source, key, variant)
VALUES ($1, $2, $3, $4, $5)
ON CONFLICT DO NOTHING

-- name: delivered
UPDATE alert_deliveries SET status = 'sent', sent_at = now(), attempts = attempts + 1,
    last_error = NULL
WHERE rule_id = $1 AND event_id = $2

-- name: delivery_failed
-- 'failed': retried later; 'given_up': the event is dead-lettered, this alert is not sent.
UPDATE alert_deliveries SET status = $4, attempts = attempts + 1, last_error = $3
WHERE rule_id = $1 AND event_id = $2

-- name: list_deliveries
SELECT rule_id, event_id, source, key, variant, status, attempts, last_error, created_at, sent_at
FROM alert_deliveries WHERE ($1::bigint IS NULL OR rule_id = $1) ORDER BY created_at, event_id
LIMIT $2
