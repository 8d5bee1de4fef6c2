-- A parse result can overtake its fetch result (they travel on different consumers). The entry
-- remembers that its parse result is in, and closes once the fetch result is applied too.
ALTER TABLE entries ADD COLUMN parsed boolean NOT NULL DEFAULT false;
