-- Breaks the holder of key $1 whose token is $2, whoever it is, and wakes
-- the waiters listening on channel $3: a plain lock's holder when the
-- token is its own (the row is freed, keeping the token), or one live
-- holder of a semaphore (its slot is removed at once, minimum hold or
-- not; see sem_acquire.sql for the row's layout). The broken holder's next
-- renewal finds its lease gone. No row returned means no live holder has
-- that token.
WITH clock AS MATERIALIZED (
    SELECT (extract(epoch FROM now()) * 1000000)::bigint AS us
), broken AS (
    UPDATE {{table}} AS l
    SET (expires_at, info) = (
        SELECT CASE WHEN l.run_id <> '' THEN '-infinity'
                    ELSE coalesce(timestamptz 'epoch' + max((e ->> 'exp')::bigint) * interval '1 microsecond', '-infinity') END,
            CASE WHEN l.run_id <> '' THEN l.info
                 ELSE jsonb_set(l.info::jsonb, '{holders}', coalesce(jsonb_agg(e ORDER BY (e ->> 'token')::bigint), '[]'))::text END
        FROM jsonb_array_elements(CASE WHEN l.run_id = '' THEN l.info::jsonb -> 'holders' END) AS e
        WHERE (e ->> 'exp')::bigint > clock.us AND (e ->> 'token')::bigint <> $2)
    FROM clock
    WHERE l.key = $1 AND l.expires_at > now()
        AND (l.run_id <> '' AND l.token = $2
             OR l.run_id = '' AND EXISTS (SELECT FROM jsonb_array_elements(l.info::jsonb -> 'holders') AS e
                                          WHERE (e ->> 'token')::bigint = $2 AND (e ->> 'exp')::bigint > clock.us))
    RETURNING l.key
)
SELECT pg_notify($3, '') FROM broken
