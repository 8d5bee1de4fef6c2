-- The refresher's queries: products, snapshots, applied_results, miss_counts, and what it reads
-- of the frontier through the scheduler's views (migrations/0012_frontier_views.sql).
-- Only services/refresher/store.py runs them.
--
-- A {name} in braces is a fragment the store fills in from the Product Struct's fields
-- (schemas/messages.py), so adding a product field needs no edit here: {product_columns} and
-- {staged_product_columns} name the staged columns, {locked_products} what a batch compares,
-- {product_updates} what a sighting overwrites, {product_out} the read model (schemas/read.py
-- ProductOut), and {staged_products} the staged values cast to the products columns' types.

-- name: create_staged_results
-- A batch goes in by binary COPY into staging tables, then on to the real tables with one
-- statement each: binding one array per column costs several times the client CPU (asyncpg
-- type-checks every array element). The staging tables are temporary, created once per
-- session and emptied at every commit. Prices and JSON stage as text, cast on the way out:
-- asyncpg's binary numeric encoder costs ~2 µs a value (text: a tenth), and COPY wants binary
-- encoders, which the pool's JSON codec has not.
CREATE TEMP TABLE IF NOT EXISTS refresher_results (
    attempt_id text, job_id bigint, source text, product_key text, not_modified_url text,
    unknown_url text
) ON COMMIT DELETE ROWS

-- name: create_staged_products
CREATE TEMP TABLE IF NOT EXISTS refresher_products (
    {staged_product_columns}
) ON COMMIT DELETE ROWS

-- name: create_staged_snapshots
CREATE TEMP TABLE IF NOT EXISTS refresher_snapshots (
    source text, key text, job_id bigint, price text, sale_price text, currency text,
    availability text, prices text
) ON COMMIT DELETE ROWS

-- name: product_column_types
-- The products table's columns and their types: staged text becomes numeric or jsonb (or
-- whatever a migration made a column) by a cast to the column's own type.
SELECT a.attname AS name, format_type(a.atttypid, a.atttypmod) AS type
FROM pg_attribute a
WHERE a.attrelid = 'products'::regclass AND a.attnum > 0 AND NOT a.attisdropped

-- name: record_results
-- In attempt-id order: two replicas holding the same redelivered results then wait on each
-- other's unique-index entries in the same order, and cannot deadlock.
INSERT INTO applied_results (attempt_id, job_id, source, product_key, not_modified_url,
                             unknown_url)
SELECT attempt_id, job_id, source, product_key, not_modified_url, unknown_url
FROM refresher_results
ORDER BY attempt_id
ON CONFLICT DO NOTHING
RETURNING attempt_id

-- name: lock_products
-- The products the new results name, locked in key order. (Keys come as arrays: a join with
-- the staging table, which has no statistics, can be planned as a scan of all products.)
-- Only flags and non-empty JSON come back: less to decode. Columns: source, the Product fields
-- in order (products.py compares them by position), last_seen_job, missed, delisted.
SELECT {locked_products},
       p.consecutive_misses <> 0 OR p.delisted_at IS NOT NULL AS missed,
       p.delisted_at IS NOT NULL AS delisted
FROM products p JOIN unnest($1::text[], $2::text[]) AS k(source, key)
  ON p.source = k.source AND p.key = k.key
ORDER BY p.source, p.key
FOR UPDATE OF p

-- name: upsert_products
-- A sighting: the product is back in the feed, so its misses reset and a delisting is undone.
-- A late result of an older job never overwrites what a newer job saw.
INSERT INTO products ({product_columns})
SELECT {staged_products} FROM refresher_products s
ON CONFLICT (source, key) DO UPDATE SET {product_updates}, updated_at = now(),
    consecutive_misses = 0, delisted_at = NULL, last_seen_at = now(),
    last_seen_job = greatest(products.last_seen_job, EXCLUDED.last_seen_job)
WHERE products.last_seen_job IS NULL OR products.last_seen_job <= EXCLUDED.last_seen_job

