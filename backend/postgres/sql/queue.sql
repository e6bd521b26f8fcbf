-- Blocks, inside the caller's transaction, until this session is first in
-- line for advisory lock $1 (the key's waiting line): PostgreSQL grants it
-- to one waiter at a time, in order of arrival, and frees it when the
-- transaction ends or the session dies.
SELECT pg_advisory_xact_lock($1)
