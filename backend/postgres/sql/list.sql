-- The live leases of the keys that start with $1, as inspect.sql reads
-- one. left() rather than LIKE: '_' is a key character and a LIKE
-- wildcard.
SELECT key, token, holder, run_id, true,
    (extract(epoch FROM greatest(expires_at, now()) - now()) * 1000000)::bigint,
    granted_at, renewed_at, info, (extract(epoch FROM now()) * 1000000)::bigint
FROM {{table}}
WHERE left(key, length($1)) = $1 AND expires_at > now()
