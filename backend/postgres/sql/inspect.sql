-- The state of key $1 by the server's clock: last token, holder, run,
-- whether the lease is live, its microseconds left, and the holder's
-- record.
SELECT token, holder, run_id, expires_at > now(),
    (extract(epoch FROM greatest(expires_at, now()) - now()) * 1000000)::bigint,
    granted_at, renewed_at, info
FROM {{table}}
WHERE key = $1
