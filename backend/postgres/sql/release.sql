-- Frees key $1 if run $2 with token $3 still holds it, and wakes the
-- waiters listening on channel $4 when the transaction commits. With a
-- minimum hold of $5 microseconds not yet over, the row instead stays live
-- until granted_at plus the minimum on the server's clock (token and run
-- unchanged), marked released so that it cannot renew; the waiters are
-- woken all the same, to wait for that time. A holder revoked by
-- revoke.sql (its run id marked ' revoked') is freed at once, minimum
-- hold or not, and the statement says so. Last, whether someone is in
-- the key's waiting line: the front waiter holds advisory lock $6 (see
-- awaitFront in next.go); when no one does, this transaction holds it for
-- its few microseconds. No row returned means the lease was already lost.
WITH released AS (
    UPDATE {{table}}
    SET expires_at = CASE WHEN run_id = $2::text AND granted_at + $5::bigint * interval '1 microsecond' > now()
                          THEN granted_at + $5::bigint * interval '1 microsecond'
                          ELSE '-infinity' END,
        released_at = now()
    WHERE key = $1 AND run_id IN ($2::text, $2::text || ' revoked') AND token = $3 AND expires_at > now()
        AND released_at IS NULL
    RETURNING run_id <> $2::text AS revoked
)
SELECT revoked, pg_notify($4, '')::text, NOT pg_try_advisory_xact_lock($6::bigint) FROM released
