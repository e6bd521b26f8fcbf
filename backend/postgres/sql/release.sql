-- Frees key $1 if run $2 with token $3 still holds it, and wakes the
-- waiters listening on channel $4 when the transaction commits. With a
-- minimum hold of $5 microseconds not yet over, the row instead stays live
-- until granted_at plus the minimum on the server's clock (token and run
-- unchanged), marked released so that it cannot renew; the waiters are
-- woken all the same, to wait for that time. No row returned means the
-- lease was already lost.
WITH released AS (
    UPDATE {{table}}
    SET expires_at = CASE WHEN granted_at + $5::bigint * interval '1 microsecond' > now()
                          THEN granted_at + $5::bigint * interval '1 microsecond'
                          ELSE '-infinity' END,
        released_at = now()
    WHERE key = $1 AND run_id = $2 AND token = $3 AND expires_at > now() AND released_at IS NULL
    RETURNING key
)
SELECT pg_notify($4, '') FROM released
