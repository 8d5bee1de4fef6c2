-- The scheduler's SQL: every statement on the tables it owns (sources, jobs, triggers, entries,
-- domains, attempts, schedules, proxies, payloads, url_state), one named query per block.
-- Only services/scheduler/store/ runs them; the service's loops, the admin API, the CLI and the
-- client call the store. tests/integration/test_store_queries.py prepares every one of them
-- against a freshly migrated database.

-- == sources ==================================================================================

-- name: upsert_source
-- Insert or replace a source; true when it is new. Running jobs keep their own copy.
INSERT INTO sources (name, definition) VALUES ($1, $2)
ON CONFLICT (name) DO UPDATE SET definition = EXCLUDED.definition, updated_at = now()
RETURNING (xmax = 0)

-- name: list_sources
SELECT name, definition, updated_at FROM sources ORDER BY name

-- name: get_source
SELECT name, definition, updated_at FROM sources WHERE name = $1

-- name: source_exists
SELECT 1 FROM sources WHERE name = $1

-- name: source_has_jobs
-- A source with jobs cannot be deleted: its jobs are its history.
SELECT 1 FROM jobs WHERE source = $1 LIMIT 1

-- name: delete_source_schedules
DELETE FROM schedules WHERE source = $1

-- name: delete_source
DELETE FROM sources WHERE name = $1

-- == jobs =====================================================================================

-- name: running_job_of_source
-- A verify job (a re-check of change candidates) runs beside the crawl: not "the" running job.
SELECT id FROM jobs WHERE source = $1 AND status = 'running' AND kind <> 'verify'

-- name: lock_running_job_of_source
-- Held until the trigger's transaction ends: a second trigger joins this job, not a new one.
SELECT id FROM jobs WHERE source = $1 AND status = 'running' AND kind <> 'verify' FOR UPDATE

-- name: insert_job
INSERT INTO jobs (source, kind, priority, keywords, requested_by, definition, partial)
VALUES ($1, $2, $3, $4, $5, $6, $7)
RETURNING id

-- name: widen_job
-- A trigger for the whole source joined the job: it is no longer narrowed to some seeds.
UPDATE jobs SET partial = false WHERE id = $1

-- name: job_definition
-- The source as it was when the job started (immutable, so callers cache it).
SELECT definition FROM jobs WHERE id = $1

-- name: verify_avoid
-- A verify job's re-check must not look like the fetch that saw the change: the identity and
-- proxy of the source's latest stored fetch of each of the job's pages before the job (through
-- payloads_url). No row: not a verify job.
SELECT coalesce(array_agg(DISTINCT seen.fingerprint)
                FILTER (WHERE seen.fingerprint IS NOT NULL), '{}') AS identities,
       coalesce(array_agg(DISTINCT seen.proxy) FILTER (WHERE seen.proxy IS NOT NULL), '{}')
           AS proxies
FROM jobs v
JOIN entries e ON e.job_id = v.id
LEFT JOIN LATERAL (
    SELECT a.fingerprint, a.proxy FROM payloads p
    JOIN jobs j ON j.id = p.job_id
    JOIN attempts a ON a.attempt_id = p.attempt_id
    WHERE p.url = e.url AND p.job_id < v.id AND j.source = v.source
    ORDER BY p.fetched_at DESC LIMIT 1) seen ON true
WHERE v.id = $1 AND v.kind = 'verify'
GROUP BY v.id

-- name: job_status
SELECT status FROM jobs WHERE id = $1

-- name: job_head
SELECT source, kind, status FROM jobs WHERE id = $1

-- name: job_source
SELECT source FROM jobs WHERE id = $1

-- name: job_exists
SELECT 1 FROM jobs WHERE id = $1

-- name: entry_counts
-- A job's entries by state and by last outcome. Products: an API page counts every product it
-- listed (product_count); rows written before that column only have has_product.
SELECT state, last_outcome, count(*) AS n,
       coalesce(sum(greatest(product_count, has_product::int)), 0) AS p,
       count(*) FILTER (WHERE parse_error IS NOT NULL) AS e
FROM entries WHERE job_id = $1 GROUP BY state, last_outcome

-- name: keyword_counts
SELECT keyword, count(*) AS n,
       coalesce(sum(greatest(product_count, has_product::int)), 0) AS p
FROM entries WHERE job_id = $1 AND keyword IS NOT NULL GROUP BY keyword

-- name: complete_job
-- Completed when nothing of it is open; a row only for the call that completed it.
UPDATE jobs SET status = 'completed', finished_at = now()
WHERE id = $1 AND status = 'running'
  AND NOT EXISTS (SELECT 1 FROM entries WHERE job_id = $1
                  AND state IN ('pending', 'waiting', 'dispatched', 'fetched'))
