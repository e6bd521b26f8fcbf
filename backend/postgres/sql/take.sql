-- Takes key $1 for holder $2, run $3, for $4 microseconds, recording the
-- holder's info $5, if its row is free or expired by the server's clock,
-- and issues the next fencing token as acquire.sql does. It is the front
-- waiter's try once a release has woken it (see wait.go), when the row
-- is known to exist: acquire.sql's part that a hand-off needs, one plain
-- UPDATE, which the server plans and runs in about half acquire.sql's
-- time. Returns the token and the server's clock in microseconds; no row
-- when the lock is not free (or the row is gone), for the caller to ask
-- acquire.sql, which tells who holds it.
UPDATE {{table}}
SET token       = greatest(token + 1, 1, (extract(epoch FROM now()) * 1000000)::bigint),
    holder      = $2,
    run_id      = $3,
    expires_at  = now() + $4::bigint * interval '1 microsecond',
    granted_at  = now(),
    renewed_at  = now(),
    info        = $5,
    released_at = NULL
WHERE key = $1 AND expires_at <= now()
RETURNING token, (extract(epoch FROM now()) * 1000000)::bigint
