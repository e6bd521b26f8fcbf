-- Frees semaphore key $1's slot of run $2 with token $3 if that holder is
-- live and not yet released, and wakes the waiters listening on channel
-- $4 when the transaction commits. With a minimum hold of $5 microseconds
-- not yet over, the holder instead stays live until its grant plus the
-- minimum, marked released so that it cannot renew. A holder revoked by
-- revoke.sql (its run marked ' revoked') is freed at once, minimum hold
-- or not, and the statement says so. Holders already expired are
-- dropped. The row's expires_at becomes the latest remaining holder's
-- expiry, or '-infinity' when none is left: the key is then free for any
-- limit. The row is locked FOR UPDATE first, so the holder found in it and
-- the UPDATE, which evaluates its condition and the new holders on the
-- row's latest version, see the same holders (see sem_acquire.sql for the
-- layout). Last, whether someone is in the key's waiting line (its front
-- lock $6), as in release.sql. No row returned means the slot was already lost.
WITH clock AS MATERIALIZED (
    SELECT c.us, jsonb_build_object('run', $2::text, 'revoked', $2::text || ' revoked', 'token', $3::bigint, 'now', c.us) AS v
    FROM (SELECT (extract(epoch FROM now()) * 1000000)::bigint AS us) AS c
), cur AS MATERIALIZED (
    SELECT l.info FROM {{table}} AS l WHERE l.key = $1 AND l.run_id = '' AND l.expires_at > now()
    FOR UPDATE OF l
), own AS MATERIALIZED (
    SELECT jsonb_path_query_first(cur.info::jsonb,
        '$.holders[*] ? ((@.run == $run || @.run == $revoked) && @.token == $token && @.exp > $now && !(exists(@.released)))',
        clock.v) AS e
    FROM cur, clock
), released AS (
    UPDATE {{table}} AS l
    SET (expires_at, info) = (
        SELECT coalesce((SELECT timestamptz 'epoch' + max(x::bigint) * interval '1 microsecond'
                         FROM jsonb_path_query(k.holders, '$[*].exp') AS x), '-infinity'),
            jsonb_set(l.info::jsonb, '{holders}', k.holders)::text
        FROM (
            SELECT jsonb_path_query_array(l.info::jsonb,
                    '$.holders[*] ? (@.exp > $now && !((@.run == $run || @.run == $revoked) && @.token == $token))', clock.v)
                || CASE WHEN o.e ->> 'run' = $2::text AND (o.e ->> 'granted')::bigint + $5::bigint > clock.us
                        THEN jsonb_build_array(o.e || jsonb_build_object('exp', (o.e ->> 'granted')::bigint + $5::bigint, 'released', true))
                        ELSE '[]' END AS holders
        ) AS k)
    FROM clock, own AS o
    WHERE l.key = $1 AND l.run_id = '' AND l.expires_at > now() AND o.e IS NOT NULL
    RETURNING o.e ->> 'run' <> $2::text AS revoked
)
SELECT revoked, pg_notify($4, '')::text, NOT pg_try_advisory_xact_lock($6::bigint) FROM released