RETURNING id

-- name: mark_event_published
-- The final event went out: keep the final counters with the job (finished jobs show these).
UPDATE jobs SET event_published = true, counters = $2 WHERE id = $1

-- name: running_job_ids
SELECT id FROM jobs WHERE status = 'running' ORDER BY id

-- name: unpublished_final_jobs
-- Finished jobs whose final event a crash lost (published again, deduplicated by message id).
SELECT id, status FROM jobs
WHERE status IN ('completed', 'cancelled') AND NOT event_published
LIMIT 100

-- name: list_jobs
-- Newest first; each filter applies when its parameter is not null.
SELECT id, source, kind, status, paused, priority, requested_by, created_at, finished_at,
       counters
FROM jobs
WHERE ($1::text IS NULL OR status = $1) AND ($2::text IS NULL OR source = $2)
  AND ($3::text IS NULL OR kind = $3)
ORDER BY id DESC
LIMIT $4 OFFSET $5

-- name: count_jobs
SELECT count(*) FROM jobs
WHERE ($1::text IS NULL OR status = $1) AND ($2::text IS NULL OR source = $2)
  AND ($3::text IS NULL OR kind = $3)

-- name: get_job
SELECT id, source, kind, status, paused, priority, requested_by, created_at, finished_at,
       counters
FROM jobs WHERE id = $1

-- name: job_rate
-- Attempts recorded in the last minute.
SELECT count(*) FROM attempts WHERE job_id = $1 AND recorded_at > now() - interval '60s'

-- name: jobs_by_status
SELECT status, count(*) AS n FROM jobs GROUP BY status

-- name: running_entries_by_state
SELECT e.state, count(*) AS n FROM entries e JOIN jobs j ON j.id = e.job_id
WHERE j.status = 'running' GROUP BY e.state

-- name: outcomes_last_hour
SELECT outcome, count(*) AS n FROM attempts
WHERE recorded_at > now() - interval '1 hour' GROUP BY outcome

-- name: recent_failures
SELECT attempt_id, job_id, url, outcome, status, error, recorded_at FROM attempts
WHERE outcome NOT IN ('ok', 'not_modified')
ORDER BY recorded_at DESC LIMIT $1 OFFSET $2

-- name: list_entries
-- A job's entries; state and url filter when not null.
SELECT id, url, domain, kind, depth, state, attempts, priority, not_before, last_outcome,
       last_status, parse_error, updated_at
FROM entries
WHERE job_id = $1 AND ($2::text IS NULL OR state = $2) AND ($3::text IS NULL OR url = $3)
ORDER BY id LIMIT $4 OFFSET $5

-- name: count_entries
SELECT count(*) FROM entries
WHERE job_id = $1 AND ($2::text IS NULL OR state = $2) AND ($3::text IS NULL OR url = $3)

-- == operator actions on jobs =================================================================

-- name: cancel_open_entries
-- In-flight fetches finish; what has not gone yet never will.
UPDATE entries SET state = 'cancelled', updated_at = now()
WHERE job_id = $1 AND state IN ('pending', 'waiting')

-- name: cancel_job
UPDATE jobs SET status = 'cancelled', finished_at = now() WHERE id = $1

-- name: reset_failed_entries
-- A fresh set of retries for the job's failed entries; returns their domains.
UPDATE entries SET state = 'pending', attempts = 0, not_before = NULL, updated_at = now()
WHERE job_id = $1 AND state = 'failed'
RETURNING domain

-- name: reopen_job
UPDATE jobs SET status = 'running', finished_at = NULL, event_published = false WHERE id = $1

-- name: boost_entries
-- Raise the priority of the job's waiting work (capped at 100); the rank moves with it.
UPDATE entries SET priority = least(100, priority + $2),
    rank = rank + (least(100, priority + $2) - priority), updated_at = now()
WHERE job_id = $1 AND state IN ('pending', 'waiting')

-- name: set_job_paused
UPDATE jobs SET paused = $2 WHERE id = $1

-- == triggers =================================================================================

-- name: claim_trigger
-- The request path and the stream path see the same trigger: only the first claims it.
INSERT INTO triggers (digest) VALUES ($1) ON CONFLICT DO NOTHING RETURNING 1

-- name: trigger_job
SELECT job_id FROM triggers WHERE digest = $1

-- name: set_trigger_job
UPDATE triggers SET job_id = $2 WHERE digest = $1

-- name: known_product_urls
-- A refresh re-visits every product the source knows: the catalog view the refresher owns
-- (migrations/0014), never its table.
SELECT url FROM catalog_product_urls WHERE source = $1 ORDER BY url

-- == the frontier: admission ==================================================================

