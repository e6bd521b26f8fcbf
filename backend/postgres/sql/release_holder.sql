-- Breaks the holder of key $1 whose token is $2, whoever it is, and wakes
-- the waiters listening on channel $3: a plain lock's holder when the
-- token is its own (the row is freed, keeping the token), or one live
-- holder of a semaphore (its slot is removed at once, minimum hold or
-- not, and the row's expires_at becomes the latest remaining holder's;
-- see sem_acquire.sql for the layout). The broken holder's next renewal
-- finds its lease gone. No row returned means no live holder has that
-- token.
WITH clock AS MATERIALIZED (
    SELECT jsonb_build_object('token', $2::bigint, 'now', (extract(epoch FROM now()) * 1000000)::bigint) AS v
), broken AS (
    UPDATE {{table}} AS l
    SET (expires_at, info) = (
        SELECT CASE WHEN l.run_id <> '' THEN '-infinity'
                    ELSE coalesce((SELECT timestamptz 'epoch' + max(x::bigint) * interval '1 microsecond'
                                   FROM jsonb_path_query(k.holders, '$[*].exp') AS x), '-infinity') END,
            CASE WHEN l.run_id <> '' THEN l.info ELSE jsonb_set(l.info::jsonb, '{holders}', k.holders)::text END
        FROM (SELECT CASE WHEN l.run_id = '' THEN
                     jsonb_path_query_array(l.info::jsonb, '$.holders[*] ? (@.exp > $now && @.token != $token)', clock.v)
                     END AS holders) AS k)
    FROM clock
    WHERE l.key = $1 AND l.expires_at > now()
        AND (l.run_id <> '' AND l.token = $2
             OR l.run_id = '' AND jsonb_path_exists(l.info::jsonb, '$.holders[*] ? (@.token == $token && @.exp > $now)', clock.v))
    RETURNING l.key
)
SELECT pg_notify($3, '') FROM broken