-- name: replay_products
-- A replay corrects what was extracted, but it is no new sighting: misses, delisting and
-- last-seen stay as the live crawls left them.
INSERT INTO products ({product_columns})
SELECT {staged_products} FROM refresher_products s
ON CONFLICT (source, key) DO UPDATE SET {product_updates}, updated_at = now()
WHERE products.last_seen_job IS NULL OR products.last_seen_job <= EXCLUDED.last_seen_job

-- name: insert_snapshots
INSERT INTO snapshots (source, key, job_id, price, sale_price, currency, availability, prices)
SELECT source, key, job_id, price::numeric, sale_price::numeric, currency, availability,
       prices::jsonb
FROM refresher_snapshots

-- name: seen_by_url
-- A 304 whose stored payload could not be re-parsed still counts its page's products as seen.
UPDATE products p SET last_seen_at = now(), consecutive_misses = 0, delisted_at = NULL,
    last_seen_job = greatest(p.last_seen_job, u.job_id)
FROM unnest($1::text[], $2::text[], $3::bigint[]) AS u(source, url, job_id)
WHERE p.source = u.source AND p.url = u.url

-- name: claimed_attempts
-- What the frontier knows of the attempts parse results claim (entry, job, URL): for each claim
-- in order, its job's source and the entry's attempts so far, or NULLs when no entry of that
-- job has that id and URL. (Message content is not trusted: products.py checks the rest.)
SELECT c.i, j.source, split_part(p.attempt_id, '.', 2)::int AS attempts
FROM unnest($1::bigint[], $2::bigint[], $3::text[]) WITH ORDINALITY AS c(entry_id, job_id, url, i)
LEFT JOIN frontier_job_pages p
  ON p.entry_id = c.entry_id AND p.job_id = c.job_id AND p.url = c.url
LEFT JOIN frontier_jobs j ON j.job_id = p.job_id
ORDER BY c.i

-- name: job_products_found
-- How many products the scheduler counted on a job's pages: what its completion waits for,
-- read here rather than from the event (whose counters are only a claim).
SELECT coalesce(sum(product_count), 0) FROM frontier_job_pages WHERE job_id = $1

-- name: count_applied_products
-- How many of a job's products are applied. Per entry and product: a page fetched twice
-- (stale recovery) has two attempts applied, but the scheduler counts its products once.
SELECT count(DISTINCT (split_part(attempt_id, '.', 1), product_key))
FROM applied_results WHERE job_id = $1 AND product_key IS NOT NULL

-- name: claim_miss_count
-- The first call for a job wins; a redelivered completion finds the row and counts nothing.
INSERT INTO miss_counts (job_id, source, counted) VALUES ($1, $2, false)
ON CONFLICT DO NOTHING RETURNING 1

-- name: seen_keys
-- Every product a job saw: its applied results (a 304 re-parsed from the stored payload names
-- what its page shows), the products at the URL of a 304 nothing could be re-parsed from, and
-- the products of pages a sitemap's lastmod showed unchanged (admitted done, never fetched,
-- so no parse result). By URL only where no parse speaks: a variant gone from an unchanged
-- page shares the page's URL but is not on it.
SELECT product_key AS key FROM applied_results WHERE job_id = $1 AND product_key IS NOT NULL
UNION
SELECT p.key FROM products p JOIN applied_results a
  ON a.job_id = $1 AND a.not_modified_url IS NOT NULL AND p.url = a.not_modified_url
WHERE p.source = $2
UNION
SELECT p.key FROM products p JOIN frontier_job_pages e
  ON e.job_id = $1 AND e.state = 'done' AND e.last_outcome = 'not_modified' AND e.url = p.url
WHERE p.source = $2
  AND NOT EXISTS (SELECT 1 FROM applied_results r WHERE r.attempt_id = e.attempt_id)

-- name: mark_seen
-- Seen is seen; the per-sighting upsert skips unchanged rows, so their last-seen mark is set here.
UPDATE products SET consecutive_misses = 0, delisted_at = NULL, last_seen_at = now(),
    last_seen_job = greatest(last_seen_job, $3)
