-- Leadership of cluster-wide periodic tasks (shared/leases.py): one row per scope, held by one
-- replica until `expires_at`. It replaces a session advisory lock, which a pooler in transaction
-- mode (PgBouncer) would release at the end of every transaction. The holder renews the lease
-- well before it expires; a replica that dies stops renewing, and another takes the row over
-- once it has expired. A replica that stops cleanly deletes its row, so the takeover is at once.
CREATE TABLE leases (
    scope      text PRIMARY KEY,
    holder     text NOT NULL,
    expires_at timestamptz NOT NULL
);
