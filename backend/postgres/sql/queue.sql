-- Blocks, inside the caller's transaction, until this session is first in
-- line for advisory lock $1 (the key's waiting line): PostgreSQL grants it
-- to one waiter at a time, in order of arrival, and frees it when the
-- transaction ends or the session dies.
--
-- The wait gives up after $2 milliseconds (SQLSTATE 55P03), so that a
-- front waiter that is alive but stuck cannot hold up the line forever.
-- The timeout is set in a materialized CTE so that it is in force before
-- the lock is asked for, and only for this transaction.
WITH patience AS MATERIALIZED (
    SELECT set_config('lock_timeout', $2::text, true)
)
SELECT pg_advisory_xact_lock($1) FROM patience
