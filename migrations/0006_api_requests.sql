-- API sources: an entry may be one page of a JSON/GraphQL listing. Several pages can share a
-- URL (a GraphQL endpoint takes its page in the POST body), so an entry is identified by
-- (job, url, request_key): '' for a plain GET (the URL says it all), else a hash of the
-- method and body. `request` is the ApiRequest to send (method, body, headers, page state).
ALTER TABLE entries ADD COLUMN request jsonb;
ALTER TABLE entries ADD COLUMN request_key text NOT NULL DEFAULT '';
CREATE UNIQUE INDEX entries_job_url_request ON entries (job_id, url, request_key);
ALTER TABLE entries DROP CONSTRAINT entries_job_id_url_key;

-- An API page holds many products: the job's "products" counter sums this (has_product stays
-- for HTML pages and older rows; the counter takes the larger of the two).
ALTER TABLE entries ADD COLUMN product_count int NOT NULL DEFAULT 0;

-- Units in stock per product (per variant when the source expands variants), when known.
ALTER TABLE products ADD COLUMN stock int;
