-- Product change events (issue 18): one row per real change, written by the refresher in the
-- transaction that applies the sighting (or counts the misses) behind it, and published to
-- <ns>.events.product.<source>.<kind> after the commit (an outbox: published_at stays NULL until
-- the stream acknowledged it, and a periodic sweep publishes what a crash left behind).
--
-- The unique key is the idempotency key: one event per product, variant, job and kind, however
-- often the result behind it is delivered, by however many replicas, or replayed.
CREATE TABLE product_events (
    id bigserial PRIMARY KEY,
    source text NOT NULL,
    key text NOT NULL,
    variant text NOT NULL DEFAULT '',
    gtin text,  -- the product's (or variant's) GTIN when known: alert rules can name one
    job_id bigint NOT NULL,
    kind text NOT NULL,
    url text,
    before jsonb,
    after jsonb NOT NULL,
    direction text,
    percent double precision,
    at timestamptz NOT NULL DEFAULT now(),
    published_at timestamptz,
    UNIQUE (source, key, variant, job_id, kind)
);
-- `trawl changes SOURCE` and /api/changes page by id within a source.
CREATE INDEX product_events_source ON product_events (source, id);
-- The outbox sweep reads only what is not published yet.
CREATE INDEX product_events_unpublished ON product_events (id) WHERE published_at IS NULL;