WHERE source = $1 AND key = ANY($2::text[])

-- name: job_page_failures
-- Of the job's pages, how many failed: an image that cannot be fetched says nothing about the
-- catalog, so images are left out.
SELECT count(*) AS total, count(*) FILTER (WHERE state = 'failed') AS failed
FROM frontier_job_pages WHERE job_id = $1 AND kind <> 'image'

-- name: stopped_at_pagination_guard
SELECT EXISTS (SELECT 1 FROM frontier_job_pages
               WHERE job_id = $1 AND parse_error LIKE 'pagination guard%')

-- name: record_not_counted
UPDATE miss_counts SET reason = $2 WHERE job_id = $1

-- name: unknown_urls
-- Pages that say nothing about their products, so that the products they show are neither
-- seen nor missed: fetches that ended in failure (retries exhausted on a transient outcome),
-- parses that were not confident (recorded by the refresher), and product pages fetched fine
-- that parsed without any product (a layout the parser no longer reads is not a delisting).
SELECT url FROM frontier_job_pages WHERE job_id = $1 AND state = 'failed'
UNION
SELECT unknown_url FROM applied_results WHERE job_id = $1 AND unknown_url IS NOT NULL
UNION
SELECT url FROM frontier_job_pages
WHERE job_id = $1 AND kind = 'product' AND state = 'done' AND last_outcome = 'ok'
  AND product_count = 0

-- name: count_missed
-- Not seen, not on a page that says nothing (unknown_urls), and older than the job: a miss.
UPDATE products SET consecutive_misses = consecutive_misses + 1, updated_at = now()
WHERE source = $1 AND NOT (key = ANY($2::text[]))
  AND NOT (coalesce(url, '') = ANY($3::text[]))
  AND first_seen_at < (SELECT created_at FROM frontier_jobs WHERE job_id = $4)
RETURNING key

-- name: delist_products
-- $3: products not delisted now: their delisting is a candidate, verified first.
WITH d AS (
    SELECT key, availability AS before FROM products
    WHERE source = $1 AND consecutive_misses >= $2 AND delisted_at IS NULL
      AND NOT (key = ANY($3::text[]))
    FOR UPDATE)
UPDATE products p SET availability = 'out_of_stock', delisted_at = now(), updated_at = now()
FROM d WHERE p.source = $1 AND p.key = d.key
RETURNING p.key, p.variant_of, p.url, p.gtin, p.price, p.sale_price, p.currency, d.before

-- name: due_for_delisting
-- Products at the threshold not delisted yet, with what a delisting event says of them.
SELECT key, variant_of, url, gtin, price, sale_price, currency, availability AS before
FROM products
WHERE source = $1 AND consecutive_misses >= $2 AND delisted_at IS NULL
ORDER BY key
FOR UPDATE

-- name: delist_keys
-- A verified delisting: these products (a verify job found their page gone or without them),
-- unless another job saw them meanwhile (their misses reset).
WITH d AS (
    SELECT key, availability AS before FROM products
    WHERE source = $1 AND key = ANY($2::text[]) AND delisted_at IS NULL
      AND consecutive_misses > 0
    FOR UPDATE)
UPDATE products p SET availability = 'out_of_stock', delisted_at = now(), updated_at = now()
FROM d WHERE p.source = $1 AND p.key = d.key
RETURNING p.key, p.variant_of, p.url, p.gtin, p.price, p.sale_price, p.currency, d.before

-- name: snapshot_delisted
-- The delisting is a stock change: a snapshot of it.
INSERT INTO snapshots (source, key, job_id, price, sale_price, currency, availability)
VALUES ($1, $2, $3, $4, $5, $6, 'out_of_stock')

-- name: record_counted
UPDATE miss_counts SET counted = true, seen = $2, missed = $3, delisted = $4
WHERE job_id = $1

-- name: link_images_by_url
-- Most image URLs are stored exactly as the product names them (already canonical).
UPDATE products p SET image_ref = u.payload_ref
FROM frontier_stored_copies u
WHERE p.source = $1 AND p.last_seen_job = $2 AND u.source = p.source AND u.url = p.image
  AND p.image_ref IS DISTINCT FROM u.payload_ref

