-- Dispatch claimed domains by probing the entries index once per domain (10k domains: ~200 ms
-- per cycle). A flag per domain says "may have pending entries": set whenever entries become
-- pending, cleared when a claim finds the domain dry, and re-checked by a slow sweep.
ALTER TABLE domains ADD COLUMN has_pending boolean NOT NULL DEFAULT false;
UPDATE domains d SET has_pending = EXISTS (
    SELECT 1 FROM entries e WHERE e.domain = d.domain AND e.state = 'pending');
CREATE INDEX domains_ready ON domains (next_allowed_at) WHERE has_pending AND NOT paused;
