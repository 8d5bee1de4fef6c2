-- Verify before alerting (issue 18, item 4). A candidate change (out of stock, delisted, a large
-- price change) is recorded as a product_events row in the state 'pending' and not published;
-- a verify job re-fetches its page with a fresh identity, and the row becomes 'confirmed'
-- (published), 'cancelled' (the re-check contradicts it) or 'unknown' (the re-check said
-- nothing: blocked, failed, parsed without confidence). NULL: a change that needed no check.
ALTER TABLE product_events
    ADD COLUMN verification text
        CHECK (verification IN ('pending', 'confirmed', 'cancelled', 'unknown')),
    ADD COLUMN verify_trigger text,  -- the trigger id that asks for the re-check (idempotent)
    ADD COLUMN verify_url text,      -- the page the re-check fetches
    ADD COLUMN verify_job bigint,    -- the verify job that trigger started (its reply)
    ADD COLUMN verified_at timestamptz;

-- At most one pending candidate per product, variant and kind: a later job that sees the same
-- change while the first re-check is under way adds nothing.
CREATE UNIQUE INDEX product_events_one_pending ON product_events (source, key, variant, kind)
    WHERE verification = 'pending';
-- A verify job's completion resolves its candidates.
CREATE INDEX product_events_verify_job ON product_events (verify_job)
    WHERE verification = 'pending';
-- The scheduler's answer links a trigger's candidates to their verify job.
CREATE INDEX product_events_verify_trigger ON product_events (verify_trigger)
    WHERE verify_trigger IS NOT NULL;
-- A job's candidates (its refreshed counters) and a source's (trawl changes, the API's counts):
-- a small share of the events, so small indexes.
CREATE INDEX product_events_candidates_of_job ON product_events (job_id)
    WHERE verification IS NOT NULL;
CREATE INDEX product_events_candidates_of_source ON product_events (source)
    WHERE verification IS NOT NULL;

-- The outbox holds only what is to be published: a pending, cancelled or unknown candidate never
-- is.
DROP INDEX product_events_unpublished;
CREATE INDEX product_events_unpublished ON product_events (id)
    WHERE published_at IS NULL AND (verification IS NULL OR verification = 'confirmed');

-- A verify job runs beside the source's crawl (it is small, partial, and must not wait for the
-- crawl that found the candidates): the one-running-job rule is for the other kinds.
DROP INDEX jobs_one_running;
CREATE UNIQUE INDEX jobs_one_running ON jobs (source) WHERE status = 'running' AND kind <> 'verify';