-- name: admit_entries
-- New entries of a job; duplicates within the job are ignored. $12: an entry settled at
-- admission enters done with that outcome: not_modified (a sitemap says our stored copy is
-- current) or robots_disallowed (a known robots.txt disallows it: attempt 1 and its history
-- row, as the fetcher's result would have left them). The domains are registered and marked as
-- having pending work in the same statement (one round trip): a discovered domain gets the
-- source's pace ($14 max_in_flight, $15 min_delay, $16 max_delay) on first sight, a known one
-- keeps its own; only an entry left pending marks its domain. $17: the linking page of each
-- entry (its Referer); $18: the history row's error. A false alarm (every URL was a duplicate)
-- is cleared by the next claim that finds the domain dry. Returns (admitted, settled by
-- robots.txt).
WITH marked AS (
    INSERT INTO domains (domain, max_in_flight, min_delay, max_delay, has_pending)
    SELECT d, $14::int, $15::float8, $16::float8, bool_or(o IS NULL)
    FROM unnest($3::text[], $12::text[]) AS u(d, o) GROUP BY d ORDER BY d
    ON CONFLICT (domain) DO UPDATE SET has_pending = true
    WHERE NOT domains.has_pending AND EXCLUDED.has_pending
    RETURNING 1
), admitted AS (
    INSERT INTO entries (job_id, url, domain, kind, depth, keyword, priority, rank, traceparent,
                         request, request_key, state, last_outcome, attempts, pagination_hops,
                         referrer)
    SELECT $1, u.url, u.domain, u.kind, u.depth, u.keyword, u.priority,
           u.priority - 10 * floor(coalesce($8::float8, extract(epoch FROM now())) / 60) / 60,
           $9, u.request::jsonb, u.request_key,
           CASE WHEN u.outcome IS NULL THEN 'pending' ELSE 'done' END, u.outcome,
           CASE WHEN u.outcome = 'robots_disallowed' THEN 1 ELSE 0 END, u.hops, u.referrer
    FROM unnest($2::text[], $3::text[], $4::text[], $5::int[], $6::text[], $7::int[],
                $10::text[], $11::text[], $12::text[], $13::int[], $17::text[])
         AS u(url, domain, kind, depth, keyword, priority, request, request_key, outcome, hops,
              referrer)
    -- The domains first (an init plan runs before the first row), then the entries in a
    -- stable lock order: concurrent admits of overlapping URLs cannot deadlock.
    WHERE (SELECT count(*) FROM marked) >= 0
    ORDER BY u.url, u.request_key
    ON CONFLICT (job_id, url, request_key) DO NOTHING
    RETURNING id, job_id, url, last_outcome
), settled AS (
    INSERT INTO attempts (attempt_id, entry_id, job_id, url, outcome, error)
    SELECT a.id || '.1', a.id, a.job_id, a.url, a.last_outcome, $18
    FROM admitted a WHERE a.last_outcome = 'robots_disallowed'
    ORDER BY a.id
    RETURNING 1
)
SELECT (SELECT count(*) FROM admitted) AS admitted, (SELECT count(*) FROM settled) AS settled

-- name: set_domains_policy
-- A job's start sets its domains' pace from the source, before admitting its seeds, and marks
-- them as having pending work (as admit_entries does).
INSERT INTO domains (domain, max_in_flight, min_delay, max_delay, has_pending)
SELECT d, $2, $3, $4, true FROM unnest($1::text[]) AS d ORDER BY d
ON CONFLICT (domain) DO UPDATE
SET max_in_flight = EXCLUDED.max_in_flight, min_delay = EXCLUDED.min_delay,
    max_delay = EXCLUDED.max_delay, has_pending = true, updated_at = now()

-- name: stored_copies
-- The URLs of a source with a stored copy (url_state), with when it was stored.
SELECT url, payload_ref, updated_at FROM url_state
WHERE source = $1 AND url = ANY($2::text[]) AND payload_ref IS NOT NULL

-- == dispatch =================================================================================

-- name: promote_waiting
-- Retries whose time has come become pending again, and mark their domains.
WITH promoted AS (
    UPDATE entries SET state = 'pending', updated_at = now()
    WHERE id IN (SELECT id FROM entries WHERE state = 'waiting' AND not_before <= now()
                 ORDER BY not_before LIMIT 5000 FOR UPDATE SKIP LOCKED)
    RETURNING domain
)
UPDATE domains SET has_pending = true
WHERE domain IN (SELECT DISTINCT domain FROM promoted) AND NOT has_pending

-- name: claim_domains
-- Domains that may go now, locked (SKIP LOCKED: replicas share the work).
SELECT domain, max_in_flight - in_flight AS slots, min_delay, max_delay, backoff, crawl_delay,
       extract(epoch FROM now() - next_allowed_at)::float8 AS late
FROM domains d
WHERE has_pending AND NOT paused AND in_flight < max_in_flight AND next_allowed_at <= now()
ORDER BY next_allowed_at  -- the domains_ready index; dispatch moves a domain to the back
LIMIT $1
FOR UPDATE SKIP LOCKED

-- name: pick_entries
-- Each claimed domain's best pending entries, locked (the dispatch index serves it). The same
-- selection is the first step of claim_entries; on its own it serves the dispatch benchmark.
SELECT e.id, e.since
FROM unnest($1::text[], $2::int[]) AS d(domain, slots)
CROSS JOIN LATERAL (
    SELECT e.id, coalesce(e.not_before, e.updated_at) AS since FROM entries e
    WHERE e.domain = d.domain AND e.state = 'pending'
    ORDER BY e.rank DESC, e.tiebreak
    LIMIT d.slots
    FOR UPDATE SKIP LOCKED
) e

-- name: claim_entries
-- Pick each claimed domain's best pending entries (as pick_entries) and mark them dispatched,
-- unless their job is paused or over.
WITH picked AS (
    SELECT e.id, e.since
    FROM unnest($1::text[], $2::int[]) AS d(domain, slots)
    CROSS JOIN LATERAL (
        SELECT e.id, coalesce(e.not_before, e.updated_at) AS since FROM entries e
        WHERE e.domain = d.domain AND e.state = 'pending'
        ORDER BY e.rank DESC, e.tiebreak
        LIMIT d.slots
        FOR UPDATE SKIP LOCKED
    ) e
)
UPDATE entries e
SET state = 'dispatched', attempts = e.attempts + 1, dispatched_at = now(), parsed = false,
    updated_at = now()
FROM picked, jobs j
WHERE e.id = picked.id AND j.id = e.job_id AND j.status = 'running' AND NOT j.paused
RETURNING e.id, e.job_id, j.source, e.url, e.domain, e.kind, e.depth, e.keyword, e.attempts,
          e.traceparent, e.request, e.request_key,
          extract(epoch FROM now() - picked.since)::float8 AS waited, e.referrer

-- name: mark_domains_dispatched
UPDATE domains d
SET in_flight = d.in_flight + u.n,
    -- With a delay, consecutive releases are spaced too (not only completions).
    next_allowed_at = CASE WHEN d.max_delay > 0
        THEN now() + make_interval(secs => greatest(coalesce(d.crawl_delay, 0),
             (d.min_delay + random() * (d.max_delay - d.min_delay)) * d.backoff))
        ELSE now() END,  -- unpaced: may go again at once, after the domains waiting longer
    updated_at = now()
FROM unnest($1::text[], $2::int[]) AS u(domain, n)
WHERE d.domain = u.domain

-- name: recheck_domains
-- A domain that ran dry (fewer entries than slots) is re-checked in the same transaction.
UPDATE domains d SET has_pending = EXISTS (
    SELECT 1 FROM entries e WHERE e.domain = d.domain AND e.state = 'pending')
WHERE d.domain = ANY($1::text[])

-- name: url_validators
-- (source, url) → what earlier jobs remember of the URL: validators and the last payload.
SELECT u.source, u.url, u.etag, u.last_modified, u.payload_ref
FROM url_state u JOIN unnest($1::text[], $2::text[]) AS w(source, url)
  ON u.source = w.source AND u.url = w.url

-- name: seconds_until_due
-- Until the earliest domain with pending work may go, and until the earliest retry is due
-- (negative: overdue; null: none). The dispatch loop opens a claim transaction only when one
-- of them is due.
SELECT extract(epoch FROM (SELECT min(next_allowed_at) FROM domains
                           WHERE has_pending AND NOT paused AND in_flight < max_in_flight)
                          - now())::float8 AS domains,
       extract(epoch FROM (SELECT min(not_before) FROM entries WHERE state = 'waiting')
                          - now())::float8 AS retries

-- == results ==================================================================================

-- name: insert_attempts
-- History, and the idempotency key of a fetch result: the attempt ids not returned were
-- recorded already (a redelivery). Arrays, one element per result, in attempt-id order (the
-- lock order of concurrent batches).
INSERT INTO attempts (attempt_id, entry_id, job_id, url, outcome, status, error, started_at,
                      elapsed_ms, payload_ref, proxy, fingerprint, retry_after)
SELECT a.attempt_id, a.entry_id, a.job_id, a.url, a.outcome, a.status, a.error,
       to_timestamp(a.started_at), a.elapsed_ms, a.payload_ref, a.proxy, a.fingerprint,
       a.retry_after
FROM unnest($1::text[], $2::bigint[], $3::bigint[], $4::text[], $5::text[], $6::int[],
            $7::text[], $8::float8[], $9::float8[], $10::text[], $11::text[], $12::text[],
            $13::float8[])
     AS a(attempt_id, entry_id, job_id, url, outcome, status, error, started_at, elapsed_ms,
          payload_ref, proxy, fingerprint, retry_after)
ORDER BY a.attempt_id
ON CONFLICT (attempt_id) DO NOTHING
RETURNING attempt_id

-- name: lock_entries_for_fetch
-- The entries of a batch of fetch results, locked in id order, with what each result claims
-- about its entry (job, source, URL, attempts dispatched) to check.
SELECT e.id, e.state, e.attempts, e.domain, e.parsed, e.job_id, e.url, j.source
FROM entries e JOIN jobs j ON j.id = e.job_id
WHERE e.id = ANY($1::bigint[])
ORDER BY e.id
FOR UPDATE OF e

-- name: lock_entries_for_parse
-- The entries of a batch of parse results, locked in id order, with what admitting their
-- links needs of their jobs (one round trip).
SELECT e.id, e.state, e.attempts, e.parsed, e.pagination_hops, j.priority, j.requested_by,
       j.status AS job_status, e.job_id, e.url, j.source
FROM entries e JOIN jobs j ON j.id = e.job_id
WHERE e.id = ANY($1::bigint[])
ORDER BY e.id
FOR UPDATE OF e

-- name: lock_domains_pace
-- The pace of a batch's domains, locked in name order.
SELECT domain, min_delay, max_delay, backoff, crawl_delay FROM domains
WHERE domain = ANY($1::text[])
ORDER BY domain
FOR UPDATE

-- name: pace_domains
-- Free the domains' in-flight slots ($2 results each) and set when each may go next.
UPDATE domains d SET in_flight = greatest(0, d.in_flight - u.n), backoff = u.backoff,
    crawl_delay = u.crawl_delay,
    next_allowed_at = greatest(d.next_allowed_at, now() + make_interval(secs => u.delay)),
    updated_at = now()
FROM unnest($1::text[], $2::int[], $3::float8[], $4::float8[], $5::float8[])
     AS u(domain, n, backoff, crawl_delay, delay)
WHERE d.domain = u.domain

-- name: record_payloads
-- Payload metadata for the payload API (the bodies are in the payload store), $1-$9; and the
-- URLs' memory across jobs of a source (url_state: validators and the last payload), $10-$15,
-- one row per (source, url) (the caller keeps the last result of each). One round trip.
WITH stored AS (
    INSERT INTO payloads (ref, url, job_id, attempt_id, status, content_type, size, sha256,
                          fetched_at)
    SELECT p.ref, p.url, p.job_id, p.attempt_id, p.status, p.content_type, p.size, p.sha256,
           to_timestamp(p.fetched_at)
    FROM unnest($1::text[], $2::text[], $3::bigint[], $4::text[], $5::int[], $6::text[],
                $7::int[], $8::text[], $9::float8[])
         AS p(ref, url, job_id, attempt_id, status, content_type, size, sha256, fetched_at)
    ORDER BY p.attempt_id
    ON CONFLICT DO NOTHING
)
INSERT INTO url_state (source, url, etag, last_modified, payload_ref, content_type)
SELECT * FROM unnest($10::text[], $11::text[], $12::text[], $13::text[], $14::text[],
                     $15::text[])
     AS u(source, url, etag, last_modified, payload_ref, content_type)
ORDER BY 1, 2
ON CONFLICT (source, url) DO UPDATE SET etag = EXCLUDED.etag,
    last_modified = EXCLUDED.last_modified, payload_ref = EXCLUDED.payload_ref,
    content_type = EXCLUDED.content_type, updated_at = now()

-- name: set_entries_fetched
-- The entries' states after their fetch results; seconds until a retry (null: none).
UPDATE entries e SET state = u.state, last_outcome = u.outcome, last_status = u.status,
    not_before = CASE WHEN u.retry_in IS NULL THEN NULL
                      ELSE now() + make_interval(secs => u.retry_in) END,
    etag = coalesce(u.etag, e.etag), last_modified = coalesce(u.last_modified, e.last_modified),
    updated_at = now()
FROM unnest($1::bigint[], $2::text[], $3::text[], $4::int[], $5::float8[], $6::text[],
            $7::text[])
     AS u(id, state, outcome, status, retry_in, etag, last_modified)
WHERE e.id = u.id

-- name: set_entries_parsed
-- The parse results are in. Per entry: closes (the fetch result was in too, so it is done),
-- failed (the page's result could not be published, parse_error says why: it fails whatever
-- comes), products counted and the parse error.
UPDATE entries e
SET state = CASE WHEN u.failed THEN 'failed' WHEN u.closes THEN 'done' ELSE e.state END,
    parsed = true, has_product = u.products > 0, product_count = u.products,
    parse_error = u.error, updated_at = now()
FROM unnest($1::bigint[], $2::int[], $3::text[], $4::boolean[], $5::boolean[])
     AS u(id, products, error, closes, failed)
WHERE e.id = u.id

-- == sweeps ===================================================================================

-- name: recover_stale_entries
-- Work dispatched (or fetched) but without a result within the visibility timeout goes back to
-- pending, within the job's retry budget: an entry that has had its 1 + max_retries attempts
-- fails instead ('lost': no result ever came; a result nobody can publish ends so, see
-- docs/architecture.md "Message fate"). Returns the entries' domains and new states.
UPDATE entries e
SET state = CASE WHEN e.attempts > coalesce((j.definition->'retry'->>'max_retries')::int, 3)
                 THEN 'failed' ELSE 'pending' END,
    last_outcome = CASE WHEN e.attempts > coalesce((j.definition->'retry'->>'max_retries')::int, 3)
                        THEN 'lost' ELSE e.last_outcome END,
    updated_at = now()
FROM jobs j
WHERE j.id = e.job_id
  AND e.id IN (SELECT id FROM entries
               WHERE state IN ('dispatched', 'fetched')
                 AND dispatched_at < now() - make_interval(secs => $1)
               LIMIT 10000 FOR UPDATE SKIP LOCKED)
RETURNING e.domain, e.state

-- name: recount_in_flight
-- In-flight counters are recomputed from the entries (self-healing).
UPDATE domains d SET has_pending = true,
    in_flight = (SELECT count(*) FROM entries e
                 WHERE e.domain = d.domain AND e.state = 'dispatched')
WHERE d.domain = ANY($1::text[])

-- name: recheck_has_pending
-- Backstop for the has_pending flag: a domain must never starve silently.
UPDATE domains d SET has_pending = true
WHERE NOT has_pending AND EXISTS (
    SELECT 1 FROM entries e WHERE e.domain = d.domain AND e.state = 'pending')

-- name: mark_domains_pending
UPDATE domains SET has_pending = true WHERE domain = ANY($1::text[])

-- == domains ==================================================================================

-- name: list_domains
SELECT d.domain, d.paused, d.max_in_flight, d.in_flight, d.min_delay, d.max_delay,
    d.crawl_delay, d.backoff, d.next_allowed_at, d.updated_at,
    (SELECT count(*) FROM entries e WHERE e.domain = d.domain AND e.state = 'pending') AS pending,
    (SELECT count(*) FROM entries e WHERE e.domain = d.domain AND e.state = 'waiting') AS waiting,
    (SELECT count(*) FROM attempts a JOIN entries e ON e.id = a.entry_id
      WHERE e.domain = d.domain AND a.outcome = 'blocked'
        AND a.recorded_at > now() - interval '1 hour') AS blocked_last_hour
FROM domains d ORDER BY d.domain LIMIT $1 OFFSET $2

-- name: get_domain
SELECT d.domain, d.paused, d.max_in_flight, d.in_flight, d.min_delay, d.max_delay,
    d.crawl_delay, d.backoff, d.next_allowed_at, d.updated_at,
    (SELECT count(*) FROM entries e WHERE e.domain = d.domain AND e.state = 'pending') AS pending,
    (SELECT count(*) FROM entries e WHERE e.domain = d.domain AND e.state = 'waiting') AS waiting,
    (SELECT count(*) FROM attempts a JOIN entries e ON e.id = a.entry_id
      WHERE e.domain = d.domain AND a.outcome = 'blocked'
        AND a.recorded_at > now() - interval '1 hour') AS blocked_last_hour
FROM domains d WHERE d.domain = $1

-- name: domain_exists
SELECT 1 FROM domains WHERE domain = $1

-- name: why_waiting
-- Why an open entry is not being fetched, in the order dispatch checks; domain and url filter
-- when not null.
SELECT e.id AS entry_id, e.job_id, e.url, e.domain, e.state, e.not_before, e.last_outcome,
       e.attempts,
       CASE
         WHEN j.status <> 'running' THEN 'job is ' || j.status
         WHEN j.paused THEN 'job is paused'
         WHEN e.state = 'dispatched' THEN 'dispatched, waiting for the fetcher'
         WHEN e.state = 'fetched' THEN 'fetched, waiting for the parser'
         WHEN e.state = 'waiting' THEN 'retry backoff until ' || to_char(e.not_before
              AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"') || ' after '
              || coalesce(e.last_outcome, 'an error')
         WHEN d.domain IS NULL THEN 'domain not registered yet'
         WHEN d.paused THEN 'domain is paused'
         WHEN d.in_flight >= d.max_in_flight THEN 'domain at max_in_flight ('
              || d.in_flight || '/' || d.max_in_flight || ')'
         WHEN d.next_allowed_at > now() THEN 'domain pacing: next request at '
              || to_char(d.next_allowed_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"')
         ELSE 'queued behind ' || (SELECT count(*) FROM entries o
              WHERE o.domain = e.domain AND o.state = 'pending' AND o.rank > e.rank)
              || ' higher-ranked entries of the domain'
       END AS reason
FROM entries e
JOIN jobs j ON j.id = e.job_id
LEFT JOIN domains d ON d.domain = e.domain
WHERE e.state IN ('pending', 'waiting', 'dispatched', 'fetched')
  AND ($1::text IS NULL OR e.domain = $1)
  AND ($2::text IS NULL OR e.url = $2)
ORDER BY e.rank DESC, e.id
LIMIT $3 OFFSET $4

-- name: pause_domain
UPDATE domains SET paused = $2, updated_at = now() WHERE domain = $1

-- name: domain_pace
SELECT min_delay, max_delay, max_in_flight FROM domains WHERE domain = $1

-- name: set_domain_pace
-- An operator's pace; it holds until a new job of a source sets the domain's policy.
UPDATE domains SET min_delay = $2, max_delay = $3, max_in_flight = $4, backoff = 1,
    updated_at = now()
WHERE domain = $1

-- name: reset_domain
-- An operator's reset: the back-off factor and any wait (Retry-After, Crawl-delay) are forgotten,
-- and the domain's waiting retries are due now; returns how many retries that brought forward.
WITH domain AS (
    -- crawl_delay too: the next result brings it again from robots.txt (capped)
    UPDATE domains SET backoff = 1, next_allowed_at = now(), crawl_delay = NULL,
        updated_at = now()
    WHERE domain = $1
    RETURNING domain
), hurried AS (
    UPDATE entries SET not_before = now(), updated_at = now()
    WHERE domain = (SELECT domain FROM domain) AND state = 'waiting' AND not_before > now()
    RETURNING 1
)
SELECT (SELECT count(*) FROM domain) AS found, (SELECT count(*) FROM hurried) AS hurried

-- == schedules ================================================================================

-- name: add_schedule
-- Create a schedule, or re-enable the same one.
INSERT INTO schedules (source, spec, kind, next_run_at) VALUES ($1, $2, $3, $4)
ON CONFLICT (source, spec, kind) DO UPDATE SET enabled = true
RETURNING id

-- name: list_schedules
SELECT id, source, spec, kind, enabled, next_run_at, last_run_at, last_job_id, last_error,
       created_at
FROM schedules ORDER BY id

-- name: get_schedule
SELECT id, source, spec, kind, enabled, next_run_at, last_run_at, last_job_id, last_error,
       created_at
FROM schedules WHERE id = $1

-- name: set_schedule_enabled
UPDATE schedules SET enabled = $2 WHERE id = $1

-- name: remove_schedule
DELETE FROM schedules WHERE id = $1

-- name: schedule_due_now
-- Due now: a scheduler claims the run within about a second.
UPDATE schedules SET next_run_at = now() WHERE id = $1

-- name: claim_due_schedule
-- One due schedule, locked (SKIP LOCKED: any number of replicas create each run once).
SELECT id, source, spec, kind, next_run_at FROM schedules
WHERE enabled AND next_run_at <= $1
ORDER BY next_run_at LIMIT 1 FOR UPDATE SKIP LOCKED

-- name: disable_schedule
UPDATE schedules SET enabled = false, last_error = $2 WHERE id = $1

-- name: advance_schedule
-- The claimed run's next time; $4 says why the run did not start (null: it starts).
UPDATE schedules SET next_run_at = $2, last_run_at = $3, last_error = $4 WHERE id = $1

-- name: record_schedule_run
UPDATE schedules SET last_job_id = coalesce($2, last_job_id), last_error = $3 WHERE id = $1

-- == proxies ==================================================================================

-- name: add_proxy
-- Register a proxy, or re-activate the same URL (which may hold credentials).
INSERT INTO proxies (url) VALUES ($1)
ON CONFLICT (url) DO UPDATE SET active = true, consecutive_failures = 0
RETURNING id, url, active, consecutive_failures, successes, failures, last_error,
          last_used_at, created_at

-- name: list_proxies
SELECT id, url, active, consecutive_failures, successes, failures, last_error, last_used_at,
       created_at
FROM proxies ORDER BY id

-- name: get_proxy
SELECT id, url, active, consecutive_failures, successes, failures, last_error, last_used_at,
       created_at
FROM proxies WHERE id = $1

-- name: remove_proxy
DELETE FROM proxies WHERE id = $1 RETURNING 1

-- name: set_proxy_active
-- Re-activating forgets the failure streak.
UPDATE proxies SET active = $2,
    consecutive_failures = CASE WHEN $2 THEN 0 ELSE consecutive_failures END
WHERE id = $1
RETURNING id, url, active, consecutive_failures, successes, failures, last_error,
          last_used_at, created_at

-- name: proxy_succeeded
UPDATE proxies SET successes = successes + 1, consecutive_failures = 0, last_used_at = now()
WHERE id = $1

-- name: proxy_failed
-- Count a failure; true when this one deactivated the proxy ($3 failures in a row).
UPDATE proxies SET failures = failures + 1, consecutive_failures = consecutive_failures + 1,
    last_error = $2, last_used_at = now(),
    active = active AND consecutive_failures + 1 < $3
WHERE id = $1
RETURNING active = false AND consecutive_failures = $3

-- name: active_proxies
-- With credentials: only for the fetchers' KV bucket, never shown or logged.
SELECT id, url FROM proxies WHERE active ORDER BY id

-- == payloads =================================================================================

-- name: list_payloads
-- Payload records, newest first; url and job filter when not null.
SELECT p.ref, p.url, p.job_id, p.attempt_id, p.status, p.content_type, p.size, p.stored_size,
       p.sha256, p.fetched_at, j.source
FROM payloads p LEFT JOIN jobs j ON j.id = p.job_id
WHERE ($1::text IS NULL OR p.url = $1) AND ($2::bigint IS NULL OR p.job_id = $2)
ORDER BY p.fetched_at DESC, p.attempt_id DESC
LIMIT $3 OFFSET $4

-- name: payload_meta
-- The latest record of a payload reference.
SELECT p.ref, p.url, p.job_id, p.attempt_id, p.status, p.content_type, p.size, p.stored_size,
       p.sha256, p.fetched_at, j.source
FROM payloads p LEFT JOIN jobs j ON j.id = p.job_id
WHERE p.ref = $1
ORDER BY p.fetched_at DESC, p.attempt_id DESC
LIMIT 1

-- name: payload_fetches
-- Bodies are content-addressed: one reference can stand for several fetches (of several URLs).
SELECT count(*) FROM payloads WHERE ref = $1

-- name: latest_payload
SELECT p.ref, p.url, p.job_id, p.attempt_id, p.status, p.content_type, p.size, p.stored_size,
       p.sha256, p.fetched_at, j.source
FROM payloads p LEFT JOIN jobs j ON j.id = p.job_id
WHERE p.url = $1
ORDER BY p.fetched_at DESC, p.attempt_id DESC
LIMIT 1

-- name: recent_refs
-- A URL's most recent distinct bodies, newest first.
SELECT ref FROM payloads WHERE url = $1 GROUP BY ref ORDER BY max(fetched_at) DESC LIMIT $2

-- == health ===================================================================================

-- name: ping
SELECT 1

-- == the dashboard's job history (store/job_history.py) ==========================================

-- name: job_history
-- Jobs newest first after a cursor (an id), each filter applied when not null.
SELECT id, source, kind, status, paused, priority, requested_by, created_at, finished_at,
       counters
FROM jobs
WHERE ($1::text IS NULL OR status = $1) AND ($2::text IS NULL OR source = $2)
  AND ($3::bigint IS NULL OR id < $3)
ORDER BY id DESC
LIMIT $4

-- name: pages_per_minute
-- Attempts of each job in each minute since the job began (a sparkline each).
SELECT a.job_id, floor(extract(epoch FROM a.recorded_at - j.created_at) / 60)::int AS minute,
       count(*)::int AS n
FROM attempts a JOIN jobs j ON j.id = a.job_id
WHERE a.job_id = ANY($1::bigint[])
GROUP BY 1, 2

-- name: job_span
-- The first and last attempt of a job: the range its series covers.
SELECT min(recorded_at) AS first_at, max(recorded_at) AS last_at
FROM attempts WHERE job_id = $1

-- name: job_series
-- A job's attempts by outcome in buckets of $2 seconds.
SELECT to_timestamp(floor(extract(epoch FROM recorded_at) / $2) * $2) AS at, outcome,
       count(*)::int AS n
FROM attempts WHERE job_id = $1
GROUP BY 1, 2
ORDER BY 1, 2

-- name: job_top_errors
-- A job's failed attempts grouped by outcome, status and message, the commonest first.
SELECT outcome, status, left(error, 300) AS error, count(*)::int AS count,
       min(url) AS example_url, max(recorded_at) AS last_at
FROM attempts
WHERE job_id = $1 AND outcome NOT IN ('ok', 'not_modified')
GROUP BY 1, 2, 3
ORDER BY count DESC, last_at DESC
LIMIT $2
