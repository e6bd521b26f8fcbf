-- The state of key $1 by the server's clock: last token, holder, run,
-- whether the lease is live, its microseconds left, the holder's record
-- (a semaphore's holders: see sem_acquire.sql), and the server's clock in
-- microseconds, by which a semaphore's holders are live or not.
SELECT token, holder, run_id, expires_at > now(),
    (extract(epoch FROM greatest(expires_at, now()) - now()) * 1000000)::bigint,
    granted_at, renewed_at, info, (extract(epoch FROM now()) * 1000000)::bigint
FROM {{table}}
WHERE key = $1
