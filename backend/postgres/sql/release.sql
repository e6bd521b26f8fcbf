-- Frees key $1 if run $2 with token $3 still holds it, and wakes the
-- waiters listening on channel $4 when the transaction commits. No row
-- returned means the lease was already lost.
WITH released AS (
    UPDATE {{table}}
    SET expires_at = '-infinity'
    WHERE key = $1 AND run_id = $2 AND token = $3 AND expires_at > now()
    RETURNING key
)
SELECT pg_notify($4, '') FROM released
