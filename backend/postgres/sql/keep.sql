-- Keeps this session's place at the head of a key's waiting line (see
-- queue.sql) for $1 more milliseconds of silence: the front waiter says
-- so before a sleep that would outlast its place (see place.keepFor in
-- wait.go).
SELECT set_config('idle_in_transaction_session_timeout', $1::text, true)