-- name: unmatched_images
SELECT p.key, p.image FROM products p
WHERE p.source = $1 AND p.last_seen_job = $2 AND p.image IS NOT NULL
  AND NOT EXISTS (SELECT 1 FROM frontier_stored_copies u
                  WHERE u.source = p.source AND u.url = p.image)

-- name: set_image_refs
UPDATE products p SET image_ref = v.ref
FROM unnest($2::text[], $3::text[]) AS v(key, ref)
WHERE p.source = $1 AND p.key = v.key AND p.image_ref IS DISTINCT FROM v.ref

-- name: stored_copies
SELECT url, payload_ref FROM frontier_stored_copies WHERE source = $1 AND url = ANY($2::text[])

-- name: job
SELECT job_id, source, kind, status, partial, definition FROM frontier_jobs WHERE job_id = $1

-- name: replay_pages
-- A job's pages to re-parse: those fetched (ok) or re-validated (not_modified), each with the
-- newest payload of its URL stored by that job or an earlier job of the source (a 304 stores
-- nothing new). Pages that share a URL (API POST bodies) take the payload of their own attempt.
SELECT DISTINCT ON (e.entry_id) e.entry_id, e.url, e.depth, e.keyword, e.kind, e.request,
       p.ref, p.content_type
FROM frontier_job_pages e
JOIN frontier_payloads p ON p.url = e.url AND p.job_id <= e.job_id AND p.source = $2
  AND (e.request_key = '' OR p.attempt_id = e.attempt_id)
WHERE e.job_id = $1 AND e.last_outcome IN ('ok', 'not_modified') AND e.kind <> 'image'
ORDER BY e.entry_id, p.job_id DESC, p.fetched_at DESC

-- name: count_products
SELECT count(*) FROM products WHERE source = $1

-- name: list_products
SELECT {product_out} FROM products WHERE source = $1 ORDER BY key LIMIT $2

-- name: count_filtered_products
-- The API's filters: source, availability, at least N misses, text (name contains, or the exact
-- sku or key), delisted or not; each NULL when not asked for.
SELECT count(*) FROM products
WHERE ($1::text IS NULL OR source = $1)
  AND ($2::text IS NULL OR availability = $2)
  AND ($3::int IS NULL OR consecutive_misses >= $3)
  AND ($4::text IS NULL OR name ILIKE '%' || $4 || '%' OR sku = $4 OR key = $4)
  AND ($5::boolean IS NULL OR (delisted_at IS NOT NULL) = $5)

-- name: filter_products
SELECT {product_out} FROM products
WHERE ($1::text IS NULL OR source = $1)
  AND ($2::text IS NULL OR availability = $2)
  AND ($3::int IS NULL OR consecutive_misses >= $3)
  AND ($4::text IS NULL OR name ILIKE '%' || $4 || '%' OR sku = $4 OR key = $4)
  AND ($5::boolean IS NULL OR (delisted_at IS NOT NULL) = $5)
ORDER BY source, key
LIMIT $6 OFFSET $7

-- name: product
SELECT {product_out} FROM products WHERE source = $1 AND key = $2

-- name: product_snapshots
SELECT job_id, price, sale_price, currency, availability, observed_at
FROM snapshots WHERE source = $1 AND key = $2 ORDER BY observed_at, id

-- name: applied_keys
-- The products a job saw by its applied parse results (a 304 without a product counts its
-- URL's).
SELECT DISTINCT product_key AS key FROM applied_results
WHERE job_id = $1 AND source = $2 AND product_key IS NOT NULL
UNION
SELECT p.key FROM products p JOIN applied_results a
  ON a.job_id = $1 AND a.not_modified_url IS NOT NULL AND p.url = a.not_modified_url
WHERE p.source = $2

-- name: states_as_of
-- A product's state as of a job: its last snapshot up to that job (snapshots are written on
-- change only, so the last one is the state then).
SELECT DISTINCT ON (key) key, job_id, price, sale_price, currency, availability, observed_at
FROM snapshots WHERE source = $1 AND job_id <= $2 AND key = ANY($3::text[])
ORDER BY key, job_id DESC, id DESC

