-- Three states for a product after a job: seen, not seen (a miss), unknown. A page says nothing
-- about its products when it failed (frontier_job_pages.state = 'failed'), when its parse was not
-- confident (the refresher records the page's URL here instead of a product key), or when,
-- reached as a product page, it parsed without any product (product_count, below).
ALTER TABLE applied_results ADD COLUMN unknown_url text;

-- The scheduler's view gains the page's product count (new columns go last).
CREATE OR REPLACE VIEW frontier_job_pages AS
SELECT job_id, id AS entry_id, url, kind, depth, keyword, request, request_key,
       id || '.' || attempts AS attempt_id, state, last_outcome, parse_error, product_count
FROM entries;
