-- The write side of fencing in SQL: each row remembers the token of the
-- last writer, and a writer with an older token changes nothing.
--   psql -v token="$LOCKRUN_FENCING_TOKEN" -f postgres.sql
CREATE TABLE IF NOT EXISTS report (day date PRIMARY KEY, total bigint, fence bigint NOT NULL);
INSERT INTO report AS r (day, total, fence) VALUES (current_date, 42, :token)
ON CONFLICT (day) DO UPDATE SET total = excluded.total, fence = excluded.fence
WHERE r.fence <= excluded.fence;