-- name: insert_events
-- Product change events (changes.py), one per (source, key, variant, job, kind): a second
-- change of the same kind in one job is the same event. Only the new rows come back, to be
-- published after the commit. Ids follow the order of observation. (The products behind the
-- rows are locked already, so two replicas never race for one key.) A candidate
-- (verification.py) comes in 'pending', with the trigger that asks for its re-check and the
-- page to re-fetch; a second pending candidate of the same product and kind adds nothing.
INSERT INTO product_events (source, key, variant, job_id, kind, url, before, after, direction,
                            percent, gtin, verification, verify_trigger, verify_url)
SELECT source, key, variant, job_id, kind, url, before, after, direction, percent, gtin,
       verification, verify_trigger, verify_url
FROM unnest($1::text[], $2::text[], $3::text[], $4::bigint[], $5::text[], $6::text[],
            $7::jsonb[], $8::jsonb[], $9::text[], $10::float8[], $11::text[], $12::text[],
            $13::text[], $14::text[])
     WITH ORDINALITY AS e(source, key, variant, job_id, kind, url, before, after, direction,
                          percent, gtin, verification, verify_trigger, verify_url, n)
ORDER BY n
ON CONFLICT DO NOTHING
RETURNING {product_event}

-- name: confirm_candidates
-- A verify job's sighting shows the change a pending candidate claims: the candidate is the
-- event (its job, its key), now with the re-check's after, and is published after the commit.
-- (The unnested columns are named apart from the table's: RETURNING names the table's.)
UPDATE product_events e
SET verification = 'confirmed', after = c.c_after, direction = c.c_direction,
    percent = c.c_percent, verify_job = c.c_job, verified_at = now()
FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::jsonb[], $6::text[],
            $7::float8[], $8::bigint[])
     AS c(c_source, c_key, c_variant, c_kind, c_after, c_direction, c_percent, c_job)
WHERE e.source = c.c_source AND e.key = c.c_key AND e.variant = c.c_variant
  AND e.kind = c.c_kind AND e.verification = 'pending'
RETURNING {product_event}

-- name: candidate_rechecks
-- The re-checks that triggers ask for: each trigger's source and pages.
SELECT verify_trigger, source, array_agg(DISTINCT verify_url ORDER BY verify_url) AS urls
FROM product_events
WHERE verify_trigger = ANY($1::text[]) AND verify_url IS NOT NULL
GROUP BY verify_trigger, source

-- name: unlinked_rechecks
-- The sweep: pending candidates whose trigger no scheduler has answered yet (none was up, or
-- the refresher stopped between the commit and the request).
SELECT verify_trigger, source, array_agg(DISTINCT verify_url ORDER BY verify_url) AS urls
FROM product_events
WHERE verification = 'pending' AND verify_job IS NULL AND verify_url IS NOT NULL
  AND at < now() - make_interval(secs => $1)
GROUP BY verify_trigger, source
ORDER BY min(id)
LIMIT $2

-- name: link_verify_job
UPDATE product_events SET verify_job = $2
WHERE verify_trigger = $1 AND verify_job IS NULL

-- name: refused_recheck
-- The scheduler answered a verify trigger with an error (no usable page, the source deleted):
-- its candidates cannot be verified, so they are unknown, never a change.
UPDATE product_events SET verification = 'unknown', verified_at = now()
WHERE verify_trigger = $1 AND verification = 'pending' AND verify_job IS NULL

-- name: abandon_unlinked
-- Candidates whose re-check no scheduler took for this long: unknown, never a change.
UPDATE product_events SET verification = 'unknown', verified_at = now()
WHERE verification = 'pending' AND verify_job IS NULL
  AND at < now() - make_interval(secs => $1)

