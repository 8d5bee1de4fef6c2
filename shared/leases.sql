-- Leadership leases (migrations/0017_leases.sql). Only shared/leases.py runs them. Expiry is
-- judged by the database's clock alone, so the replicas' clocks need not agree.

-- name: claim
-- Take the lease when it is free or expired, or renew it when this holder has it; a row comes
-- back only then. $3: the lease's length in seconds.
INSERT INTO leases (scope, holder, expires_at)
VALUES ($1, $2, now() + make_interval(secs => $3))
ON CONFLICT (scope) DO UPDATE SET holder = EXCLUDED.holder, expires_at = EXCLUDED.expires_at
WHERE leases.holder = EXCLUDED.holder OR leases.expires_at < now()
RETURNING holder

-- name: release
DELETE FROM leases WHERE scope = $1 AND holder = $2
