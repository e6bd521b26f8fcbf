-- The write side of fencing in SQL: each row remembers the token of the
-- last writer, and a writer with an older token changes nothing and FAILS
-- (psql exits 3), so that a stale run cannot mistake "INSERT 0 0" for
-- success.
--   psql -v ON_ERROR_STOP=1 -v token="$LOCKRUN_FENCING_TOKEN" -f postgres.sql
\set ON_ERROR_STOP on
CREATE TABLE IF NOT EXISTS report (day date PRIMARY KEY, total bigint, fence bigint NOT NULL);
WITH written AS (
    INSERT INTO report AS r (day, total, fence) VALUES (current_date, 42, :token)
    ON CONFLICT (day) DO UPDATE SET total = excluded.total, fence = excluded.fence
    WHERE r.fence <= excluded.fence
    RETURNING 1
)
SELECT set_config('fence.written', count(*)::text, false), set_config('fence.token', :'token', false)
FROM written;
DO $$
BEGIN
    IF current_setting('fence.written') = '0' THEN
        RAISE EXCEPTION 'fenced out: token % is older than the last writer''s; nothing written',
            current_setting('fence.token');
    END IF;
END $$;
