-- Frees key $1 whoever holds it, keeping the token, and wakes the waiters
-- listening on channel $2. The holder's next renewal finds its lease gone.
WITH released AS (
    UPDATE {{table}}
    SET expires_at = '-infinity'
    WHERE key = $1 AND expires_at > now()
    RETURNING key
)
SELECT pg_notify($2, '') FROM released
