-- Per-URL memory across jobs of a source: validators for conditional requests and the last
-- stored payload (a 304 is parsed from it, so its links are still discovered).
CREATE TABLE url_state (
    source          text NOT NULL,
    url             text NOT NULL,
    etag            text,
    last_modified   text,
    payload_ref     text,
    content_type    text,
    updated_at      timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (source, url)
);
