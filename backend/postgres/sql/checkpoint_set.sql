-- Stores checkpoint $4 of key $1 for token $2 in lease table $3, only
-- while the lease row shows a live lease with that token. FOR SHARE makes
-- the check and the write one step: a concurrent acquire that would issue
-- a newer token waits for this statement, or, having committed first,
-- fails the re-checked WHERE. A semaphore's row (run_id '') never
-- qualifies: its token is its newest holder's, and checkpoints are a plain
-- lock's. No row inserted or updated: refused.
WITH holder AS (
    SELECT key, token FROM {{table}}
    WHERE key = $1 AND token = $2 AND expires_at > now() AND run_id <> ''
    FOR SHARE
)
INSERT INTO {{schema}}.lockrun_checkpoints AS c (lease_table, key, token, value, written_at)
SELECT $3, key, token, $4, now() FROM holder
ON CONFLICT (lease_table, key) DO UPDATE
    SET token = excluded.token, value = excluded.value, written_at = excluded.written_at
    WHERE c.token <= excluded.token