-- name: pending_checks
-- A verify job's candidates still pending at its completion, locked: one resolution only.
SELECT id, source, key, variant, kind, verify_url FROM product_events
WHERE verify_job = $1 AND verification = 'pending'
ORDER BY id
FOR UPDATE

-- name: verify_pages
-- What a verify job's re-fetch of each page came to: its state and outcome, and whether its
-- parse was unsure (a product parsed without confidence says nothing).
SELECT e.url, e.state, e.last_outcome,
       EXISTS (SELECT 1 FROM applied_results a
               WHERE a.job_id = $1 AND a.unknown_url = e.url) AS unsure
FROM frontier_job_pages e WHERE e.job_id = $1

-- name: settle_checks
UPDATE product_events SET verification = $2, verified_at = now()
WHERE id = ANY($1::bigint[]) AND verification = 'pending'

-- name: confirm_checks
UPDATE product_events SET verification = 'confirmed', verify_job = $2, verified_at = now()
WHERE id = ANY($1::bigint[]) AND verification = 'pending'
RETURNING {product_event}

-- name: finished_verify_jobs
-- The sweep: verify jobs that finished (their misses step ran, or they were cancelled) with
-- candidates still pending: a link recorded after the completion had been handled.
SELECT DISTINCT e.verify_job AS job_id, e.source FROM product_events e
JOIN frontier_jobs j ON j.job_id = e.verify_job
WHERE e.verification = 'pending' AND e.verify_job IS NOT NULL
  AND (j.status = 'cancelled' OR EXISTS (SELECT 1 FROM miss_counts m WHERE m.job_id = j.job_id))

-- name: job_candidates
-- How many of a job's changes were held as candidates, by how they ended.
SELECT verification, count(*) AS n FROM product_events
WHERE job_id = $1 AND verification IS NOT NULL
GROUP BY verification

-- name: verification_counts
-- `trawl changes --verification` and /api/changes/verification: candidates by outcome.
SELECT verification, count(*) AS n FROM product_events
WHERE ($1::text IS NULL OR source = $1) AND verification IS NOT NULL
  AND ($2::timestamptz IS NULL OR at >= $2)
GROUP BY verification

-- name: mark_events_published
UPDATE product_events SET published_at = now() WHERE id = ANY($1::bigint[])

-- name: unpublished_events
-- The outbox sweep: events recorded a while ago whose publish a crash interrupted. SKIP LOCKED:
-- a replica's sweep passes over the rows another is publishing. Candidates are not events
-- until confirmed.
SELECT {product_event} FROM product_events
WHERE published_at IS NULL AND at < now() - make_interval(secs => $1)
  AND (verification IS NULL OR verification = 'confirmed')
ORDER BY id LIMIT $2
FOR UPDATE SKIP LOCKED

