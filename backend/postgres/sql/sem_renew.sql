-- Extends semaphore key $1's holder of run $2 and token $3 by $4
-- microseconds from now, only while that holder is live and not released
-- into its minimum hold (see sem_acquire.sql for the row's layout). The
-- row's expires_at follows the latest holder; holders already expired are
-- dropped. The UPDATE evaluates its condition and the new holders on the
-- row's latest version, locked. No row updated means the slot is lost:
-- released, broken, expired or taken over.
WITH clock AS MATERIALIZED (
    SELECT (extract(epoch FROM now()) * 1000000)::bigint AS us
)
UPDATE {{table}} AS l
SET expires_at = greatest(l.expires_at, now() + $4::bigint * interval '1 microsecond'),
    info = jsonb_set(l.info::jsonb, '{holders}', (
        SELECT jsonb_agg(CASE WHEN e ->> 'run' = $2 AND (e ->> 'token')::bigint = $3
                              THEN e || jsonb_build_object('exp', clock.us + $4::bigint, 'renewed', clock.us)
                              ELSE e END
                         ORDER BY (e ->> 'token')::bigint)
        FROM jsonb_array_elements(l.info::jsonb -> 'holders') AS e
        WHERE (e ->> 'exp')::bigint > clock.us))::text
FROM clock
WHERE l.key = $1 AND l.run_id = '' AND l.expires_at > now()
    AND EXISTS (SELECT FROM jsonb_array_elements(l.info::jsonb -> 'holders') AS e
                WHERE e ->> 'run' = $2 AND (e ->> 'token')::bigint = $3
                    AND (e ->> 'exp')::bigint > clock.us AND e -> 'released' IS NULL)
