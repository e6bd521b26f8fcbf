-- Takes key $1 for holder $2, run $3, for $4 microseconds when the row is
-- new, free or expired by the server's clock, and issues the next fencing
-- token in the same statement: one more than the last, and never less than
-- the server's clock in microseconds, so that a restored backup or a
-- re-created table cannot hand out a token again.
--
-- Returns the row as it now is: ours when taken, else the holder with its
-- microseconds left. When the statement's snapshot already shows a live
-- holder nothing is written or locked, so a crowd of waiters woken by one
-- release costs reads, not a convoy of row locks and commits. When the
-- snapshot shows the lock free but a concurrent statement takes it first,
-- the upsert's WHERE fails on the newer row and the stale row is returned:
-- the caller sees a lock that is neither ours nor live, and asks again.
--
-- now() is the statement's start on the server, later than the moment the
-- client sent it: leases last at least their TTL from the client's send
-- time.
WITH snapshot AS (
    SELECT token, holder, run_id, expires_at FROM {{table}} WHERE key = $1
), taken AS (
    INSERT INTO {{table}} AS l (key, token, holder, run_id, expires_at)
    SELECT $1, greatest(1, (extract(epoch FROM now()) * 1000000)::bigint), $2, $3,
           now() + $4::bigint * interval '1 microsecond'
    WHERE NOT EXISTS (SELECT FROM snapshot WHERE expires_at > now())
    ON CONFLICT (key) DO UPDATE SET
        token      = greatest(l.token + 1, excluded.token),
        holder     = excluded.holder,
        run_id     = excluded.run_id,
        expires_at = excluded.expires_at
    WHERE l.expires_at <= now()
    RETURNING token, holder, run_id, expires_at
)
SELECT token, holder, run_id,
    (extract(epoch FROM greatest(expires_at, now()) - now()) * 1000000)::bigint
FROM (SELECT * FROM taken UNION ALL SELECT * FROM snapshot WHERE NOT EXISTS (SELECT FROM taken)) AS lock_row