-- name: list_events
-- `trawl changes` and /api/changes: a source's events (all sources when NULL), since a time,
-- of some kinds, from a cursor (an event id $2): in id order after it, or with $6 newest first
-- before it (0: from the newest; the dashboard's feed). The filters are written once in a CTE
-- inlined into both branches; each branch keeps its own ORDER BY, so the primary key serves
-- either direction, and the branch $6 does not ask for is skipped by a one-time filter.
WITH matching AS NOT MATERIALIZED (
    SELECT {product_event} FROM product_events
    WHERE ($1::text IS NULL OR source = $1)
      AND ($3::timestamptz IS NULL OR at >= $3)
      AND ($4::text[] IS NULL OR kind = ANY($4::text[]))
      -- Emitted events only, unless $7 names verification states (held candidates).
      AND ($7::text[] IS NULL AND (verification IS NULL OR verification = 'confirmed')
           OR verification = ANY($7::text[])))
(SELECT * FROM matching WHERE NOT $6::boolean AND id > $2::bigint ORDER BY id LIMIT $5)
UNION ALL
(SELECT * FROM matching WHERE $6::boolean AND ($2::bigint = 0 OR id < $2::bigint)
 ORDER BY id DESC LIMIT $5)

-- name: view_filter
-- The dashboard product list's filters: not a query, but the fragment the five queries
-- below name in braces (the store fills it in, comments left out).
-- Each is NULL when not asked for: $1 source, $2 availability, $3 text (name contains, or the
-- exact sku or key), $4 changed within this many hours (a snapshot: price, sale price or stock
-- changed), $5 delisted or not, $6 an alert rule targets it or not.
-- A rule targets a product whose change events it would match (the notifier's rules_for): the
-- rule's source, and its product key, variant key and GTIN where set, against the event's key
-- (a variant's is its product's key), variant (a variant's own key; '' for a product) and GTIN.
-- The rules fall in three sets, each uncorrelated, so hashed once per query and probed per row
-- (a per-row scan of the rules would cost 100k scans): rules of a whole source; rules naming
-- only a variant; and the products the rules naming a product or a GTIN pick out, rule by
-- rule, through the indexes on key, variant_of and gtin (one branch each: a join on the OR of
-- them would hash on source alone and compare every product with every rule).
($1::text IS NULL OR source = $1)
  AND ($2::text IS NULL OR availability = $2)
  AND ($3::text IS NULL OR name ILIKE '%' || $3 || '%' OR sku = $3 OR key = $3)
  AND ($4::int IS NULL OR EXISTS (
        SELECT 1 FROM snapshots s WHERE s.source = products.source AND s.key = products.key
          AND s.observed_at > now() - make_interval(hours => $4)))
  AND ($5::boolean IS NULL OR (delisted_at IS NOT NULL) = $5)
  AND ($6::boolean IS NULL OR $6 = (
        source IN (SELECT r.source FROM alert_targets r
                   WHERE r.product_key IS NULL AND r.variant_key IS NULL AND r.gtin IS NULL)
        OR (source, CASE WHEN variant_of IS NULL THEN '' ELSE key END) IN (
            SELECT r.source, r.variant_key FROM alert_targets r
            WHERE r.product_key IS NULL AND r.gtin IS NULL AND r.variant_key IS NOT NULL)
        OR (source, key) IN (
            SELECT t.source, t.key FROM alert_targets r CROSS JOIN LATERAL (
                SELECT source, key, variant_of, gtin FROM products
                WHERE source = r.source AND key = r.product_key
                UNION ALL
                SELECT source, key, variant_of, gtin FROM products
                WHERE source = r.source AND variant_of = r.product_key
                UNION ALL
                SELECT source, key, variant_of, gtin FROM products
                WHERE r.product_key IS NULL AND gtin = r.gtin AND source = r.source) t
            WHERE (r.product_key IS NULL OR r.product_key = coalesce(t.variant_of, t.key))
              AND (r.variant_key IS NULL
                   OR r.variant_key = CASE WHEN t.variant_of IS NULL THEN '' ELSE t.key END)
              AND (r.gtin IS NULL OR r.gtin = t.gtin))))

-- name: products_by_key
-- The dashboard's product list, paged by key set (never OFFSET, which reads every row it
-- skips): one query per sort order, each continuing after the cursor's (sort value, source,
-- key): $7..$9, and $10 the page size (the filters: $1..$6, view_filter above). By key the
-- primary key serves the order; the other orders sort the filtered rows (a top-N sort: tens
-- of milliseconds at 100k products), since indexes on price or updated_at would cost the
-- refresher its HOT updates.
SELECT {product_out}, key AS sort_value FROM products
WHERE {view_filter}
  AND ($8::text IS NULL OR (source, key) > ($8, $9::text))
  AND ($7::text IS NULL OR $7::text IS NOT NULL)  -- always true: gives $7 its type
ORDER BY source, key
LIMIT $10

-- name: products_by_name
SELECT {product_out}, coalesce(name, '') AS sort_value FROM products
WHERE {view_filter}
  AND ($8::text IS NULL OR (coalesce(name, ''), source, key) > ($7::text, $8, $9::text))
ORDER BY coalesce(name, ''), source, key
LIMIT $10

-- name: products_by_price
-- Products without a price sort last ('Infinity').
SELECT {product_out}, coalesce(price, 'Infinity')::text AS sort_value FROM products
WHERE {view_filter}
  AND ($8::text IS NULL
       OR (coalesce(price, 'Infinity'), source, key) > ($7::numeric, $8, $9::text))
ORDER BY coalesce(price, 'Infinity'), source, key
LIMIT $10

-- name: products_by_updated
-- Most recently updated first.
SELECT {product_out}, updated_at::text AS sort_value FROM products
WHERE {view_filter}
  AND ($8::text IS NULL OR (updated_at, source, key) < ($7::timestamptz, $8, $9::text))
ORDER BY updated_at DESC, source DESC, key DESC
LIMIT $10

-- name: count_view_products
-- How many products the list's filters match (the first page shows it).
SELECT count(*) FROM products WHERE {view_filter}

-- name: product_history
-- A product's snapshots and its variants' (the rows whose variant_of is its key), from a cursor
-- (observed_at, id) on, oldest first, each with its variant's key (NULL: the product's own)
-- and with the page its job stored for the row's URL and the page stored before it (the
-- previous crawl), so the dashboard can open the raw page and its diff. A 304 stores nothing:
-- both stay NULL.
SELECT s.id, s.job_id, s.price, s.sale_price, s.currency, s.availability, s.observed_at,
       CASE WHEN p.variant_of IS NOT NULL THEN p.key END AS variant_key,
       cur.ref AS payload_ref, prev.ref AS previous_ref
