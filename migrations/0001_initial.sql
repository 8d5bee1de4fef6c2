-- trawl: initial schema. Owners: the scheduler writes sources..proxies, the fetcher records
-- payload metadata, the refresher writes products, snapshots and its bookkeeping.

CREATE TABLE sources (
    name        text PRIMARY KEY,
    definition  jsonb NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now(),
    updated_at  timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE jobs (
    id            bigserial PRIMARY KEY,
    source        text NOT NULL REFERENCES sources (name),
    kind          text NOT NULL DEFAULT 'discovery',
    status        text NOT NULL DEFAULT 'running',   -- running | completed | cancelled
    priority      int,
    keywords      text[] NOT NULL DEFAULT '{}',
    requested_by  text,
    definition    jsonb NOT NULL,                  -- the source as it was when the job started
    paused        boolean NOT NULL DEFAULT false,
    event_published boolean NOT NULL DEFAULT false, -- the final event went out (at-least-once)
    created_at    timestamptz NOT NULL DEFAULT now(),
    finished_at   timestamptz,
    counters      jsonb NOT NULL DEFAULT '{}'
);
-- At most one running job per source.
CREATE UNIQUE INDEX jobs_one_running ON jobs (source) WHERE status = 'running';
CREATE INDEX jobs_created ON jobs (created_at DESC);

-- Triggers already handled (request path and stream path see the same trigger).
CREATE TABLE triggers (
    digest      text PRIMARY KEY,
    job_id      bigint REFERENCES jobs (id),
    created_at  timestamptz NOT NULL DEFAULT now()
);

-- Per-domain pacing state (host[:port]).
CREATE TABLE domains (
    domain           text PRIMARY KEY,
    max_in_flight    int NOT NULL DEFAULT 1,
    min_delay        double precision NOT NULL DEFAULT 5,
    max_delay        double precision NOT NULL DEFAULT 15,
    crawl_delay      double precision,
    backoff          double precision NOT NULL DEFAULT 1,  -- adaptive factor, >= 1
    in_flight        int NOT NULL DEFAULT 0,
    next_allowed_at  timestamptz NOT NULL DEFAULT now(),
    paused           boolean NOT NULL DEFAULT false,
    updated_at       timestamptz NOT NULL DEFAULT now()
);

-- The frontier: one row per (job, canonical url); attempts hold the history.
CREATE TABLE entries (
    id            bigserial PRIMARY KEY,
    job_id        bigint NOT NULL REFERENCES jobs (id),
    url           text NOT NULL,
    domain        text NOT NULL,
    kind          text NOT NULL DEFAULT 'page',
    depth         int NOT NULL DEFAULT 0,
    keyword       text,
    priority      int NOT NULL,
    -- Static rank: priority minus aging already credited at insert (see docs/architecture.md);
    -- ordering by it equals ordering by aged priority, so the dispatch index stays usable.
    rank          double precision NOT NULL,
    tiebreak      double precision NOT NULL DEFAULT random(),
    state         text NOT NULL DEFAULT 'pending', -- pending|waiting|dispatched|fetched|done|failed|cancelled
    attempts      int NOT NULL DEFAULT 0,
    not_before    timestamptz,
    dispatched_at timestamptz,
    last_outcome  text,
    last_status   int,
    has_product   boolean NOT NULL DEFAULT false,
    parse_error   text,                           -- the page could not be parsed (recorded)
    etag          text,
    last_modified text,
    created_at    timestamptz NOT NULL DEFAULT now(),
    updated_at    timestamptz NOT NULL DEFAULT now(),
    UNIQUE (job_id, url)
);
CREATE INDEX entries_dispatch ON entries (domain, rank DESC, tiebreak) WHERE state = 'pending';
CREATE INDEX entries_waiting ON entries (not_before) WHERE state = 'waiting';
CREATE INDEX entries_inflight ON entries (dispatched_at) WHERE state IN ('dispatched', 'fetched');
CREATE INDEX entries_job_state ON entries (job_id, state);

CREATE TABLE attempts (
    attempt_id   text PRIMARY KEY,                 -- "<entry_id>.<n>"
    entry_id     bigint NOT NULL REFERENCES entries (id),
    job_id       bigint NOT NULL,
    url          text NOT NULL,
    outcome      text NOT NULL,
    status       int,
    error        text,
    started_at   timestamptz,
    elapsed_ms   double precision,
    payload_ref  text,
    proxy        text,
    fingerprint  text,
    retry_after  double precision,
    recorded_at  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX attempts_entry ON attempts (entry_id);
CREATE INDEX attempts_job ON attempts (job_id);

CREATE TABLE schedules (
    id           bigserial PRIMARY KEY,
    source       text NOT NULL REFERENCES sources (name),
    spec         text NOT NULL,
    kind         text NOT NULL DEFAULT 'refresh',
    enabled      boolean NOT NULL DEFAULT true,
    next_run_at  timestamptz NOT NULL,
    last_run_at  timestamptz,
    last_job_id  bigint,
    last_error   text,
    created_at   timestamptz NOT NULL DEFAULT now(),
    UNIQUE (source, spec, kind)
);
CREATE INDEX schedules_due ON schedules (next_run_at) WHERE enabled;

CREATE TABLE payloads (
    ref           text NOT NULL,                   -- store reference (content address)
    url           text NOT NULL,
    job_id        bigint,
    attempt_id    text NOT NULL,
    status        int,
    content_type  text,
    size          int NOT NULL,
    stored_size   int,
    sha256        text NOT NULL,
    fetched_at    timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (attempt_id)
);
CREATE INDEX payloads_url ON payloads (url, fetched_at DESC);

CREATE TABLE products (
    source              text NOT NULL,
    key                 text NOT NULL,
    sku                 text,
    gtin                text,
    mpn                 text,
    name                text,
    brand               text,
    price               numeric,
    sale_price          numeric,
    currency            text,
    availability        text,
    url                 text,
    image               text,
    consecutive_misses  int NOT NULL DEFAULT 0,
    delisted_at         timestamptz,
    first_seen_at       timestamptz NOT NULL DEFAULT now(),
    last_seen_at        timestamptz NOT NULL DEFAULT now(),
    last_seen_job       bigint,
    updated_at          timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (source, key)
);
CREATE INDEX products_url ON products (source, url);

CREATE TABLE snapshots (
    id            bigserial PRIMARY KEY,
    source        text NOT NULL,
    key           text NOT NULL,
    job_id        bigint,
    price         numeric,
    sale_price    numeric,
    currency      text,
    availability  text,
    observed_at   timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX snapshots_product ON snapshots (source, key, observed_at);

-- Refresher bookkeeping: which parse results of a job were applied (idempotency + completeness).
CREATE TABLE applied_results (
    attempt_id   text PRIMARY KEY,
    job_id       bigint NOT NULL,
    source       text NOT NULL,
    product_key  text,
    not_modified_url text,
    applied_at   timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX applied_results_job ON applied_results (job_id);

-- Jobs whose misses were counted (so a redelivered completion counts nothing twice).
CREATE TABLE miss_counts (
    job_id     bigint PRIMARY KEY,
    source     text NOT NULL,
    counted    boolean NOT NULL,
    reason     text,
    seen       int NOT NULL DEFAULT 0,
    missed     int NOT NULL DEFAULT 0,
    delisted   int NOT NULL DEFAULT 0,
    counted_at timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE proxies (
    id                    bigserial PRIMARY KEY,
    url                   text NOT NULL UNIQUE,   -- may hold credentials: never logged or sent
    active                boolean NOT NULL DEFAULT true,
    consecutive_failures  int NOT NULL DEFAULT 0,
    successes             bigint NOT NULL DEFAULT 0,
    failures              bigint NOT NULL DEFAULT 0,
    last_error            text,
    last_used_at          timestamptz,
    created_at            timestamptz NOT NULL DEFAULT now()
);
