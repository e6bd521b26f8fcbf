-- Takes key $1 for holder $2, run $3, for $4 microseconds, recording the
-- holder's info $5, when the row is
-- new, free or expired by the server's clock, and issues the next fencing
-- token in the same statement: one more than the last, and never less than
-- the server's clock in microseconds, so that a restored backup or a
-- re-created table cannot hand out a token again.
--
-- A live row of run $3 itself is a retry whose first reply was lost: it
-- keeps its token, and its lease restarts at this statement, since the
-- caller counts the lease from the retry's send time.
--
-- Returns the row as it now is, and whether this statement wrote it: ours
-- when taken, else the holder with its microseconds left; last, the
-- server's clock in microseconds, which the caller compares with its own. When the
-- statement's snapshot already shows another run's live lease nothing is
-- written or locked, so a crowd of waiters woken by one release costs
-- reads, not a convoy of row locks and commits. When the snapshot shows
-- the lock free (or ours) but a concurrent statement changes it first, the
-- upsert's WHERE fails on the newer row and the stale row is returned, not
-- taken: the caller asks again.
--
-- now() is the statement's start on the server, later than the moment the
-- client sent it: leases last at least their TTL from the client's send
-- time. That holds only outside a transaction block, where a statement is
-- its own transaction.
WITH snapshot AS (
    SELECT token, holder, run_id, expires_at FROM {{table}} WHERE key = $1
), taken AS (
    INSERT INTO {{table}} AS l (key, token, holder, run_id, expires_at, granted_at, renewed_at, info, released_at)
    SELECT $1, greatest(1, (extract(epoch FROM now()) * 1000000)::bigint), $2, $3,
           now() + $4::bigint * interval '1 microsecond', now(), now(), $5, NULL
    WHERE NOT EXISTS (SELECT FROM snapshot WHERE expires_at > now() AND run_id <> $3)
    ON CONFLICT (key) DO UPDATE SET
        token      = CASE WHEN l.run_id = excluded.run_id AND l.expires_at > now() THEN l.token
                          ELSE greatest(l.token + 1, excluded.token) END,
        holder     = excluded.holder,
        run_id     = excluded.run_id,
        expires_at = excluded.expires_at,
        granted_at = CASE WHEN l.run_id = excluded.run_id AND l.expires_at > now() THEN l.granted_at
                          ELSE excluded.granted_at END,
        renewed_at = excluded.renewed_at,
        info       = excluded.info,
        released_at = NULL
    WHERE l.expires_at <= now() OR (l.run_id = excluded.run_id AND l.released_at IS NULL)
    RETURNING token, holder, run_id, expires_at
), lock_row AS (
    SELECT *, true AS ours FROM taken
    UNION ALL
    SELECT *, false FROM snapshot WHERE NOT EXISTS (SELECT FROM taken)
)
SELECT token, holder, run_id,
    (extract(epoch FROM greatest(expires_at, now()) - now()) * 1000000)::bigint,
    ours,
    (extract(epoch FROM now()) * 1000000)::bigint
FROM lock_row
