-- What other owners may read of the frontier. The scheduler owns these views as it owns the
-- tables behind them, and keeps their columns stable while its tables change: the refresher's
-- queries (misses, images, replay, the job diff) read only these views, never the tables.
-- The views are plain projections, so the planner inlines them and the tables' indexes apply.

-- A job as seen from outside: its source, kind, status, and the definition it ran with.
CREATE VIEW frontier_jobs AS
SELECT id AS job_id, source, kind, status, partial, definition, created_at
FROM jobs;

-- One row per page (frontier entry) of a job: its state, last outcome and parse error, and
-- what is needed to re-parse it (kind, depth, keyword, the API request, its current attempt).
-- request_key is '' for a plain GET; pages that share a URL (POST bodies) differ in it.
CREATE VIEW frontier_job_pages AS
SELECT job_id, id AS entry_id, url, kind, depth, keyword, request, request_key,
       id || '.' || attempts AS attempt_id, state, last_outcome, parse_error
FROM entries;

-- The stored payloads, with the source of the job that stored each.
CREATE VIEW frontier_payloads AS
SELECT p.ref, p.url, p.job_id, j.source, p.attempt_id, p.content_type, p.fetched_at
FROM payloads p JOIN jobs j ON j.id = p.job_id;

-- The newest stored copy of each URL of a source (pages and images alike).
CREATE VIEW frontier_stored_copies AS
SELECT source, url, payload_ref
FROM url_state
WHERE payload_ref IS NOT NULL;
