-- Blocks, inside the caller's transaction, until this session is first in
-- line for advisory lock $1 (the key's waiting line): PostgreSQL grants it
-- to one waiter at a time, in order of arrival, and frees it when the
-- transaction ends or the session dies.
--
-- First in line, the session goes idle in its transaction while its
-- client listens on another (see front in wait.go). It may stay idle for
-- $3 milliseconds at first, and then for as long as the client's last
-- word on it says (keep.sql): past that the server ends the session,
-- which frees the head of the line from a client that froze or was cut
-- off there. The wait itself gives up after $2 milliseconds (SQLSTATE
-- 55P03), a backstop for a line whose front set no such bound.
--
-- A transaction_timeout (PostgreSQL 17 and later) set for the role or the
-- database would end a long wait, or a long stay at the front, with the
-- session: it is turned off for this transaction, where the setting
-- exists; inside a transaction only zero disarms its timer.
--
-- The timeouts are set in a materialized CTE so that they are in force
-- before the lock is asked for, and only for this transaction.
WITH patience AS MATERIALIZED (
    SELECT set_config('lock_timeout', $2::text, true),
        set_config('idle_in_transaction_session_timeout', $3::text, true),
        CASE WHEN current_setting('transaction_timeout', true) IS NOT NULL
            THEN set_config('transaction_timeout', '0', true) END
)
SELECT pg_advisory_xact_lock($1) FROM patience
