-- The trace context an entry was admitted under: a seed's dispatch continues the trigger's
-- trace; a discovered page's dispatch starts its own trace, linked to the page that found it.
ALTER TABLE entries ADD COLUMN traceparent text;
