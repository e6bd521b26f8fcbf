-- Frees semaphore key $1's slot of run $2 with token $3 if that holder is
-- live and not yet released, and wakes the waiters listening on channel
-- $4 when the transaction commits. With a minimum hold of $5 microseconds
-- not yet over, the holder instead stays live until its grant plus the
-- minimum, marked released so that it cannot renew. Holders already
-- expired are dropped. The row's expires_at becomes the latest remaining
-- holder's expiry, or '-infinity' when none is left: the key is then free
-- for any limit. The UPDATE evaluates its condition and the new holders on
-- the row's latest version, locked (see sem_acquire.sql for the layout).
-- No row returned means the slot was already lost.
WITH clock AS MATERIALIZED (
    SELECT c.us, jsonb_build_object('run', $2::text, 'token', $3::bigint, 'now', c.us) AS v
    FROM (SELECT (extract(epoch FROM now()) * 1000000)::bigint AS us) AS c
), released AS (
    UPDATE {{table}} AS l
    SET (expires_at, info) = (
        SELECT coalesce((SELECT timestamptz 'epoch' + max(x::bigint) * interval '1 microsecond'
                         FROM jsonb_path_query(k.holders, '$[*].exp') AS x), '-infinity'),
            jsonb_set(l.info::jsonb, '{holders}', k.holders)::text
        FROM (
            SELECT jsonb_path_query_array(l.info::jsonb, '$.holders[*] ? (@.exp > $now && !(@.run == $run && @.token == $token))', clock.v)
                || CASE WHEN (o.own ->> 'granted')::bigint + $5::bigint > clock.us
                        THEN jsonb_build_array(o.own || jsonb_build_object('exp', (o.own ->> 'granted')::bigint + $5::bigint, 'released', true))
                        ELSE '[]' END AS holders
            FROM (SELECT jsonb_path_query_first(l.info::jsonb, '$.holders[*] ? (@.run == $run && @.token == $token)', clock.v) AS own) AS o
        ) AS k)
    FROM clock
    WHERE l.key = $1 AND l.run_id = '' AND l.expires_at > now()
        AND jsonb_path_exists(l.info::jsonb,
            '$.holders[*] ? (@.run == $run && @.token == $token && @.exp > $now && !(exists(@.released)))', clock.v)
    RETURNING l.key
)
SELECT pg_notify($4, '') FROM released
