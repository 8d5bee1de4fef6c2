-- A job whose trigger named its own seeds or keywords crawls part of the catalog: products out
-- of its reach were never asked for, so its end must not count them as missed. A trigger for
-- the whole source that joins such a running job widens it, and clears the mark.
ALTER TABLE jobs ADD COLUMN partial boolean NOT NULL DEFAULT false;