FROM products p
JOIN snapshots s ON s.source = p.source AND s.key = p.key
LEFT JOIN LATERAL (
    SELECT fp.ref, fp.fetched_at FROM frontier_payloads fp
    WHERE fp.url = p.url AND fp.job_id = s.job_id
    ORDER BY fp.fetched_at DESC LIMIT 1) cur ON true
LEFT JOIN LATERAL (
    SELECT fp.ref FROM frontier_payloads fp
    WHERE fp.url = p.url AND fp.fetched_at < cur.fetched_at
    ORDER BY fp.fetched_at DESC LIMIT 1) prev ON true
WHERE p.source = $1 AND (p.key = $2 OR p.variant_of = $2)
  AND ($3::timestamptz IS NULL OR (s.observed_at, s.id) > ($3, $4::bigint))
ORDER BY s.observed_at, s.id
LIMIT $5

-- name: product_variants
-- A product's variants as they are now, by key (the series of its history chart).
SELECT {product_out} FROM products WHERE source = $1 AND variant_of = $2 ORDER BY key

-- name: match_products
-- Products that share a GTIN or an MPN, across sources, cheapest first.
SELECT {product_out} FROM products
WHERE ($1::text IS NOT NULL AND gtin = $1) OR ($2::text IS NOT NULL AND mpn = $2)
ORDER BY coalesce(sale_price, price) NULLS LAST, source, key
LIMIT 500

-- name: match_groups
-- GTINs held by products of at least two sources, the widest first: where to start comparing.
SELECT gtin, count(DISTINCT source) AS sources, count(*) AS products,
       min(coalesce(sale_price, price)) AS lowest, max(coalesce(sale_price, price)) AS highest,
       min(name) AS name
FROM products
WHERE gtin IS NOT NULL AND ($1::text IS NULL OR gtin > $1)
GROUP BY gtin
HAVING count(DISTINCT source) >= $2
ORDER BY gtin
LIMIT $3

-- name: export_products
-- A source's products for an export, by key; the store reads them through a cursor so memory
-- stays flat however many there are. $2: only products updated since then.
SELECT {product_out}, updated_at FROM products
WHERE source = $1 AND ($2::timestamptz IS NULL OR updated_at >= $2)
ORDER BY key

-- name: export_history
-- A source's snapshots (every observed change) for an export, by product then time: the
-- order of snapshots_product, so rows stream from the index without a sort.
SELECT s.key, s.job_id, s.price, s.sale_price, s.currency, s.availability, s.observed_at
FROM snapshots s
WHERE s.source = $1 AND ($2::timestamptz IS NULL OR s.observed_at >= $2)
ORDER BY s.key, s.observed_at, s.id
