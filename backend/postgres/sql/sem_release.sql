-- Frees semaphore key $1's slot of run $2 with token $3 if that holder is
-- live and not yet released, and wakes the waiters listening on channel
-- $4 when the transaction commits. With a minimum hold of $5 microseconds
-- not yet over, the holder instead stays live until its grant plus the
-- minimum, marked released so that it cannot renew. The row's expires_at
-- becomes the latest remaining holder's expiry, or '-infinity' when none
-- is left: the key is then free for any limit. No row returned means the
-- slot was already lost.
WITH clock AS MATERIALIZED (
    SELECT (extract(epoch FROM now()) * 1000000)::bigint AS us
), released AS (
    UPDATE {{table}} AS l
    SET (expires_at, info) = (
        SELECT coalesce(timestamptz 'epoch' + max((x ->> 'exp')::bigint) * interval '1 microsecond', '-infinity'),
            jsonb_set(l.info::jsonb, '{holders}', coalesce(jsonb_agg(x ORDER BY (x ->> 'token')::bigint), '[]'))::text
        FROM (
            SELECT CASE WHEN e ->> 'run' <> $2 OR (e ->> 'token')::bigint <> $3 THEN e
                        WHEN (e ->> 'granted')::bigint + $5::bigint > clock.us
                        THEN e || jsonb_build_object('exp', (e ->> 'granted')::bigint + $5::bigint, 'released', true)
                   END AS x
            FROM jsonb_array_elements(l.info::jsonb -> 'holders') AS e
            WHERE (e ->> 'exp')::bigint > clock.us
        ) kept
        WHERE x IS NOT NULL)
    FROM clock
    WHERE l.key = $1 AND l.run_id = '' AND l.expires_at > now()
        AND EXISTS (SELECT FROM jsonb_array_elements(l.info::jsonb -> 'holders') AS e
                    WHERE e ->> 'run' = $2 AND (e ->> 'token')::bigint = $3
                        AND (e ->> 'exp')::bigint > clock.us AND e -> 'released' IS NULL)
    RETURNING l.key
)
SELECT pg_notify($4, '') FROM released
