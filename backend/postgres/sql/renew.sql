-- Extends key $1 by $4 microseconds from now, only for run $2 with token $3
-- and only while its lease has not expired by the server's clock nor been
-- released into its minimum hold. No row updated means the lease is lost:
-- released, broken, expired or taken over.
UPDATE {{table}}
SET expires_at = now() + $4::bigint * interval '1 microsecond', renewed_at = now()
WHERE key = $1 AND run_id = $2 AND token = $3 AND expires_at > now() AND released_at IS NULL
