-- Revokes key $1's live holder whose token is $2, or every live holder
-- when $2 is 0, keeping its record, token and expiry: the holder's run id
-- gets the suffix ' revoked' (a plain lock's run_id column, or the "run"
-- of its entry in a semaphore's holders; see sem_acquire.sql). Run ids
-- have no blanks, so the marked one is nobody's: the holder's next
-- renewal, an older lockrun's too, no longer matches and fails, while the
-- lock or slot stays taken until the holder releases (release.sql and
-- sem_release.sql accept the marked run id and then free it at once) or
-- its lease ends. A holder already revoked stays as it is. Nothing is
-- freed, so no waiter is woken. The UPDATE evaluates its condition and
-- the new holders on the row's latest version, locked. Returns the number
-- of rows changed: 0 means no live holder has that token (or none at all).
WITH clock AS MATERIALIZED (
    SELECT c.us, jsonb_build_object('token', $2::bigint, 'now', c.us) AS v
    FROM (SELECT (extract(epoch FROM now()) * 1000000)::bigint AS us) AS c
), revoked AS (
    UPDATE {{table}} AS l
    SET run_id = CASE WHEN l.run_id = '' OR position(' ' IN l.run_id) > 0 THEN l.run_id
                      ELSE l.run_id || ' revoked' END,
        info = CASE WHEN l.run_id <> '' THEN l.info ELSE jsonb_set(l.info::jsonb, '{holders}', (
            SELECT coalesce(jsonb_agg(
                       CASE WHEN (e ->> 'exp')::bigint > clock.us
                                 AND ($2::bigint = 0 OR (e ->> 'token')::bigint = $2::bigint)
                                 AND position(' ' IN e ->> 'run') = 0
                            THEN e || jsonb_build_object('run', (e ->> 'run') || ' revoked')
                            ELSE e END ORDER BY i), '[]')
            FROM jsonb_array_elements(l.info::jsonb -> 'holders') WITH ORDINALITY AS h(e, i)))::text END
    FROM clock
    WHERE l.key = $1 AND l.expires_at > now()
        AND ($2::bigint = 0
             OR l.run_id <> '' AND l.token = $2::bigint
             OR l.run_id = '' AND jsonb_path_exists(l.info::jsonb, '$.holders[*] ? (@.token == $token && @.exp > $now)', clock.v))
    RETURNING l.key
)
SELECT count(*) FROM revoked
