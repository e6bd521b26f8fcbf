-- Extends semaphore key $1's holder of run $2 and token $3 by $4
-- microseconds from now, only while that holder is live and not released
-- into its minimum hold (see sem_acquire.sql for the row's layout). The
-- row's expires_at follows the latest holder; holders already expired are
-- dropped. The UPDATE evaluates its condition and the new holders on the
-- row's latest version, locked. No row updated means the slot is lost:
-- released, broken, expired or taken over.
WITH clock AS MATERIALIZED (
    SELECT c.us, jsonb_build_object('run', $2::text, 'token', $3::bigint, 'now', c.us) AS v
    FROM (SELECT (extract(epoch FROM now()) * 1000000)::bigint AS us) AS c
)
UPDATE {{table}} AS l
SET expires_at = greatest(l.expires_at, now() + $4::bigint * interval '1 microsecond'),
    info = jsonb_set(l.info::jsonb, '{holders}',
        jsonb_path_query_array(l.info::jsonb, '$.holders[*] ? (@.exp > $now && !(@.run == $run && @.token == $token))', clock.v)
        || (jsonb_path_query_first(l.info::jsonb, '$.holders[*] ? (@.run == $run && @.token == $token)', clock.v)
            || jsonb_build_object('exp', clock.us + $4::bigint, 'renewed', clock.us)))::text
FROM clock
WHERE l.key = $1 AND l.run_id = '' AND l.expires_at > now()
    AND jsonb_path_exists(l.info::jsonb,
        '$.holders[*] ? (@.run == $run && @.token == $token && @.exp > $now && !(exists(@.released)))', clock.v)
